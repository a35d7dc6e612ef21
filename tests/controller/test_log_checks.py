"""Each finished log canary is checked exactly once, even when the controller restarts between
its end and its read-back; a log pipeline that cannot be read is a condition (the log
backend's blind time), opened by the first failed read-back and closed by the next good one;
a store that fails while a canary is due is the store's outage, and the canary waits for it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.watches import canaries
from observer.controller.watches.base import Look
from observer.controller.watches.canaries import CANARY_READ_TRIES
from observer.domain import ProbeRun, RunState
from observer.errors import StoreError
from observer.log_readers.pod_logs import PodLogReader
from observer.metrics import ControllerMetrics
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LAUNCH = START + timedelta(seconds=600)  # the plan entry's first firing
SETTLE_SECONDS = 120


class Soak:
    """One log canary every 10 minutes (30 s of lines, 2 min of job); a controller that can
    be restarted on the same store and cluster."""

    def __init__(self, tmp_path: Path, probe: str = "log-canary") -> None:
        self.probe = probe
        self.settings = controller_settings(
            plan=[
                {
                    "window": "always",
                    "probe": probe,
                    "every_seconds": 600,
                    "tenants": ["research"],
                }
            ],
            probes={
                "log-canary": {"log_lines": 300, "log_interval_seconds": 0.1},
                "log-burst": {"log_lines": 2000},
            },
            logs={"settle_seconds": SETTLE_SECONDS},
            gpus_per_node=4,
            simulation={"nodes": 2, "gpus_per_node": 4, "pools": ["a"]},
        )
        self.clock = ManualClock(START)
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        self.cluster = simulated_cluster(self.settings, self.clock)
        self.restart()

    def restart(self) -> None:
        """A new controller process: nothing kept in memory, fresh metrics."""
        self.schedule = SimulatedSoak(self.settings, self.clock, self.store, self.cluster)
        self.metrics = self.schedule.metrics

    def run(self, seconds: float) -> None:
        self.schedule.run_for(seconds)

    def run_until_canary_done(self) -> ProbeRun:
        for _ in range(900):
            done = [r for r in self.store.runs(probe=self.probe) if r.state is RunState.DONE]
            if done:
                return done[0]
            self.run(1)
        raise AssertionError("the canary never finished")

    def findings_counted(self, detector: str, severity: str = "critical") -> float:
        value = self.metrics.findings.total.labels(detector, severity)._value.get()
        assert isinstance(value, float)
        return value


def test_a_restart_between_a_canarys_end_and_its_read_back_still_checks_it_once(tmp_path: Path):
    soak = Soak(tmp_path)
    # Lines written from 10 s to 15 s into the canary (seq 100-149) never arrive.
    soak.cluster.faults.log_loss = [
        (LAUNCH + timedelta(seconds=10), LAUNCH + timedelta(seconds=15))
    ]
    canary = soak.run_until_canary_done()
    assert canary.finished_at is not None
    due = canary.finished_at + timedelta(seconds=SETTLE_SECONDS)
    assert soak.clock.now() < due
    assert soak.store.findings() == []  # not read back yet

    soak.restart()
    soak.run((due - soak.clock.now()).total_seconds() + 30)

    [finding] = soak.store.findings(detector="log_loss")
    assert finding.subject["run_id"] == canary.run_id
    assert finding.evidence["missing_lines"] == 50
    assert soak.findings_counted("log_loss") == 1

    # Checked once: a controller started after the check does not read the run again.
    soak.restart()
    soak.run(60)
    assert soak.findings_counted("log_loss") == 0
    assert len(soak.store.findings(detector="log_loss")) == 1


def test_an_unreadable_pipeline_is_a_condition_from_the_first_failed_read_to_the_next_good_one(
    tmp_path: Path,
):
    soak = Soak(tmp_path)
    canary = soak.run_until_canary_done()
    assert canary.finished_at is not None
    due = canary.finished_at + timedelta(seconds=SETTLE_SECONDS)
    soak.run((due - soak.clock.now()).total_seconds() - 10)
    soak.cluster.faults.reachable = False  # the API that serves the job's output is down
    soak.run(20)

    [down] = soak.store.findings(open_only=True)
    assert (down.detector, down.subject, down.severity.value) == (
        "log_pipeline_unreachable",
        {"pipeline": "pod_logs"},
        "critical",
    )
    assert down.opened_at >= due
    assert soak.findings_counted("log_pipeline_unreachable") == 1

    # The condition outlives a restart and is closed by the first read-back that succeeds,
    # which still checks the canary.
    soak.run(10)
    soak.cluster.faults.reachable = True
    soak.restart()
    soak.run(10)

    [closed] = soak.store.findings(detector="log_pipeline_unreachable")
    assert (closed.opened_at, closed.closed_at is not None) == (down.opened_at, True)
    assert closed.closed_at is not None and closed.closed_at > soak.clock.now() - timedelta(
        seconds=11
    )
    assert closed.evidence["canaries_given_up"] == []
    assert soak.store.findings(detector="log_loss") == []  # read back whole
    soak.restart()
    soak.run(60)
    assert soak.findings_counted("log_loss") == 0
    assert soak.store.findings(open_only=True) == []


def test_a_canary_never_read_back_is_given_up_and_named_in_the_pipelines_condition(
    tmp_path: Path,
):
    soak = Soak(tmp_path)
    soak.cluster.faults.log_loss = [(LAUNCH, LAUNCH + timedelta(hours=1))]  # would be a finding
    canary = soak.run_until_canary_done()
    soak.cluster.faults.reachable = False
    follow = soak.settings.controller.follow_interval_seconds
    soak.run(SETTLE_SECONDS + (CANARY_READ_TRIES + 1) * follow)
    soak.cluster.faults.reachable = True

    # Given up: the canary is not read again, by this controller or the next.
    soak.run(60)
    soak.restart()
    soak.run(60)
    assert soak.store.findings(detector="log_loss") == []
    # Nothing was read back successfully since: the pipeline's condition stays open.
    [down] = soak.store.findings(detector="log_pipeline_unreachable")
    assert down.closed_at is None

    # The next canary (10 min after the restart, 2 min long) closes it when read back, and
    # the closed condition names the canary that was given up.
    soak.cluster.faults.log_loss = []
    soak.run(600 + 120 + SETTLE_SECONDS)
    [closed] = soak.store.findings(detector="log_pipeline_unreachable")
    assert closed.closed_at is not None
    assert closed.evidence["canaries_given_up"] == [canary.run_id]


def test_a_log_burst_is_read_back_and_checked_as_a_canary(tmp_path: Path):
    soak = Soak(tmp_path, probe="log-burst")
    # The burst writes every line at once, as it starts: all of them fall in the gap.
    soak.cluster.faults.log_loss = [(LAUNCH, LAUNCH + timedelta(minutes=1))]
    burst = soak.run_until_canary_done()
    soak.run(SETTLE_SECONDS + 30)

    [finding] = soak.store.findings(detector="log_loss")
    assert finding.subject["run_id"] == burst.run_id
    assert (finding.evidence["expected_lines"], finding.evidence["missing_lines"]) == (2000, 2000)


def test_a_store_outage_while_a_canary_is_due_leaves_the_canary_for_later_and_blames_no_pipeline(
    tmp_path: Path,
):
    soak = Soak(tmp_path)
    canary = soak.run_until_canary_done()
    assert canary.finished_at is not None
    store_down = True

    def job_of(run_id: str) -> str | None:
        """The composition's lookup of a run's job, in a store that is failing at first."""
        if store_down:
            raise StoreError(f"reading run {run_id} in the store failed: disk I/O error")
        run = soak.store.run(run_id)
        return run.job_id if run else None

    cfg = soak.settings.controller
    watch = canaries.LogCanaries(
        soak.store,
        ControllerMetrics(CollectorRegistry()),
        cfg.probe_catalog(),
        PodLogReader(soak.cluster.logs, job_of),
        "pod_logs",
        SETTLE_SECONDS,
        soak.settings.detectors.log,
    )
    due = canary.finished_at + timedelta(seconds=SETTLE_SECONDS)
    look = Look(due, (), (canary,), {}, None, blind=False)

    during = watch.check(look)
    store_down = False
    after = watch.check(replace(look, changed=(), now=due + timedelta(seconds=5)))

    assert (during.late, during.restated, during.stored) == ([], (), None)
    assert after.late == []  # read back whole: no loss, and no pipeline condition to close
    assert after.stored is not None  # checked now, and marked so once stored
