"""Does the store keep to its budget? A week of GPU samples, stored and pruned as the daemon does.

Every GPU's sample every `controller.gpu_sample_interval_seconds` (300 s), stored through
`Store.add_gpu_samples` with the counts reports read (what the fleet task stores: every
field set, two thirds of the GPUs held by a tenant's job or a probe), on a manual clock, and
the controller's store upkeep (`StoreUpkeep.tick`: raw samples past
`--retention-days` deleted in batches, all but the hours a report reads raw; freed pages
given back; the size measured) every simulated hour, as the daemon runs it. The calendar is
the default one (Asia/Shanghai, windows on whole hours) and the soak starts inside an hour.

At the end of each simulated day: the store's size on its volume (SQLite: file and WAL after a
checkpoint; PostgreSQL: `pg_database_size`), its GPU-sample rows, and bytes per table.
From them: the bytes a GPU-day of raw samples costs while kept (`raw_bytes_per_gpu_day`: the
growth per GPU-day before any deletion), the bytes a GPU-day leaves for the rest of the soak
(`kept_bytes_per_gpu_day`: the growth per GPU-day once deletion keeps pace), and the size of
a 28-day soak of `--nodes` x 8 GPUs with the default 7-day retention and without any, stated
from those two measured rates. The retention is short by default (2 days) so that a measured
week holds five days of deletion keeping pace.

Prints one JSON line.

    .venv/bin/python bench/store_budget.py [--nodes 1000] [--days 7] [--retention-days 2]
        [--no-sqlite] [--no-postgres]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from controller_scale import DEFAULT_POSTGRES_URL, GPUS_PER_NODE, postgres_schema
from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.upkeep import StoreUpkeep
from observer.controller.views import Published
from observer.logging_setup import configure_logging
from observer.metrics import ControllerMetrics
from observer.records import StoredGpuSample
from observer.settings import Settings
from observer.storage.database import upgrade
from observer.storage.store import Store

DEFAULT_RETENTION_DAYS = 7
PROJECTED_DAYS = 28
TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 11, 30, 9, 17, tzinfo=TZ)  # a Monday, inside an hour
POSTGRES_URL = os.environ.get("OBSERVER_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def _samples(nodes: int, at: datetime, rng: random.Random) -> Iterator[StoredGpuSample]:
    for n in range(nodes):
        for gpu in range(GPUS_PER_NODE):
            held = rng.random() < 2 / 3
            yield StoredGpuSample(
                node=f"node-{n:04d}",
                gpu_uuid=f"GPU-{n:04d}-{gpu}",
                gpu_index=gpu,
                at=at,
                utilization_gpu_percent=rng.randrange(101) if held else 0,
                memory_used_bytes=rng.randrange(1, 140) * 2**30 if held else 600 * 2**20,
                memory_total_bytes=141 * 2**30,
                power_milliwatts=rng.randrange(90_000, 700_000),
                process_count=rng.randrange(1, 3) if held else 0,
                tenant=rng.choice(("team-a", "team-b", "team-c")) if held else None,
                task=rng.choice(("job", "job", "job", "short")) if held else None,
            )


def _size(store: Store, url: str) -> int:
    """SQLite: the file once its WAL is checkpointed; PostgreSQL: the store's tables (its
    database may hold others')."""
    if not url.startswith("sqlite"):
        return sum(t.bytes for t in store.table_sizes())
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return store.database_bytes()[0]


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    upgrade(url)
    settings = Settings.model_validate(
        {
            "reports": {"soak_started_at": START.isoformat()},
            "storage": {"raw_retention_days": args.retention_days},
        }
    )
    interval = settings.controller.gpu_sample_interval_seconds
    clock = ManualClock(START)
    store = Store(url, clock, durable=False)
    upkeep = StoreUpkeep(
        store,
        settings,
        clock,
        threading.Event(),
        ControllerMetrics(CollectorRegistry()),
        Published(None),
    )
    rng = random.Random(args.seed)
    gpus = args.nodes * GPUS_PER_NODE
    days: list[dict[str, Any]] = []
    began, upkeep_seconds = time.perf_counter(), 0.0
    size_before = _size(store, url)
    next_hour = START
    for step in range(int(args.days * 86400 / interval)):
        store.add_gpu_samples(_samples(args.nodes, clock.now(), rng))
        clock.advance(interval)
        if clock.now() >= next_hour:
            ticked = time.perf_counter()
            upkeep.tick()
            upkeep_seconds += time.perf_counter() - ticked
            next_hour += timedelta(hours=1)
        if (step + 1) % int(86400 / interval) == 0:
            tables = {t.name: t for t in store.table_sizes()}
            days.append(
                {
                    "day": len(days) + 1,
                    "bytes": _size(store, url),
                    "gpu_sample_rows": tables["gpu_samples"].rows,
                    "bytes_by_table": {n: t.bytes for n, t in tables.items() if t.bytes},
                }
            )
    wall = time.perf_counter() - began
    store.close()
    sizes = [size_before] + [d["bytes"] for d in days]
    growth = [after - before for before, after in itertools.pairwise(sizes)]
    # Before any deletion, a day's growth is a GPU-day of raw samples and what they leave;
    # once deletion keeps pace (from the day after the retention), only what they leave.
    raw = growth[0] / gpus
    steady = growth[args.retention_days + 1 :]
    kept = sum(steady) / len(steady) / gpus if steady else None
    fleet = 1000 * GPUS_PER_NODE
    return {
        "days": days,
        "raw_bytes_per_gpu_day": round(raw),
        "kept_bytes_per_gpu_day": None if kept is None else round(kept),
        "store_bytes_28_days_1000_nodes": {
            "retention_off": round(raw * fleet * PROJECTED_DAYS),
            "retention_7_days": None
            if kept is None
            else round(
                (raw - kept) * fleet * DEFAULT_RETENTION_DAYS + kept * fleet * PROJECTED_DAYS
            ),
        },
        "upkeep_seconds": round(upkeep_seconds, 1),
        "wall_seconds": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--retention-days", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    configure_logging("warning")  # stdout is the result
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "gpus": args.nodes * GPUS_PER_NODE,
        "days": args.days,
        "retention_days": args.retention_days,
    }
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as directory:
            url = f"sqlite:///{Path(directory) / 'observer.db'}"
            result["sqlite"] = run(url, args)
    postgres = None if args.no_postgres else postgres_schema(POSTGRES_URL)
    if postgres is not None:
        url, drop = postgres
        try:
            result["postgresql"] = run(url, args)
        finally:
            drop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
