"""Reports built from a soak on the simulated cluster: a probe whose node failed under it and
that passed on its next attempt is a node failure in the daily summary's failure table and
its node table; the probes the controller cancels when it stops are the observer's own doing,
listed apart and counted in no failure-evidence share."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from observer.clock import ManualClock
from observer.domain import Outcome
from observer.reports.compute.criteria.result import Status
from observer.reports.compute.daily import DailyReport, build_daily
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import load_daily, load_verdict
from observer.reports.render.daily import render_daily
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

MONDAY_0800 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def _settings() -> Settings:
    return controller_settings(
        timezone="UTC",
        tenants=[{"name": "research"}],
        plan=[
            {"window": "always", "probe": "long", "every_seconds": 600},
            {"window": "always", "probe": "fail-exit", "every_seconds": 600},
        ],
        simulation={"nodes": 2, "gpus_per_node": 4},
    )


class _Soak:
    def __init__(self, tmp_path: Path) -> None:
        self.settings = _settings()
        self.clock = ManualClock(MONDAY_0800)
        self.store = Store(migrated_sqlite(tmp_path / "observer.db"))
        self.cluster = simulated_cluster(self.settings, self.clock)
        self.soak = SimulatedSoak(self.settings, self.clock, self.store, self.cluster)

    def daily(self) -> DailyReport:
        day, now = MONDAY_0800.date(), self.clock.now()
        return build_daily(load_daily(self.store, self.settings, day, now, partial=True))


def test_a_probe_that_passed_after_its_node_failed_is_a_node_failure_in_the_daily(
    tmp_path: Path,
):
    world = _Soak(tmp_path)
    world.soak.run_for(11 * 60)  # the first long probe runs
    [running] = [r for r in world.soak.controller.runner.active() if r.probe == "long"]
    node = running.node_names[0]
    world.cluster.fail_node(node, "test")
    world.soak.run_for(45 * 60)

    run = world.store.run(running.run_id)
    day = world.daily()
    rendered = render_daily(day, "en")
    daily = json.loads(rendered.json)

    assert run is not None and run.outcome is Outcome.PASSED
    assert run.attempts[0].nodes == (node,)
    groups = [(g["cause"], g["outcome"], g["reason"]) for g in daily["tasks"]["failure_groups"]]
    assert ("node", "passed", "NodeDown") in groups
    [ended] = day.figures.health.ended_attempts
    assert (ended.nodes, ended.state, ended.run_id) == ((node,), "NODE_FAIL", run.run_id)
    assert "Probe attempts the platform ended on a node and queued again" in rendered.markdown
    # the failure table's explanation and the run's own row of the per-task record
    explained = [ln for ln in rendered.markdown.splitlines() if "Passed on a later attempt" in ln]
    assert len(explained) == 2
    assert all(node in line and "NodeDown" in line for line in explained)


def test_probes_cancelled_by_the_observers_shutdown_are_not_failure_evidence(tmp_path: Path):
    world = _Soak(tmp_path)
    world.soak.run_for(25 * 60)
    cancelled = world.soak.controller.stop()  # a planned restart: SIGTERM, the probes in flight
    assert cancelled

    now = world.clock.now()
    verdict = build_verdict(load_verdict(world.store, world.settings, now, provisional=True))
    [evidence] = [c for c in verdict.criteria if c.criterion == "failure_evidence"]
    day = world.daily()
    headline = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1]
        for line in render_daily(day, "en").markdown.splitlines()
        if line.startswith("| Of which cancelled by the observer")
    }

    assert evidence.status is Status.PASS
    assert Note("ev.cancelled_by_observer", {"runs": len(cancelled)}) in evidence.evidence
    assert day.figures.tasks.cancelled_by_observer == len(cancelled)
    assert day.figures.tasks.failed == 0
    assert headline == {"Of which cancelled by the observer itself": str(len(cancelled))}
