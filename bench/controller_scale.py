"""One controller against 1,000 nodes x 8 GPUs: does it keep up at the default cadence?

The production composition (every task the daemon runs: the plan, follow, detect, scheduler
sampling, the fleet reader, the all-jobs listing, the reports; those whose source is not
configured are listed under `left_out`), stepped by SimulatedSoak on a manual clock over the
simulated cluster for the probes, with other users' load added to every scheduler snapshot
(tens of thousands of jobs, most of them pending, the running ones filling the nodes, a share
ending and starting every snapshot), and 1,000 agents whose /v1/snapshot bodies the
controller decodes as it would over HTTP. Every task ticks at its default interval.

Measured per task: wall time (perf_counter) and CPU (process_time) of each tick, with the
simulated agents' own work - building their snapshot bodies - taken out (the simulated
scheduler's bookkeeping stays in, as a real backend's parsing would); peak memory
(ru_maxrss); store growth (rows and bytes) on SQLite and, when reachable, PostgreSQL
(OBSERVER_BENCH_POSTGRES_URL, default the local test server; a schema of its own, dropped
after). Half a simulated hour is run and the growth extrapolated to a day and a week, which the
output says. `keeps_up` is judged on the wall clock: no task's p99 tick outlasts its interval
and all tasks together are busy less than one core's time; `headroom` is how many times over
it would fit.

Prints one JSON line.

    .venv/bin/python bench/controller_scale.py [--nodes 1000] [--minutes 30] [--jobs 30000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from observer import codec
from observer.backends.base import queue_states
from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.clock import Clock, ManualClock
from observer.controller.compose import Sources, Task
from observer.domain import (
    DriverState,
    DriverStatus,
    Finding,
    FindingKind,
    GpuIdentity,
    GpuProcess,
    GpuReading,
    GpuSample,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    SchedulerSnapshot,
    Severity,
)
from observer.errors import BackendError, SnapshotError
from observer.logs import configure_logging
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.database import upgrade
from observer.storage.store import Store
from observer.storage.tables import metadata

# A weekday at 10:00 in Shanghai: inside the default weekday-peak window.
START = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
GPUS_PER_NODE = 8
PROBE_NODES = 10  # the probes' nodes carry no background load, so probes always find room
TENANTS = {"research": 0.5, "prod": 0.3, "batch": 0.2}
CHURN_PER_SNAPSHOT = 0.01  # share of running background jobs that end at each snapshot
NODES_WITH_FINDINGS = 0.01  # share of agents reporting an open node finding
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
GIB = 2**30


def settings_for(url: str, nodes: int) -> Settings:
    """Default cadences and windows; a busy plan so probes run and are followed throughout."""
    return Settings.model_validate(
        {
            "controller": {
                "timezone": "Asia/Shanghai",
                "tenants": [{"name": n, "weight": w} for n, w in TENANTS.items()],
                "plan": [
                    {"window": "weekday-peak", "probe": p, "every_seconds": s}
                    for p, s in (
                        ("short", 300),
                        ("multi-gpu", 1800),
                        ("fail-exit", 1800),
                        ("log-canary", 1800),
                        ("fairness", 900),
                    )
                ],
                "simulation": {
                    "nodes": nodes,
                    "gpus_per_node": GPUS_PER_NODE,
                    "pools": ["pool-a", "pool-b", "pool-c", "pool-d"],
                },
                "logs": {"settle_seconds": 30},
            },
            "storage": {"url": url},
        }
    )


class LoadedCluster(SimulatedCluster):
    """The simulated cluster, with other users' jobs in every snapshot: `jobs` of them, the
    running ones filling every node but the probes' own, the rest pending with the
    scheduler's reasons; at each snapshot a share of the running ones end and pending ones
    take their GPUs."""

    def __init__(self, nodes: list[NodeSpec], clock: Clock, jobs: int, rng: random.Random):
        super().__init__(nodes, [TenantSpec(n, w) for n, w in TENANTS.items()], clock)
        self._rng = rng
        self._background_ids = itertools.count()
        self._loaded = [n.name for n in nodes[PROBE_NODES:]]
        self._free = {name: GPUS_PER_NODE for name in self._loaded}
        self.running: dict[str, JobStatus] = {}
        self.pending: dict[str, JobStatus] = {}
        now = clock.now()
        for name in self._loaded:
            self._fill(name, now)
        while len(self.running) + len(self.pending) < jobs:
            self._submit(now - timedelta(seconds=rng.uniform(0, 6 * 3600)))

    def _job(self, gpus: int, at: datetime) -> JobStatus:
        tenant = self._rng.choices(list(TENANTS), list(TENANTS.values()))[0]
        job_id = f"bg-{next(self._background_ids)}"
        return JobStatus(job_id, None, tenant, None, JobPhase.PENDING, gpus, at)

    def _submit(self, at: datetime) -> None:
        job = self._job(self._rng.choice((1, 1, 2, 4, 8)), at)
        reason = self._rng.choice(("Resources", "Priority", "Priority", "QOSMaxGRESPerUser"))
        self.pending[job.job_id] = replace(job, reason=reason)

    def _fill(self, node: str, at: datetime) -> None:
        while self._free[node]:
            fitting = [j for j in list(self.pending.values())[:50] if j.gpus <= self._free[node]]
            job = fitting[0] if fitting else self._job(1, at)
            self.pending.pop(job.job_id, None)
            self.running[job.job_id] = replace(
                job, phase=JobPhase.RUNNING, started_at=at, reason=None, nodes=(node,)
            )
            self._free[node] -= job.gpus

    def snapshot(self) -> SchedulerSnapshot:
        own = super().snapshot()
        now = own.at
        for job_id in self._rng.sample(
            list(self.running), int(len(self.running) * CHURN_PER_SNAPSHOT)
        ):
            job = self.running.pop(job_id)
            self._free[job.nodes[0]] += job.gpus
            self._submit(now)
        for node in {n for n, free in self._free.items() if free}:
            self._fill(node, now)
        background = [*self.running.values(), *self.pending.values()]
        held = {name: GPUS_PER_NODE - free for name, free in self._free.items()}
        nodes = tuple(
            replace(
                n,
                gpus_allocated=n.gpus_allocated + held.get(n.name, 0),
                state="allocated" if n.name in held else n.state,
            )
            for n in own.nodes
        )
        jobs = (*own.jobs, *background)
        return SchedulerSnapshot(now, queue_states(jobs, now, TENANTS), nodes, jobs)

    def busy_gpus(self, node: str) -> int:
        """GPUs held on `node` now: by probes and by other users' jobs."""
        probes = sum(j.placement.get(node, 0) for j in self._jobs.values() if not j.phase.finished)
        return probes + GPUS_PER_NODE - self._free.get(node, GPUS_PER_NODE)


class Agents:
    """Every node's agent as the controller reads it: a /v1/snapshot body, decoded. The
    agents' side (building the body) is timed apart so it can be taken out."""

    def __init__(self, cluster: LoadedCluster, clock: ManualClock) -> None:
        self._cluster = cluster
        self._clock = clock
        self.cpu_seconds = 0.0
        names = sorted(cluster.nodes)
        step = max(1, int(1 / NODES_WITH_FINDINGS))
        self._finding_nodes = set(names[PROBE_NODES::step])

    def agents(self) -> list[str]:
        return sorted(self._cluster.nodes)

    def fetch_all(self, agents: Sequence[str]) -> dict[str, NodeSnapshot | BackendError]:
        return {agent: self._fetch(agent) for agent in agents}

    def _fetch(self, agent: str) -> NodeSnapshot | BackendError:
        began = time.process_time()
        body = json.dumps(codec.snapshot_to_json(self._snapshot(agent))).encode()
        self.cpu_seconds += time.process_time() - began
        try:  # decoded as HttpFleet decodes an agent's answer
            return codec.snapshot_from_bytes(body)
        except SnapshotError as exc:
            return BackendError(str(exc))

    def _snapshot(self, node: str) -> NodeSnapshot:
        now = self._clock.now()
        busy = self._cluster.busy_gpus(node)
        gpus = []
        for i in range(GPUS_PER_NODE):
            working = i < busy
            gpus.append(
                GpuReading(
                    index=i,
                    identity=GpuIdentity(i, f"GPU-{node}-{i}", "NVIDIA H200", 141 * GIB, None),
                    sample=GpuSample(
                        at=now,
                        index=i,
                        utilization_gpu_percent=(37 * i + now.minute) % 100 if working else 0,
                        memory_used_bytes=(60 if working else 0) * GIB + 600 * 2**20,
                        memory_total_bytes=141 * GIB,
                        processes=(GpuProcess(4000 + i, 60 * GIB),) if working else (),
                        power_milliwatts=650_000 if working else 90_000,
                    ),
                    counters=None,
                    baseline_memory_bytes=600 * 2**20,
                )
            )
        findings: tuple[Finding, ...] = ()
        if node in self._finding_nodes:
            findings = (
                Finding(
                    detector="allocated_idle",
                    kind=FindingKind.CONDITION,
                    subject={"node": node, "gpu": "7"},
                    severity=Severity.WARNING,
                    summary=f"{node} GPU 7 allocated and idle",
                    opened_at=START,
                    closed_at=None,
                    evidence={"utilization_gpu_percent": 0},
                ),
            )
        driver = DriverStatus(DriverState.OK, "550.54")
        return NodeSnapshot(node, now, driver, tuple(gpus), (), findings)


class Timed:
    """Wraps a task's tick: wall and CPU seconds of each call, less what the agents spent
    meanwhile (the simulated agents building their snapshot bodies is not the controller's
    work)."""

    def __init__(self, task: Task, agents: Agents) -> None:
        self.task = task
        self._agents = agents
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.failures = 0

    def __call__(self) -> object:
        agents, began, wall = self._agents.cpu_seconds, time.process_time(), time.perf_counter()
        try:
            result = self.task.tick()
        except Exception:
            self.failures += 1
            raise
        spent = self._agents.cpu_seconds - agents
        self.cpu.append(time.process_time() - began - spent)
        self.wall.append(time.perf_counter() - wall - spent)
        return result


def _store_size(url: str, store_path: Path | None) -> tuple[dict[str, int], int]:
    """Rows per table, and bytes: the SQLite file (with its WAL) or PostgreSQL's
    pg_total_relation_size of every table the store has (indexes and TOAST included)."""
    engine = sa.create_engine(url)
    tables = sorted(metadata.tables)
    with engine.connect() as connection:
        rows = {
            t: connection.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one() for t in tables
        }
        if store_path is None:
            size = sum(
                connection.execute(sa.text(f"SELECT pg_total_relation_size('{t}')")).scalar_one()
                for t in tables
            )
        else:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            size = store_path.stat().st_size
    engine.dispose()
    return rows, size


def run(url: str, store_path: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    settings = settings_for(url, args.nodes)
    cfg = settings.controller
    upgrade(url)
    rows_before, bytes_before = _store_size(url, store_path)
    clock = ManualClock(START)
    rng = random.Random(args.seed)
    specs = [
        NodeSpec(
            f"node-{i:04d}", GPUS_PER_NODE, cfg.simulation.pools[i % len(cfg.simulation.pools)]
        )
        for i in range(args.nodes)
    ]
    cluster = LoadedCluster(specs, clock, args.jobs, rng)
    store = Store(url)
    agents = Agents(cluster, clock)
    timed: dict[str, Timed] = {}

    def timer(task: Task) -> Task:
        # Plan entries of one probe in several windows are one figure.
        timing = timed.setdefault(task.name, Timed(task, agents))
        return replace(task, tick=timing)

    soak = SimulatedSoak(settings, clock, store, cluster, Sources(agents), timed=timer)
    simulated_seconds = args.minutes * 60.0
    wall_began = time.perf_counter()
    soak.run_for(simulated_seconds)
    wall = time.perf_counter() - wall_began
    runs = len(store.runs())
    store.close()
    rows_after, bytes_after = _store_size(url, store_path)
    per_day = 86400.0 / simulated_seconds
    loops = {
        name: {
            "interval_seconds": t.task.interval_seconds,
            "ticks": len(t.cpu),
            "cpu_ms_median": round(1000 * statistics.median(t.cpu or [0.0]), 2),
            "cpu_ms_max": round(1000 * max(t.cpu or [0.0]), 2),
            "p50_wall_ms": round(1000 * statistics.median(t.wall or [0.0]), 2),
            "p99_wall_ms": round(1000 * _p99(t.wall), 2),
            "failed_ticks": t.failures,
        }
        for name, t in timed.items()
    }
    busy = sum(sum(t.wall) for t in timed.values()) / simulated_seconds
    controller_cpu = sum(sum(t.cpu) for t in timed.values())
    core_share = controller_cpu / simulated_seconds
    slowest = max(_p99(t.wall) / t.task.interval_seconds for t in timed.values())
    grown = {t: rows_after[t] - rows_before[t] for t in rows_after}
    return {
        "loops": loops,
        "cycle_cpu_seconds": round(
            controller_cpu / (simulated_seconds / cfg.observe_interval_seconds), 3
        ),
        "core_share": round(core_share, 4),
        "busy_share": round(busy, 4),
        # On the wall clock: every task's p99 tick within its interval, all of them together
        # busy less than one core's time.
        "keeps_up": busy < 1 and slowest < 1,
        "headroom": round(min(1 / busy, 1 / slowest), 1),
        "left_out": dict(soak.composition.left_out),
        "probe_runs": runs,
        "store_rows_per_day": {t: round(n * per_day) for t, n in grown.items()},
        "store_bytes_per_day": round((bytes_after - bytes_before) * per_day),
        "store_bytes_per_week": round((bytes_after - bytes_before) * per_day * 7),
        "wall_seconds": round(wall, 1),
    }


def _p99(values: Sequence[float]) -> float:
    if len(values) < 2:
        return max(values, default=0.0)
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def postgres_schema(url: str) -> tuple[str, Callable[[], None]] | None:
    """A schema of its own on the server, and how to drop it; None when unreachable."""
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    except sa.exc.OperationalError:
        admin.dispose()
        return None

    def drop() -> None:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()

    scoped = sa.make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    return scoped.render_as_string(hide_password=False), drop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=30.0, help="simulated time")
    parser.add_argument("--jobs", type=int, default=30_000, help="other users' jobs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    configure_logging("warning")  # failed ticks still show, on stderr
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "gpus": args.nodes * GPUS_PER_NODE,
        "background_jobs": args.jobs,
        "simulated_minutes": args.minutes,
        "extrapolated": f"per day and week: {args.minutes:g} simulated minutes x "
        f"{1440 / args.minutes:g} (x7)",
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "observer.db"
        result["sqlite"] = run(f"sqlite:///{path}", path, args)
    postgres = (
        None
        if args.no_postgres
        else postgres_schema(os.environ.get("OBSERVER_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    )
    if postgres is not None:
        url, drop = postgres
        try:
            result["postgresql"] = run(url, None, args)
        finally:
            drop()
    # Both runs, one after the other in this process: the larger of the two.
    result["peak_memory_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
