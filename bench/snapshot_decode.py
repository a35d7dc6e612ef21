"""How long the controller takes to decode one agent's /v1/snapshot body.

The body is what a real agent serves with 8 busy GPUs: three processes on each (two of a
pod, one orphan), attributed, and the orphans' open findings. It is decoded `--reads` times
by `wire.snapshot_from_bytes` (what HttpFleet does with every answer); the median and p99 per
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

from observer import codec
from observer.fleet import wire
from observer.logging_setup import configure_logging
from tests.fleet.test_snapshot_decoding import busy_snapshot


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000)
    args = parser.parse_args()
    configure_logging("warning")
    snap = busy_snapshot(pod_processes=2)
    body = json.dumps(codec.snapshot_to_json(snap)).encode()
    assert wire.snapshot_from_bytes(body) == snap
    seconds = []
    for _ in range(args.reads):
        began = time.perf_counter()
        wire.snapshot_from_bytes(body)
        seconds.append(time.perf_counter() - began)
    print(
        json.dumps(
            {
                "snapshot_bytes": len(body),
                "gpus": len(snap.gpus),
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
