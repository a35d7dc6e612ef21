"""Does the controller's memory level off? Its one composition run for simulated days.

`bench/controller_scale.py`'s soak (every task the daemon runs, stepped by SimulatedSoak on a
manual clock over the simulated cluster, other users' jobs in every scheduler snapshot, the
probe plan running) for `--days` simulated days, with Prometheus (the stand-in, scraping the
controller's heartbeat and every GPU's utilisation) so that the monitoring task runs too,
and the daily summaries built into a temporary directory, in a process of their own as the
controller builds them (that process's memory is not the controller's, and not counted here:
what is measured is the controller's own process). Every node's agent serves what a
real 8-GPU agent does, decoded by the controller as HttpFleet decodes it; to keep days of
reads affordable each node's body is built once per hour and per number of busy GPUs and
re-timed at each read. Each agent reports a finding that opened and closed in each of the
last two hours (a new one every hour, as findings come and go on a real node), one node in
a hundred an open one.

At the end of every simulated day, after a full collection: the process's resident memory
(VmRSS), what Python allocated and still holds (tracemalloc's current, unless
`--no-tracemalloc`), what SQLite holds (`sqlite3_memory_used`: its page caches, inside RSS
and unseen by tracemalloc), the store's size on disk, the largest report build process so
far (its peak RSS, which the controller's pod holds beside the controller while it runs),
and RSS before and after each report tick that grew it (a tick that built a day waits on
the build process). Under tracemalloc RSS also holds tracemalloc's own table of live
allocations: read RSS from a `--no-tracemalloc` run, what Python holds from a traced one.
The store is SQLite in a temporary directory, its commits not flushed to the disk
(`durable=False`: what that saves is time, not memory). The growth from day 2 to the last
day is what the bar reads: flat within 5 %. Where tracemalloc runs, the lines whose
allocations grew most from day 2 to the end are listed.

1,000 nodes for 7 days would take about 8 hours here (one simulated hour of 1,000 nodes:
~170 s of wall on the 2-core VM), so the default fleet is scaled down (7 days of 5 nodes,
traced: 19 minutes on the shared VM) and the output says so; `--nodes 1000` runs the full
fleet where there is the time.

Prints one JSON line.

    .venv/bin/python bench/controller_memory.py [--nodes 5] [--days 7] [--jobs-per-node 30]
        [--no-tracemalloc]
"""

from __future__ import annotations

import _sqlite3
import argparse
import ctypes
import gc
import json
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from controller_scale import (
    GPUS_PER_NODE,
    START,
    LoadedCluster,
    _finding,
    finding_nodes,
    node_snapshot,
    settings_for,
)

from observer import codec
from observer.backends.simulated import NodeSpec
from observer.cli import GC_FIRST_GENERATION_THRESHOLD
from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.domain import NodeSnapshot
from observer.errors import BackendError, SnapshotError
from observer.fleet import wire
from observer.logging_setup import configure_logging
from observer.metrics import HEARTBEAT_METRIC
from observer.monitoring.fake import FakePrometheus
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.database import upgrade
from observer.storage.store import Store

FULL_FLEET = 1000
FULL_FLEET_WALL_PER_HOUR = 170  # seconds, measured here: one simulated hour of 1,000 nodes
DEFAULT_NODES = 5  # 7 days of them, traced: 19 minutes on the shared 2-core VM
BAR = 0.05  # RSS flat within 5 % from day 2 to the last day
# The time every body is built at, replaced by the read's own: not a time any read has.
BUILT_AT = START + timedelta(microseconds=1)


class HourlyAgents:
    """Every node's agent as the controller reads it in process: a /v1/snapshot body decoded
    as HttpFleet decodes it. A body is built once per node, hour and number of busy GPUs,
    then re-timed at each read; each hour brings every node a new finding."""

    def __init__(self, cluster: LoadedCluster, clock: ManualClock) -> None:
        self._cluster = cluster
        self._clock = clock
        self._with_open = finding_nodes(sorted(cluster.nodes))
        self._bodies: dict[tuple[str, int], bytes] = {}
        self._hour: datetime | None = None

    def agents(self) -> list[str]:
        return sorted(self._cluster.nodes)

    def fetch_all(self, agents: Sequence[str]) -> dict[str, NodeSnapshot | BackendError]:
        now = self._clock.now()
        hour = now.replace(minute=0, second=0, microsecond=0)
        if hour != self._hour:
            self._hour, self._bodies = hour, {}
        at = (BUILT_AT.isoformat().encode(), now.isoformat().encode())
        reads: dict[str, NodeSnapshot | BackendError] = {}
        for agent in agents:
            body = self._body(agent, self._cluster.busy_gpus(agent), hour).replace(*at)
            try:
                reads[agent] = wire.snapshot_from_bytes(body)
            except SnapshotError as exc:
                reads[agent] = BackendError(str(exc))
        return reads

    def _body(self, agent: str, busy: int, hour: datetime) -> bytes:
        body = self._bodies.get((agent, busy))
        if body is None:
            snap = node_snapshot(agent, BUILT_AT, busy, open_finding=False)
            # Opened on the hour, closed ten minutes later: this hour's and the last hour's.
            recent = [
                _finding(agent, "orphan_process", str(900 + k), hour - timedelta(hours=k))
                for k in range(2)
            ]
            if agent in self._with_open:
                recent.append(_finding(agent, "allocated_idle", "7", START))
            snap = replace(snap, findings=tuple(recent))
            body = json.dumps(codec.snapshot_to_json(snap)).encode()
            self._bodies[agent, busy] = body
        return body


def prometheus(cluster: LoadedCluster, clock: ManualClock, settings: Settings) -> FakePrometheus:
    """The stand-in Prometheus scraping the controller's heartbeat and each node's agent:
    every GPU's utilisation, busy or idle as the cluster holds it."""
    rules = settings.detectors.monitoring_lag
    fake = FakePrometheus(clock)
    fake.add_target(
        "observer-controller",
        "controller:9500",
        lambda at: [(HEARTBEAT_METRIC, {}, at.timestamp())],
    )

    def exposition(node: str, at: datetime) -> list[tuple[str, dict[str, str], float]]:
        busy = cluster.busy_gpus(node)
        return [
            (
                rules.gpu_utilization_metric,
                {rules.gpu_uuid_label: f"GPU-{node}-{i}"},
                ((37 * i + at.minute) % 100) / 100 if i < busy else 0.0,
            )
            for i in range(GPUS_PER_NODE)
        ]

    for node in sorted(cluster.nodes):
        fake.add_target("observer-agent", f"{node}:9400", partial(exposition, node))
    return fake


class ReportBuilds:
    """Wraps the reports task: RSS before and after each tick, kept for the ticks that grew
    it (the daily summary's build, reading the day and the soak to date)."""

    def __init__(self) -> None:
        self.grew: list[tuple[int, int]] = []

    def __call__(self, task: Task) -> Task:
        if task.name != "reports":
            return task

        def tick() -> object:
            before = rss_bytes()
            result = task.tick()
            after = rss_bytes()
            if after > before:
                self.grew.append((before, after))
            return result

        return replace(task, tick=tick)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def sqlite_memory_bytes() -> int:
    """What the SQLite library holds now (page caches, statements), from its own counter."""
    library = ctypes.CDLL(_sqlite3.__file__)  # resolves through to the linked libsqlite3
    library.sqlite3_memory_used.restype = ctypes.c_int64
    return int(library.sqlite3_memory_used())


def store_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    path = directory / "observer.db"
    url = f"sqlite:///{path}"
    settings = settings_for(url, args.nodes)
    settings = settings.model_copy(
        update={"reports": settings.reports.model_copy(update={"output_dir": directory / "out"})}
    )
    cfg = settings.controller
    upgrade(url)
    pools = cfg.simulation.pools
    specs = [
        NodeSpec(f"node-{i:04d}", GPUS_PER_NODE, pools[i % len(pools)]) for i in range(args.nodes)
    ]
    clock = ManualClock(START)
    cluster = LoadedCluster(specs, clock, args.nodes * args.jobs_per_node, random.Random(args.seed))
    store = Store(url, durable=False)
    sources = Sources(HourlyAgents(cluster, clock), prometheus(cluster, clock, settings))
    builds = ReportBuilds()
    soak = SimulatedSoak(settings, clock, store, cluster, sources, timed=builds)
    if not args.no_tracemalloc:
        tracemalloc.start()
    days: list[dict[str, Any]] = []
    day2: tracemalloc.Snapshot | None = None
    began = time.perf_counter()
    for day in range(1, args.days + 1):
        soak.run_for(86400)
        gc.collect()
        tracing = tracemalloc.is_tracing()
        built, builds.grew = builds.grew, []
        days.append(
            {
                "day": day,
                "rss_bytes": rss_bytes(),
                # RSS around the report ticks that grew it: [before, after] each.
                "report_builds_rss_bytes": [list(b) for b in built],
                "traced_bytes": tracemalloc.get_traced_memory()[0] if tracing else None,
                "sqlite_bytes": sqlite_memory_bytes(),
                "store_bytes": store_bytes(path),
                # The largest report build process so far (ended processes only): during a
                # build the controller's pod holds this beside the controller.
                "build_process_max_rss_bytes": resource.getrusage(
                    resource.RUSAGE_CHILDREN
                ).ru_maxrss
                * 1024,
                "wall_seconds": round(time.perf_counter() - began, 1),
            }
        )
        if tracing and day == 2:
            day2 = tracemalloc.take_snapshot()
    most: list[str] = []
    if day2 is not None:
        stats = tracemalloc.take_snapshot().compare_to(day2, "lineno")
        most = [str(s) for s in stats[:8] if s.size_diff > 0]
    tracemalloc.stop()
    runs = len(store.runs())
    store.close()
    second, last = days[min(1, len(days) - 1)], days[-1]
    change = (last["rss_bytes"] - second["rss_bytes"]) / second["rss_bytes"]
    traced = (
        None
        if last["traced_bytes"] is None
        else round((last["traced_bytes"] - second["traced_bytes"]) / second["traced_bytes"], 4)
    )
    return {
        "days": days,
        "probe_runs": runs,
        "rss_change_from_day_2": round(change, 4),
        "flat_within_5_percent": abs(change) <= BAR,
        # Under tracemalloc RSS also holds its table of every live allocation.
        "traced_change_from_day_2": traced,
        "grew_most_from_day_2": most,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    parser.add_argument("--days", type=int, default=7, help="simulated days")
    parser.add_argument("--jobs-per-node", type=int, default=30, help="other users' jobs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-tracemalloc", action="store_true", help="faster, RSS only")
    args = parser.parse_args()
    configure_logging("warning")  # failed ticks still show, on stderr
    gc.set_threshold(GC_FIRST_GENERATION_THRESHOLD)  # as `observer controller` runs
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "gpus": args.nodes * GPUS_PER_NODE,
        "background_jobs": args.nodes * args.jobs_per_node,
        "simulated_days": args.days,
        "store": "sqlite, temporary directory, durable=False",
        "tracemalloc": not args.no_tracemalloc,
    }
    if args.nodes < FULL_FLEET:
        result["scaled_down"] = (
            f"to {args.nodes} of {FULL_FLEET:,} nodes: the {args.days}-day run of {FULL_FLEET:,} "
            f"would take ~{FULL_FLEET_WALL_PER_HOUR * 24 * args.days / 3600:.0f} h on the 2-core "
            f"VM (~{FULL_FLEET_WALL_PER_HOUR} s of wall per simulated hour)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        result |= run(args, Path(tmp))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
