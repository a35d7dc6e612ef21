"""One controller against 1,000 (or 5,000) nodes x 8 GPUs: does it keep up at the default cadence?

The production composition (every task the daemon runs: the plan, follow, detect, scheduler
sampling, the fleet reader, the all-jobs listing, the reports; those whose source is not
configured are listed under `left_out`), stepped by SimulatedSoak on a manual clock over the
simulated cluster for the probes, with other users' load added to every scheduler snapshot
(tens of thousands of jobs, most of them pending, the running ones filling the nodes, a share
ending and starting every snapshot). Every node's agent serves what a real 8-GPU agent does
(every GPU's sample and counters, two attributed processes on each busy GPU, recent findings)
built with the project's codec. In process (the default) the controller decodes those bodies
as HttpFleet would; with `--http` they are served over real sockets, one port per agent, by
`--workers` processes, and the controller reads them with the real HttpFleet at the default
agent read concurrency and timeout. Every task ticks at its default interval.

Measured per task: wall time (perf_counter) and CPU (process_time) of each tick, with the
in-process agents' own work - building their snapshot bodies - taken out (the simulated
scheduler's bookkeeping stays in, as a real backend's parsing would; served agents rebuild
their bodies between reads, and what serving the reads cost them is reported apart: on this
machine it competes with the controller for the cores); peak RSS of the controller's process;
store growth (rows and bytes per table, and bytes per GPU-day with every raw sample kept and
with raw samples deleted past their retention) on SQLite and, when reachable, PostgreSQL
(OBSERVER_BENCH_POSTGRES_URL, default the local test server; a schema of its own, dropped
after). `--minutes` of simulated time are run and the growth extrapolated to a day and a week,
which the output says. `keeps_up` is judged on the wall clock: no task's p99 tick outlasts its
interval and all tasks together are busy less than one core's time; `headroom` is how many
times over it would fit.

Prints one JSON line.

    .venv/bin/python bench/controller_scale.py [--nodes 1000] [--minutes 30] [--jobs 30000]
        [--http [--workers 4]] [--no-sqlite] [--no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import multiprocessing
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
from functools import partial
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from observer import codec
from observer.backends.base import queue_states
from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.cli import GC_FIRST_GENERATION_THRESHOLD
from observer.clock import Clock, ManualClock
from observer.controller.compose import Sources, Task
from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    Finding,
    FindingKind,
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuReading,
    GpuSample,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
    SchedulerSnapshot,
    Severity,
)
from observer.errors import BackendError, SnapshotError
from observer.fleet import wire
from observer.fleet.base import Fleet
from observer.fleet.http import HttpFleet
from observer.logging_setup import configure_logging
from observer.records import TableSize
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.database import upgrade
from observer.storage.store import Store

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


def node_snapshot(node: str, now: datetime, busy: int, open_finding: bool) -> NodeSnapshot:
    """What a real 8-GPU agent serves: every GPU's sample and counters, two processes of a
    pod on each busy GPU (attributed: executable, user, owner), two findings closed within
    the retention window, and on `open_finding` nodes an open one."""
    gpus, processes = [], []
    for i in range(GPUS_PER_NODE):
        uuid = f"GPU-{node}-{i}"
        working = i < busy
        pids = (4000 + 2 * i, 4001 + 2 * i) if working else ()
        gpus.append(
            GpuReading(
                index=i,
                identity=GpuIdentity(i, uuid, "NVIDIA H200", 141 * GIB, f"00000000:{i:02x}:00.0"),
                sample=GpuSample(
                    at=now,
                    index=i,
                    utilization_gpu_percent=(37 * i + now.minute) % 100 if working else 0,
                    utilization_memory_percent=(11 * i + now.minute) % 100 if working else 0,
                    memory_used_bytes=(60 if working else 0) * GIB + 600 * 2**20,
                    memory_total_bytes=141 * GIB,
                    processes=tuple(GpuProcess(pid, 30 * GIB) for pid in pids),
                    power_milliwatts=650_000 if working else 90_000,
                    temperature_celsius=61 if working else 33,
                    sm_clock_mhz=1980,
                    clock_event_reasons=0,
                    performance_state=0,
                    ecc_volatile_uncorrected_errors=0,
                ),
                counters=GpuCounters(
                    at=now - timedelta(seconds=now.second % 60),
                    index=i,
                    energy_millijoules=int((now - START).total_seconds()) * 650_000,
                    pcie_tx_kilobytes_per_second=1200,
                    pcie_rx_kilobytes_per_second=800,
                    remapped_rows_correctable=0,
                    remapped_rows_uncorrectable=0,
                    remapped_rows_pending=False,
                    remapped_rows_failed=False,
                    retired_pages_single_bit=0,
                    retired_pages_double_bit=0,
                    pcie_replay_errors=0,
                ),
                baseline_memory_bytes=600 * 2**20,
            )
        )
        processes += [
            AttributedProcess(
                gpu_index=i,
                gpu_uuid=uuid,
                pid=pid,
                used_memory_bytes=30 * GIB,
                exists=True,
                command=None,
                owner=Owner(OwnerKind.POD, f"{node}-pod-{i}", f"cri-containerd-{pid:064x}"),
                owner_state=OwnerState(OwnerPhase.RUNNING, None, f"research/train-{node}-{i}"),
                executable="python3",
                uid=1000,
                user="researcher",
            )
            for pid in pids
        ]
    findings = [
        _finding(node, "orphan_process", str(90 + k), START - timedelta(hours=k + 1))
        for k in range(2)
    ]
    if open_finding:
        findings.append(_finding(node, "allocated_idle", "7", START))
    driver = DriverStatus(DriverState.OK, "550.54")
    return NodeSnapshot(node, now, driver, tuple(gpus), tuple(processes), tuple(findings))


def _finding(node: str, detector: str, pid: str, opened_at: datetime) -> Finding:
    """A finding as the agent reports it; closed ten minutes after it opened unless it is the
    open one (opened at the start)."""
    closed = None if opened_at == START else opened_at + timedelta(minutes=10)
    return Finding(
        detector=detector,
        kind=FindingKind.CONDITION,
        subject={"node": node, "gpu_uuid": f"GPU-{node}-7", "pid": pid},
        severity=Severity.WARNING,
        summary=f"pid {pid} (python3) uses GPU 7 (1.0 GiB) and belongs to no pod or job",
        opened_at=opened_at,
        closed_at=closed,
        evidence={
            "gpu_index": 7,
            "pid": int(pid),
            "executable": "python3",
            "uid": 1000,
            "user": "researcher",
            "used_memory_bytes": GIB,
            "owner": "none",
            "owner_phase": "unknown",
            "rule": "no pod or Slurm job in the process's cgroup or environment, for 60 s",
            "condition_since": opened_at.isoformat(),
        },
    )


class Agents:
    """Every node's agent as the controller reads it in process: a /v1/snapshot body,
    decoded. The agents' side (building the body) is timed apart so it can be taken out."""

    def __init__(self, cluster: LoadedCluster, clock: ManualClock) -> None:
        self._cluster = cluster
        self._clock = clock
        self.cpu_seconds = 0.0
        self._finding_nodes = finding_nodes(sorted(cluster.nodes))

    def agents(self) -> list[str]:
        return sorted(self._cluster.nodes)

    def fetch_all(self, agents: Sequence[str]) -> dict[str, NodeSnapshot | BackendError]:
        return {agent: self._fetch(agent) for agent in agents}

    def _fetch(self, agent: str) -> NodeSnapshot | BackendError:
        began = time.process_time()
        snap = node_snapshot(
            agent, self._clock.now(), self._cluster.busy_gpus(agent), agent in self._finding_nodes
        )
        body = json.dumps(codec.snapshot_to_json(snap)).encode()
        self.cpu_seconds += time.process_time() - began
        try:  # decoded as HttpFleet decodes an agent's answer
            return wire.snapshot_from_bytes(body)
        except SnapshotError as exc:
            return BackendError(str(exc))


def finding_nodes(names: Sequence[str]) -> set[str]:
    """The nodes whose agent reports an open finding: one in a hundred, none of the probes'."""
    return set(names[PROBE_NODES :: max(1, int(1 / NODES_WITH_FINDINGS))])


class ServedAgents:
    """Every node's agent served over real sockets: `workers` processes, each listening on
    one port per agent of its share and answering GET /v1/snapshot with that node's body.
    `tick` (the agents' task, run just before each fleet read) sends each worker the time
    and its nodes' busy GPUs and waits until the bodies are rebuilt, so the controller's read
    finds every agent ready and the building is no part of the controller's time."""

    def __init__(self, cluster: LoadedCluster, clock: ManualClock, workers: int) -> None:
        self._cluster = cluster
        self._clock = clock
        names = sorted(cluster.nodes)
        with_findings = finding_nodes(names)
        context = multiprocessing.get_context("spawn")
        self._workers: list[tuple[Connection, list[str], BaseProcess]] = []
        for share in (names[w::workers] for w in range(workers)):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=serve_agents, args=(share, with_findings & set(share), theirs), daemon=True
            )
            process.start()
            self._workers.append((ours, share, process))
        self.urls: dict[str, str] = {}
        for conn, share, _ in self._workers:
            ports: list[int] = conn.recv()
            self.urls.update(
                {node: f"http://127.0.0.1:{port}" for node, port in zip(share, ports, strict=True)}
            )
        self.serving_cpu_seconds: list[float] = []  # all workers' CPU between two rebuilds

    def tick(self) -> None:
        now = self._clock.now()
        for conn, share, _ in self._workers:
            conn.send((now, [self._cluster.busy_gpus(node) for node in share]))
        serving = [conn.recv() for conn, _, _ in self._workers]
        if self._clock.now() > START:  # the first rebuild follows no read
            self.serving_cpu_seconds.append(sum(serving))

    def close(self) -> None:
        for conn, _, process in self._workers:
            conn.send(None)
            process.join(10)


def serve_agents(nodes: list[str], with_findings: set[str], conn: Connection) -> None:
    """A worker process: serves `nodes`' agents until the parent sends None."""
    asyncio.run(_serve(nodes, with_findings, conn))


async def _serve(nodes: list[str], with_findings: set[str], conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    bodies: dict[str, bytes] = {}
    servers = [
        await loop.create_server(partial(_AgentAnswer, bodies, node), "127.0.0.1", 0, backlog=512)
        for node in nodes
    ]
    conn.send([server.sockets[0].getsockname()[1] for server in servers])
    stopped: asyncio.Future[None] = loop.create_future()
    rebuilt = time.process_time()

    def rebuild() -> None:
        nonlocal rebuilt
        message = conn.recv()
        if message is None:
            stopped.set_result(None)
            return
        now, busy = message
        began = time.process_time()
        for node, gpus in zip(nodes, busy, strict=True):
            snap = node_snapshot(node, now, gpus, node in with_findings)
            bodies[node] = json.dumps(codec.snapshot_to_json(snap)).encode()
        conn.send(began - rebuilt)  # what serving the reads since the last rebuild cost
        rebuilt = time.process_time()

    loop.add_reader(conn.fileno(), rebuild)
    await stopped
    for server in servers:
        server.close()


class _AgentAnswer(asyncio.Protocol):
    """One connection to one agent: the request's headers read, the node's latest body
    answered as the agent's HTTP/1.0 server does, the connection closed."""

    def __init__(self, bodies: dict[str, bytes], node: str) -> None:
        self._bodies = bodies
        self._node = node
        self._request = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._request += data
        if b"\r\n\r\n" in self._request and self._transport is not None:
            body = self._bodies[self._node]
            head = (
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            self._transport.write(head.encode() + body)
            self._transport.close()


class Timed:
    """Wraps a task's tick: wall and CPU seconds of each call, less what the in-process
    agents spent meanwhile (the simulated agents building their snapshot bodies is not the
    controller's work)."""

    def __init__(self, task: Task, elsewhere: Callable[[], float], clock: Clock) -> None:
        self.task = task
        self._elsewhere = elsewhere
        self._clock = clock
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.at: list[float] = []  # simulated seconds since the start, of each tick
        self.failures = 0

    def __call__(self) -> object:
        at = (self._clock.now() - START).total_seconds()
        agents, began, wall = self._elsewhere(), time.process_time(), time.perf_counter()
        try:
            result = self.task.tick()
        except Exception:
            self.failures += 1
            raise
        spent = self._elsewhere() - agents
        self.cpu.append(time.process_time() - began - spent)
        self.wall.append(time.perf_counter() - wall - spent)
        self.at.append(at)
        return result


def store_tables(url: str) -> dict[str, TableSize]:
    """Every table's rows and bytes, as `observer db size` measures them."""
    with Store(url) as store:
        return {t.name: t for t in store.table_sizes()}


def bytes_per_gpu_day(grown: dict[str, int], gpu_days: float) -> dict[str, int]:
    """What a GPU-day adds to the store, by table bytes `grown` over `gpu_days`: every raw
    sample kept (`retention_off`), and what stays for the soak once raw samples past
    storage.raw_retention_days are deleted (`retention_on`: everything but gpu_samples,
    whose few hours a report reads raw are left out as well)."""
    total = sum(grown.values())
    return {
        "retention_off": round(total / gpu_days),
        "retention_on": round((total - grown.get("gpu_samples", 0)) / gpu_days),
    }


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    settings = settings_for(url, args.nodes)
    cfg = settings.controller
    upgrade(url)
    specs = [
        NodeSpec(
            f"node-{i:04d}", GPUS_PER_NODE, cfg.simulation.pools[i % len(cfg.simulation.pools)]
        )
        for i in range(args.nodes)
    ]
    # The agents' recent findings are known from an earlier run: what grows is this run's.
    with_findings = finding_nodes([s.name for s in specs])
    known = Store(url)
    known.save_findings(
        f for s in specs for f in node_snapshot(s.name, START, 0, s.name in with_findings).findings
    )
    known.close()
    before = store_tables(url)
    clock = ManualClock(START)
    rng = random.Random(args.seed)
    cluster = LoadedCluster(specs, clock, args.jobs, rng)
    store = Store(url)
    timed: dict[str, Timed] = {}
    served: ServedAgents | None = None
    agent_tasks: list[Task] = []
    if args.http:
        served = ServedAgents(cluster, clock, args.workers)
        fleet: Fleet = HttpFleet(
            list(served.urls.values()),
            read_timeout_seconds=cfg.agent_read_timeout_seconds,
            max_snapshot_bytes=cfg.agent_snapshot_max_bytes,
            concurrency=cfg.agent_read_concurrency,
        )
        agent_tasks = [Task("agents", cfg.observe_interval_seconds, served.tick)]
        elsewhere: Callable[[], float] = lambda: 0.0  # noqa: E731 - the agents are elsewhere
    else:
        agents = Agents(cluster, clock)
        fleet, elsewhere = agents, lambda: agents.cpu_seconds

    def timer(task: Task) -> Task:
        # Plan entries of one probe in several windows are one figure.
        timing = timed.setdefault(task.name, Timed(task, elsewhere, clock))
        return replace(task, tick=timing)

    soak = SimulatedSoak(
        settings, clock, store, cluster, Sources(fleet), agents=agent_tasks, timed=timer
    )
    simulated_seconds = args.minutes * 60.0
    wall_began = time.perf_counter()
    try:
        soak.run_for(simulated_seconds)
    finally:
        if served is not None:
            served.close()
    wall = time.perf_counter() - wall_began
    runs = len(store.runs())
    store.close()
    after = store_tables(url)
    per_day = 86400.0 / simulated_seconds
    loops = {
        name: {
            "interval_seconds": t.task.interval_seconds,
            "ticks": len(t.cpu),
            "cpu_ms_median": round(1000 * statistics.median(t.cpu or [0.0]), 2),
            "cpu_ms_max": round(1000 * max(t.cpu or [0.0]), 2),
            "p50_wall_ms": round(1000 * statistics.median(t.wall or [0.0]), 2),
            "p99_wall_ms": round(1000 * _p99(t.wall), 2),
            # Which tick was slowest: the fleet's store every GPU's sample each 300 s.
            "slowest_at_seconds": t.at[t.wall.index(max(t.wall))] if t.wall else None,
            "failed_ticks": t.failures,
        }
        for name, t in timed.items()
    }
    busy = sum(sum(t.wall) for t in timed.values()) / simulated_seconds
    controller_cpu = sum(sum(t.cpu) for t in timed.values())
    core_share = controller_cpu / simulated_seconds
    slowest = max(_p99(t.wall) / t.task.interval_seconds for t in timed.values())
    grown = {t: after[t].rows - before[t].rows for t in after}
    grown_bytes = {t: after[t].bytes - before[t].bytes for t in after}
    store_grown = sum(grown_bytes.values())
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
        "store_bytes_per_day": round(store_grown * per_day),
        "store_bytes_per_week": round(store_grown * per_day * 7),
        "store_bytes_per_day_by_table": {
            t: round(b * per_day) for t, b in sorted(grown_bytes.items()) if b
        },
        "store_bytes_per_gpu_day": bytes_per_gpu_day(
            grown_bytes, args.nodes * GPUS_PER_NODE * simulated_seconds / 86400
        ),
        "wall_seconds": round(wall, 1),
        **(
            {}
            if served is None
            else {
                # The agents' side on the same machine: serving the controller's reads
                # competes with it for the cores (on a cluster, each agent has its node).
                "agents_serving_cpu_ms_median": round(
                    1000 * statistics.median(served.serving_cpu_seconds or [0.0]), 1
                )
            }
        ),
    }


def _p99(values: Sequence[float]) -> float:
    if len(values) < 2:
        return max(values, default=0.0)
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def postgres_schema(
    url: str, kept: str | None = None, *, empty: bool = True
) -> tuple[str, Callable[[], None]] | None:
    """A schema of its own on the server, and how to drop it; None when unreachable. `kept`:
    the schema of that name, emptied first unless not `empty`, and left in place."""
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    schema = kept or f"bench_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as connection:
            if kept and empty:
                connection.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            connection.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    except sa.exc.OperationalError:
        admin.dispose()
        return None

    def drop() -> None:
        if kept is None:
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
    parser.add_argument("--http", action="store_true", help="agents over real sockets")
    parser.add_argument("--workers", type=int, default=4, help="processes serving the agents")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    configure_logging("warning")  # failed ticks still show, on stderr
    gc.set_threshold(GC_FIRST_GENERATION_THRESHOLD)  # as `observer controller` runs
    # One socket per agent in the workers, one per read in flight here: the soft limit is
    # raised to the hard one, which must leave room for them.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "http": args.http,
        "open_files_limit": hard,
        "agent_read_concurrency": settings_for("sqlite://", 1).controller.agent_read_concurrency,
        "gpus": args.nodes * GPUS_PER_NODE,
        "background_jobs": args.jobs,
        "simulated_minutes": args.minutes,
        "extrapolated": f"per day and week: {args.minutes:g} simulated minutes x "
        f"{1440 / args.minutes:g} (x7)",
    }
    stores = []
    if not args.no_sqlite:
        stores.append("sqlite")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "observer.db"
            result["sqlite"] = run(f"sqlite:///{path}", args)
    postgres = (
        None
        if args.no_postgres
        else postgres_schema(os.environ.get("OBSERVER_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL))
    )
    if postgres is not None:
        url, drop = postgres
        try:
            stores.append("postgresql")
            result["postgresql"] = run(url, args)
        finally:
            drop()
    result["keeps_up"] = all(result[s]["keeps_up"] for s in stores)
    result["store_bytes_per_day"] = {s: result[s]["store_bytes_per_day"] for s in stores}
    # Peak RSS of this process (the controller; the agents' workers are apart). With both
    # stores, one after the other here: the larger of the two.
    result["rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
