"""What Xid events and the GPU health rules cost the agent, over the stand-in
libnvidia-ml.so.1 with 8 GPUs.

Prints one JSON line:
- empty_wait: NvmlXidEvents.wait with a 1 ms timeout and no Xid queued, microseconds per
  call (what the event thread spends per round when nothing happens, the timeout included);
- xid_latency: an Xid line written into the library's state file until wait() returns it
  (the stand-in polls every 2 ms, so this bounds the stand-in, not NVML), p50/p99 in ms;
- health_tick: gpu_health.evaluate over 8 busy GPUs, microseconds per tick;
- agent_tick: a whole NodeAgent tick over the stand-in (8 GPUs, one process each, Xid thread
  object present, no Xid), microseconds, for comparison with bench/agent_sampling.py.

    OBSERVER_TEST_FAKE_NVML_LIB=.build/fake-nvml/libnvidia-ml.so.1 PYTHONPATH=. \\
        python bench/xid_events.py
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.agent.xids import XidWatch
from observer.clock import ManualClock, SystemClock
from observer.detectors import gpu_health
from observer.domain import GpuReading, Owner, OwnerKind, XidEvent
from observer.gpu.nvml import NvmlGpuBackend
from observer.metrics import AgentMetrics
from observer.ownership.fake import FakeHost
from observer.settings.detectors import GpuHealthSettings, NodeLeakSettings
from tests.gpu.fake_nvml import FakeNvmlGpu, FakeXid, write_state

GPUS = 8
LATENCY_ROUNDS = 50


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    library = Path(os.environ["OBSERVER_TEST_FAKE_NVML_LIB"])
    state = Path(tempfile.mkdtemp()) / "state"
    os.environ["FAKE_NVML_STATE"] = str(state)
    gpus = [
        FakeNvmlGpu(
            processes=((1000 + i, 2**33),), utilization_gpu_percent=90, clock_event_reasons=4
        )
        for i in range(GPUS)
    ]
    write_state(state, gpus)
    backend = NvmlGpuBackend(SystemClock(), library)
    backend.open()
    events = backend.xid_events()
    events.open()
    assert all(events.register(i) is None for i in range(GPUS))

    rounds = 200
    started = time.perf_counter()
    for _ in range(rounds):
        assert events.wait(0.001) is None
    empty_wait_us = (time.perf_counter() - started) / rounds * 1e6

    latencies = []
    for n in range(1, LATENCY_ROUNDS + 1):
        written = time.perf_counter()
        write_state(state, gpus, xids=[FakeXid(id=n, gpu=n % GPUS, code=79)])
        got = events.wait(1.0)
        latencies.append((time.perf_counter() - written) * 1e3)
        assert isinstance(got, XidEvent), got
    events.close()

    clock = ManualClock(datetime(2026, 12, 1, tzinfo=UTC))
    metrics = AgentMetrics(CollectorRegistry())
    host = FakeHost()
    for i in range(GPUS):
        host.spawn(1000 + i, Owner(OwnerKind.POD, f"pod-{i}"))
    watch = XidWatch(backend.xid_events(), None, 0.001, threading.Event(), metrics.xid_source_up)
    agent = NodeAgent(
        "bench",
        Sampler(backend, clock, metrics, counters_interval_seconds=60),
        Attributor(host, host),
        NodeLeakSettings(),
        clock,
        metrics,
        health=GpuHealthSettings(),
        xids=watch,
    )
    agent.tick()
    snap = agent.snapshot()
    assert snap is not None
    readings: tuple[GpuReading, ...] = snap.gpus
    view = gpu_health.HealthView("bench", clock.now(), readings, snap.processes)
    history: gpu_health.HealthHistory = {}
    rounds = 5000
    started = time.perf_counter()
    for _ in range(rounds):
        _, history = gpu_health.evaluate(view, history, GpuHealthSettings())
    health_us = (time.perf_counter() - started) / rounds * 1e6

    rounds = 500
    started = time.perf_counter()
    for _ in range(rounds):
        agent.tick()
        clock.advance(1)
    tick_us = (time.perf_counter() - started) / rounds * 1e6
    agent.close()

    print(
        json.dumps(
            {
                "gpus": GPUS,
                "empty_wait_us": round(empty_wait_us, 1),
                "xid_latency_ms": {
                    "p50": round(_percentile(latencies, 0.5), 2),
                    "p99": round(_percentile(latencies, 0.99), 2),
                },
                "health_tick_us": round(health_us, 1),
                "agent_tick_us": round(tick_us, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
