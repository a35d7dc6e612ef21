"""How long the controller takes to decode one agent's /v1/snapshot body.

The body is what a real agent serves with 8 busy GPUs: three processes on each (two of a
pod, one orphan), attributed, and the orphans' open findings. It is decoded `--reads` times
by `codec.snapshot_from_bytes` (what HttpFleet does with every answer); the median and p99 per
snapshot are printed, with the body's size. Run it on two versions of the code to compare
decoders (PYTHONPATH chooses which `observer` is imported).

Prints one JSON line.

    .venv/bin/python bench/snapshot_decode.py [--reads 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from observer import codec
from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.service import NodeAgent
from observer.clock import ManualClock
from observer.domain import NO_OWNER, NodeSnapshot, Owner, OwnerKind
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.logs import configure_logging
from observer.metrics import AgentMetrics
from observer.ownership.fake import FakeHost
from observer.settings.detectors import NodeLeakSettings

GPUS = 8


def busy_snapshot() -> NodeSnapshot:
    clock = ManualClock(datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    gpus = FakeGpuBackend([FakeGpu(f"GPU-{i}") for i in range(GPUS)], clock)
    host = FakeHost()
    metrics = AgentMetrics(CollectorRegistry())
    agent = NodeAgent(
        "node-3",
        Sampler(gpus, clock, metrics, 60),
        Attributor(host, host),
        NodeLeakSettings(grace_seconds=5),
        clock,
        metrics,
    )
    for i, gpu in enumerate(gpus.gpus):
        host.spawn(1000 + i, NO_OWNER)
        for k in (2000, 3000):
            host.spawn(k + i, Owner(OwnerKind.POD, f"pod-{i}", f"container-{i}"))
        gpu.processes.update({1000 + i: GIB, 2000 + i: 20 * GIB, 3000 + i: 20 * GIB})
    for _ in range(7):
        agent.tick()
        clock.advance(1)
    snap = agent.snapshot()
    assert snap is not None
    return snap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000)
    args = parser.parse_args()
    configure_logging("warning")
    snap = busy_snapshot()
    body = json.dumps(codec.snapshot_to_json(snap)).encode()
    assert codec.snapshot_from_bytes(body) == snap
    seconds = []
    for _ in range(args.reads):
        began = time.perf_counter()
        codec.snapshot_from_bytes(body)
        seconds.append(time.perf_counter() - began)
    print(
        json.dumps(
            {
                "snapshot_bytes": len(body),
                "gpus": GPUS,
                "processes": len(snap.processes),
                "findings": len(snap.findings),
                "reads": args.reads,
                "decode_us_median": round(1e6 * statistics.median(seconds), 1),
                "decode_us_p99": round(1e6 * statistics.quantiles(seconds, n=100)[98], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
