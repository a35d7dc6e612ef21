"""Reports of a week of a 1,000-node x 8-GPU soak: seconds to build a daily summary and the
verdict.

A store is filled in bulk with what the controller would have stored over the week at its
default cadences (bench/controller_scale.py measures the controller itself): every GPU's
sample every controller.gpu_sample_interval_seconds, each agent on its own clock; the queue
rows of a scheduler snapshot every controller.snapshot_interval_seconds; the node change log
(a share of the nodes changing at each snapshot); the probe runs of the plan and their
findings, node findings, alerts and interventions. The samples go in at schema 0004 (without
the kind of task that held the GPU, kept from 0013 on: their tasks read "not known"), before
the per-minute and per-hour counts existed, and `upgrade_seconds` is the upgrade that counts
them once (a week-old database moving to 0005); from then on the controller adds to the counts
as it stores samples (bench/controller_scale.py). Then the real report code builds the first
day's summary, the last day's (which reduces the whole soak so far, day by day) and the
verdict, on SQLite and, when reachable, PostgreSQL (OBSERVER_BENCH_POSTGRES_URL, default the
local test server; a schema of its own, dropped after); and the store's bytes per GPU-day,
with every raw sample kept and once those past their retention are deleted.

`--samples counts` (for 5,000 nodes: 80 M sample rows a week would take hours to insert
here) stores no sample rows but the counts the controller keeps of them, as many rows as it
keeps (one per UTC minute, per node and UTC hour, per tenant and UTC hour), with each GPU's
utilisation held for the hour so that they are cheap to make; in the platform's timezone
(Asia/Shanghai, whole hours from UTC) a day is whole UTC hours, which reports read from the
counts alone (only a period's part-hours, the soak's first submission, read sample rows).

`--keep DIR` keeps the filled stores (DIR/<fill>.db, a PostgreSQL schema named after the
fill) and the reports built (DIR/<fill>-<store>/), and a later run with the same fill
arguments builds on those stores without filling them again: to compare reports before and
after a change (`diff -r`), or to profile a build without waiting for a fill.

Prints one JSON line.

    .venv/bin/python bench/report.py [--nodes 1000] [--days 7] [--samples raw|counts]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from controller_scale import (
    DEFAULT_POSTGRES_URL,
    GPUS_PER_NODE,
    TENANTS,
    bytes_per_gpu_day,
    postgres_schema,
    store_tables,
)

from observer.cli import GC_FIRST_GENERATION_THRESHOLD
from observer.domain import (
    Expectation,
    Finding,
    FindingKind,
    Outcome,
    ProbeRun,
    RunState,
    Severity,
)
from observer.logging_setup import configure_logging
from observer.records import TENANT_JOB, StoredAlert, StoredIntervention
from observer.reports.publish import write_daily, write_verdict
from observer.settings import Settings
from observer.storage import store as store_module
from observer.storage.database import upgrade
from observer.storage.store import Store
from observer.storage.tables import (
    gpu_minutes_table,
    gpu_node_hours_table,
    gpu_task_hours_table,
    node_states_table,
    queue_samples_table,
)

SHANGHAI = ZoneInfo("Asia/Shanghai")
MONDAY = date(2026, 11, 30)
POOLS = ("pool-a", "pool-b", "pool-c", "pool-d")
NODE_CHANGES_PER_SNAPSHOT = 50  # as bench/controller_scale.py's churn stores
PROBES = (  # probe, expectation, how it ends
    ("short", Expectation.SUCCEED, None),
    ("fairness", Expectation.SUCCEED, None),
    ("fail-exit", Expectation.FAIL, "NonZeroExitCode"),
    ("log-canary", Expectation.SUCCEED, None),
    ("multi-gpu", Expectation.SUCCEED, None),
)
# What held a busy GPU: mostly tenants' own jobs, now and then one of the observer's probes.
TASKS = (TENANT_JOB, TENANT_JOB, TENANT_JOB, "gpu-busy")
_SAMPLE_COLUMNS = (
    "node",
    "gpu_uuid",
    "gpu_index",
    "at",
    "utilization_gpu_percent",
    "memory_used_bytes",
    "memory_total_bytes",
    "power_milliwatts",
    "process_count",
    "tenant",
)


def settings_for(url: str, output_dir: Path, nodes: int) -> Settings:
    return Settings.model_validate(
        {
            "controller": {
                "timezone": "Asia/Shanghai",
                "tenants": [{"name": n, "weight": w} for n, w in TENANTS.items()],
                "simulation": {"nodes": nodes, "gpus_per_node": GPUS_PER_NODE},
                "agent_dns_name": "observer-agent.observer.svc",
            },
            "storage": {"url": url},
            "reports": {"output_dir": str(output_dir)},
        }
    )


def _samples(
    nodes: int, start: datetime, end: datetime, every: float, rng: random.Random
) -> Iterator[tuple[Any, ...]]:
    """Every GPU's stored samples, time order; each agent's clock offset from the others."""
    tenants = list(TENANTS)
    offsets = [rng.uniform(0, every) for _ in range(nodes)]
    step = timedelta(seconds=every)
    tick = start
    while tick < end:
        for n in range(nodes):
            at = tick + timedelta(seconds=offsets[n])
            if at >= end:
                continue
            node = f"node-{n:04d}"
            for g in range(GPUS_PER_NODE):
                busy = (n * 7 + g + at.hour) % 10 < 7
                percent = (n * 13 + g * 29 + at.minute) % 101 if busy else 0
                yield (
                    node,
                    f"GPU-{node}-{g}",
                    g,
                    at,
                    percent if (n + g + at.minute) % 997 else None,  # a rare failed read
                    (60 if busy else 0) * 2**30,
                    141 * 2**30,
                    650_000 if busy else 90_000,
                    1 if busy else 0,
                    tenants[(n + at.hour) % len(tenants)] if busy else None,
                )
        tick += step


def _insert_samples(url: str, rows: Iterator[tuple[Any, ...]]) -> int:
    """Straight through the driver (COPY on PostgreSQL): the fill is not what is measured."""
    engine = sa.create_engine(url)
    count = 0
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        columns = ", ".join(_SAMPLE_COLUMNS)
        if engine.dialect.name == "postgresql":
            with cursor.copy(f"COPY gpu_samples ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
        else:
            cursor.execute("PRAGMA synchronous=OFF")  # a lost fill is filled again
            marks = ", ".join("?" * len(_SAMPLE_COLUMNS))
            insert = f"INSERT INTO gpu_samples ({columns}) VALUES ({marks})"
            batch: list[tuple[Any, ...]] = []
            for row in rows:
                # SQLite keeps instants as UTC text, as the store's column type writes them.
                batch.append((*row[:3], _utc_text(row[3]), *row[4:]))
                if len(batch) == 100_000:  # committed by batch: the WAL stays small
                    cursor.executemany(insert, batch)
                    raw.commit()
                    count += len(batch)
                    batch = []
            cursor.executemany(insert, batch)
            count += len(batch)
        raw.commit()
    finally:
        raw.close()
        engine.dispose()
    return count


def _utc_text(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _scheduler_rows(
    nodes: int, start: datetime, end: datetime, every: float, rng: random.Random
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    queues: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    allocated = [GPUS_PER_NODE] * nodes

    def node_row(at: datetime, n: int) -> dict[str, Any]:
        used = allocated[n]
        return {
            "at": at,
            "node": f"node-{n:04d}",
            "pool": POOLS[n % len(POOLS)],
            "gpus_total": GPUS_PER_NODE,
            "gpus_allocated": used,
            "state": "allocated" if used == GPUS_PER_NODE else ("idle" if not used else "mixed"),
            "reason": None,
            "removed": False,
        }

    changes += [node_row(start, n) for n in range(nodes)]
    at = start
    while at < end:
        for tenant in TENANTS:
            pending = rng.randint(5_000, 12_000)
            queues.append(
                {
                    "at": at,
                    "tenant": tenant,
                    "queue": None,
                    "pending_jobs": pending,
                    "pending_gpus": pending * 2,
                    "running_jobs": rng.randint(800, 1_200),
                    "running_gpus": rng.randint(2_000, 2_800),
                    "longest_wait_seconds": rng.uniform(600, 20_000),
                    "pending_reasons": {"Resources": pending // 3, "Priority": pending // 2},
                }
            )
        for n in rng.sample(range(nodes), min(NODE_CHANGES_PER_SNAPSHOT, nodes)):
            allocated[n] = rng.randint(0, GPUS_PER_NODE)
            changes.append(node_row(at, n))
        at += timedelta(seconds=every)
    return queues, changes


def _runs_and_findings(
    start: datetime, end: datetime, rng: random.Random
) -> tuple[list[ProbeRun], list[Finding]]:
    runs: list[ProbeRun] = []
    findings: list[Finding] = []
    at = start + timedelta(minutes=5)
    n = 0
    while at < end:
        probe, expectation, reason = PROBES[n % len(PROBES)]
        tenant = list(TENANTS)[n % len(TENANTS)]
        started = at + timedelta(seconds=rng.uniform(1, 600))
        finished = started + timedelta(seconds=rng.uniform(60, 900))
        runs.append(
            ProbeRun(
                run_id=f"run-{n:06d}",
                probe=probe,
                tenant=tenant,
                queue=None,
                window="weekday-peak" if at.astimezone(SHANGHAI).hour in range(9, 18) else None,
                expectation=expectation,
                gpus=8 if probe == "multi-gpu" else 1,
                nodes=1,
                state=RunState.DONE,
                job_id=f"job-{n}",
                submitted_at=at,
                started_at=started,
                finished_at=finished,
                outcome=Outcome.PASSED if rng.random() < 0.95 else Outcome.FAILED,
                exit_code=1 if reason else 0,
                reason=reason,
                pending_reasons={"Resources": (started - at).total_seconds()},
                node_names=(f"node-{rng.randrange(10):04d}",),
            )
        )
        n += 1
        at += timedelta(seconds=300)
    at = start
    while at < end:  # a node finding and a scheduler one every two hours, open for a while
        node = f"node-{rng.randrange(1000):04d}"
        for detector, subject in (
            ("allocated_idle", {"node": node, "gpu_uuid": f"GPU-{node}-3", "pid": "4242"}),
            ("allocated_without_job", {"node": node}),
        ):
            opened = at + timedelta(seconds=rng.uniform(0, 3600))
            findings.append(
                Finding(
                    detector=detector,
                    kind=FindingKind.CONDITION,
                    subject=subject,
                    severity=Severity.WARNING,
                    summary=f"{detector} on {node}",
                    opened_at=opened,
                    closed_at=opened + timedelta(seconds=rng.uniform(300, 5400)),
                    evidence={"gpus": 1},
                )
            )
        at += timedelta(hours=2)
    return runs, findings


def _migrate(url: str, revision: str) -> None:
    config = Config()
    config.set_main_option(
        "script_location", str(Path(store_module.__file__).with_name("migrations"))
    )
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    engine.dispose()


def _insert_counts(url: str, nodes: int, start: datetime, end: datetime, every: float) -> int:
    """The per-minute, per-node-hour and per-tenant-and-task-hour counts of every GPU's
    sample every `every` seconds, each GPU's utilisation constant for the hour; returns the
    samples counted. Each agent's samples fall on one of the five minutes of every five (its
    clock's offset)."""
    tenants = list(TENANTS)
    offsets = [n % 5 for n in range(nodes)]  # the minute of five each agent samples on
    per_hour = int(3600 // every)
    minutes: list[dict[str, Any]] = []
    node_hours: list[dict[str, Any]] = []
    task_hours: list[dict[str, Any]] = []
    counted = 0
    hour = start.astimezone(UTC)
    while hour < end:
        by_offset = [[0] * 101 for _ in range(5)]
        by_task: dict[tuple[str, str], list[int]] = {}
        for n in range(nodes):
            tally = [0] * 101
            for g in range(GPUS_PER_NODE):
                busy = (n * 7 + g + hour.hour) % 10 < 7
                percent = (n * 13 + g * 29 + hour.hour * 7) % 101 if busy else 0
                tally[percent] += per_hour
                by_offset[offsets[n]][percent] += 1
                if busy:  # a tenant's own job, or now and then one of the observer's probes
                    tenant = tenants[(n + hour.hour) % len(tenants)]
                    task = TASKS[(n + g + hour.hour) % len(TASKS)]
                    by_task.setdefault((tenant, task), [0] * 101)[percent] += per_hour
            unread = 1 if (n + hour.hour) % 97 == 0 else 0  # a rare failed read
            tally[0] -= unread
            counted += GPUS_PER_NODE * per_hour
            node_hours.append(
                {"hour": hour, "node": f"node-{n:04d}", "unread": unread, **_percents(tally)}
            )
        for minute in range(60):
            tally = by_offset[minute % 5]
            minutes.append({"minute": hour + timedelta(minutes=minute), **_percents(tally)})
        task_hours += [
            {"hour": hour, "tenant": t, "task": k, **_percents(tally)}
            for (t, k), tally in by_task.items()
        ]
        hour += timedelta(hours=1)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        for table, rows in (
            (gpu_minutes_table, minutes),
            (gpu_node_hours_table, node_hours),
            (gpu_task_hours_table, task_hours),
        ):
            for at in range(0, len(rows), 50_000):
                connection.execute(sa.insert(table), rows[at : at + 50_000])
    engine.dispose()
    return counted


def _percents(tally: list[int]) -> dict[str, int]:
    return {f"p{p}": k for p, k in enumerate(tally)}


def fill(
    url: str, nodes: int, days: int, settings: Settings, seed: int, raw: bool
) -> dict[str, Any]:
    """Samples at schema 0004, the upgrade to the newest (timed), then everything else; or,
    not `raw`, the samples' counts at the newest schema, then everything else."""
    rng = random.Random(seed)
    cfg = settings.controller
    start = datetime.combine(MONDAY, datetime.min.time(), tzinfo=SHANGHAI)
    end = start + timedelta(days=days)
    every = cfg.gpu_sample_interval_seconds
    upgraded = None
    if raw:
        _migrate(url, "0004")
        stored = _insert_samples(url, _samples(nodes, start, end, every, rng))
        began = time.perf_counter()
        upgrade(url)
        upgraded = round(time.perf_counter() - began, 1)
    else:
        upgrade(url)
        stored = _insert_counts(url, nodes, start, end, every)
    queues, changes = _scheduler_rows(nodes, start, end, cfg.snapshot_interval_seconds, rng)
    runs, findings = _runs_and_findings(start, end, rng)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.insert(queue_samples_table), queues)
        connection.execute(sa.insert(node_states_table), changes)
    engine.dispose()
    with Store(url) as store:
        store.save_runs(runs)
        store.save_findings(findings)
        for day in range(days):
            at = start + timedelta(days=day, hours=10)
            store.save_alerts(
                [StoredAlert(f"fp-{day}", "HighQueueWait", "warning", at, None, at, {})]
            )
            store.add_intervention(StoredIntervention(at, "alice", "drain", {"node": "node-0001"}))
    return {
        ("gpu_samples" if raw else "gpu_samples_counted_not_stored"): stored,
        "queue_samples": len(queues),
        "node_states": len(changes),
        "probe_runs": len(runs),
        "findings": len(findings),
        "upgrade_seconds": upgraded,
    }


def measure(url: str, args: argparse.Namespace, out: Path, kept: Path) -> dict[str, Any]:
    """Fill the store at `url`, unless `kept` (the record of its fill, written once the fill
    is complete) exists, and time the reports, written into `out`."""
    settings = settings_for(url, out, args.nodes)
    if kept.exists():
        filled = json.loads(kept.read_text())
    else:
        began = time.perf_counter()
        rows = fill(url, args.nodes, args.days, settings, args.seed, args.samples == "raw")
        filled = {
            "upgrade_seconds": rows.pop("upgrade_seconds"),
            "rows": rows,
            "fill_seconds": round(time.perf_counter() - began, 1),
        }
        kept.write_text(json.dumps(filled))
    now = datetime.combine(
        MONDAY + timedelta(days=args.days), datetime.min.time(), tzinfo=SHANGHAI
    ) + timedelta(hours=1)
    timings: dict[str, float] = {}
    with Store(url) as store:
        builds = (
            ("daily_first_day", partial(write_daily, store, settings, MONDAY, now)),
            (
                "daily_last_day",
                partial(write_daily, store, settings, MONDAY + timedelta(days=args.days - 1), now),
            ),
            ("verdict", partial(write_verdict, store, settings, now)),
        )
        for name, build in builds:
            began, cpu = time.perf_counter(), time.process_time()
            build()
            timings[f"{name}_seconds"] = round(time.perf_counter() - began, 2)
            timings[f"{name}_cpu_seconds"] = round(time.process_time() - cpu, 2)
    tables = store_tables(url)
    gpu_days = args.nodes * GPUS_PER_NODE * args.days
    sizes = {
        "store_bytes": sum(t.bytes for t in tables.values()),
        "store_bytes_per_gpu_day": bytes_per_gpu_day(
            {n: t.bytes for n, t in tables.items()}, gpu_days
        ),
    }
    return {**timings, **filled, **sizes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--samples", choices=("raw", "counts"), default="raw")
    parser.add_argument("--keep", type=Path, help="keep the stores and reports here, reuse them")
    args = parser.parse_args()
    configure_logging("warning")
    gc.set_threshold(GC_FIRST_GENERATION_THRESHOLD)  # as the controller and `observer report` run
    result: dict[str, Any] = {"nodes": args.nodes, "gpus": args.nodes * GPUS_PER_NODE}
    result["days"] = args.days
    result["samples"] = args.samples
    server = os.environ.get("OBSERVER_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    name = f"report_{args.nodes}n_{args.days}d_{args.samples}_seed{args.seed}"
    with tempfile.TemporaryDirectory() as tmp:
        where: Path = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)

        def kept(store: str) -> Path:
            return where / f"{name}-{store}.json"

        if not args.no_sqlite:
            path = where / f"{name}.db"
            if not kept("sqlite").exists():  # none, or an unfinished fill
                path.unlink(missing_ok=True)
            url = f"sqlite:///{path.resolve()}"
            result["sqlite"] = measure(url, args, where / f"{name}-sqlite", kept("sqlite"))
        postgres = (
            None
            if args.no_postgres
            else postgres_schema(
                server, name if args.keep else None, empty=not kept("postgresql").exists()
            )
        )
        if postgres is not None:
            url, drop = postgres
            try:
                result["postgresql"] = measure(
                    url, args, where / f"{name}-postgresql", kept("postgresql")
                )
            finally:
                drop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
