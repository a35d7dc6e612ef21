"""A controller killed twice and restarted with conditions open takes them over: while their
cause lasts they stay one finding each (never a second copy), once it is gone the very
findings the first controller opened close (none is left open forever), and the daily
summary shows both restarts."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.demo.nodes import DemoNodes
from observer.domain import Finding, Workload
from observer.fleet.local import LocalFleet
from observer.metrics import HEARTBEAT_METRIC
from observer.monitoring.fake import FakePrometheus
from observer.records import RestartCause
from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.publish import write_daily
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
STEP_SECONDS = 5.0
ONE_DAY = timedelta(days=1)


class Platform:
    """The simulated cluster, its nodes' real agents and a scripted Prometheus, which outlive
    the controllers started over them."""

    def __init__(self, tmp_path: Path) -> None:
        self.settings = controller_settings(
            plan=[{"window": "always", "probe": "fairness", "every_seconds": 300}],
            simulation={"nodes": 3, "gpus_per_node": 4, "pools": ["a"]},
            prometheus_url="http://prometheus.invalid:9090",
            reports={"output_dir": str(tmp_path / "reports")},
        )
        self.clock = ManualClock(T0)
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        self.cluster = simulated_cluster(self.settings, self.clock)
        self.nodes = DemoNodes(self.cluster, self.clock, 4, self.settings.detectors.node)
        self.fleet = LocalFleet(self.nodes.snapshots)
        self.prometheus = FakePrometheus(self.clock)
        self.heartbeat = self.prometheus.add_target(
            "observer-controller",
            "controller:9401",
            lambda at: [(HEARTBEAT_METRIC, {}, at.timestamp())],
        )
        for name in self.nodes.names:
            self.prometheus.add_target(
                "observer-agent", f"{name}:9400", partial(self.nodes.exposition, name)
            )

    def controller(self) -> SimulatedSoak:
        """A controller process started over the platform: nothing kept in memory."""
        return SimulatedSoak(
            self.settings,
            self.clock,
            self.store,
            self.cluster,
            Sources(self.fleet, self.prometheus),
            agents=[Task("nodes", STEP_SECONDS, self.nodes.tick)],
        )

    def run(self, soak: SimulatedSoak, seconds: float) -> None:
        soak.run_for(seconds, partial(self.clock.advance, STEP_SECONDS))

    def open_conditions(self) -> list[Finding]:
        return [f for f in self.store.findings(open_only=True) if f.kind.value == "condition"]


def test_a_restart_takes_over_every_open_condition_and_closes_them_when_the_cause_is_gone(
    tmp_path: Path,
):
    platform = Platform(tmp_path)
    first = platform.controller()
    platform.run(first, 120)
    platform.cluster.faults.leaked_gpus["node-001"] = 2  # allocated_without_job
    stuck = platform.cluster.submit_background("research", Workload(1, duration_seconds=30))
    platform.cluster.faults.stuck_jobs.add(stuck)  # stuck_terminating once it ends
    platform.cluster.faults.held_tenants["prod"] = ""  # unexplained_wait
    platform.fleet.unreachable.add("node-002")  # agent_unreachable
    platform.heartbeat.scraped = False  # monitoring_lag
    platform.run(first, 600)
    before = platform.open_conditions()
    detectors = {f.detector for f in before}
    assert {
        "allocated_without_job",
        "stuck_terminating",
        "unexplained_wait",
        "agent_unreachable",
        "monitoring_lag",
    } <= detectors

    lasting = {f.key: f for f in before if f.detector != "unexplained_wait"}
    for _ in range(2):  # killed twice (never stepped again), each down for 40 s
        platform.clock.advance(40)
        second = platform.controller()
        platform.run(second, 300)
        during = platform.open_conditions()
        assert all(n == 1 for n in Counter(f.key for f in during).values())  # no second copy
        assert {f.key: f.opened_at for f in during if f.key in lasting} == {
            key: f.opened_at for key, f in lasting.items()
        }  # the first controller's own findings, still open

    platform.cluster.faults.leaked_gpus.clear()
    platform.cluster.faults.stuck_jobs.clear()
    platform.cluster.faults.held_tenants.clear()
    platform.fleet.unreachable.clear()
    platform.heartbeat.scraped = True
    platform.run(second, 900)
    assert platform.open_conditions() == []
    closed = {(f.key, f.opened_at) for f in platform.store.findings() if not f.is_open}
    assert {(f.key, f.opened_at) for f in before} <= closed
    # Over the whole soak: one finding per lasting condition, and both kills in the summary.
    every = Counter(f.key for f in platform.store.findings() if f.key in lasting)
    assert every == dict.fromkeys(lasting, 1)
    day = T0.date()
    blind = build_daily(
        load_daily(platform.store, platform.settings, day, T0 + ONE_DAY)
    ).figures.blind
    # Down from the last sign of life, up to one alive interval before the kill.
    alive = timedelta(seconds=platform.settings.controller.alive_interval_seconds)
    assert [r.cause for r in blind.restarts] == [RestartCause.KILLED] * 2
    assert all(
        timedelta(seconds=40) <= r.up_at - r.down_from <= timedelta(seconds=40) + alive
        for r in blind.restarts
    )
    summary = write_daily(platform.store, platform.settings, day, T0 + ONE_DAY)[0].read_text()
    assert summary.count("killed or crashed") >= 2
