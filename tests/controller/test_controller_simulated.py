"""The controller on the simulated cluster: a plan through a window, every run recorded with
its waits, reasons and outcome, nothing leaked or lost across a restart."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from observer.clock import ManualClock
from observer.controller.work import Controller
from observer.domain import JobRequest, Outcome, ProbeRun, RunState, Workload
from observer.errors import BackendError
from observer.records import SkipReason
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

MONDAY_0855 = datetime(2026, 11, 30, 8, 55, tzinfo=UTC)


def _settings(**controller: object) -> Settings:
    base: dict[str, object] = {
        "timezone": "Asia/Shanghai",
        "windows": [
            {"name": "weekday-peak", "days": "mon-fri", "start": "17:00", "end": "18:00"},
            {"name": "night", "days": "*", "start": "22:00", "end": "06:00"},
        ],
        "tenants": [
            {"name": "research", "weight": 0.7},
            {"name": "prod", "weight": 0.3, "quota_gpus": 6},
        ],
        "plan": [
            {"window": "weekday-peak", "probe": "short", "every_seconds": 300},
            {"window": "weekday-peak", "probe": "multi-gpu", "every_seconds": 900},
            {"window": "weekday-peak", "probe": "fail-exit", "every_seconds": 1200},
            {"window": "weekday-peak", "probe": "fail-command", "every_seconds": 1200},
            {"window": "weekday-peak", "probe": "fail-oom", "every_seconds": 1200},
            {"window": "weekday-peak", "probe": "fail-image", "every_seconds": 1200},
            {"window": "weekday-peak", "probe": "burst", "every_seconds": 1800},
            {
                "window": "weekday-peak",
                "probe": "quota",
                "every_seconds": 1800,
                "tenants": ["prod"],
            },
        ],
        "gpus_per_node": 4,
        "max_probe_gpus": 40,
        "max_probe_gpus_per_tenant": 24,
        "follow_interval_seconds": 5,
        "snapshot_interval_seconds": 30,
        "simulation": {"nodes": 3, "gpus_per_node": 4, "pools": ["a"]},
    }
    base.update(controller)
    return Settings.model_validate({"controller": base})


class Soak:
    """A controller, its store and the simulated cluster on one manual clock."""

    def __init__(self, tmp_path: Path, settings: Settings | None = None) -> None:
        self.settings = settings or _settings()
        self.clock = ManualClock(MONDAY_0855)  # 16:55 in Shanghai: 5 min before the window
        self.url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(self.url)
        self.cluster = simulated_cluster(self.settings, self.clock)
        self.controller = self.new_controller()

    def new_controller(self) -> Controller:
        """A controller (re)started over the same store and cluster."""
        self.schedule = SimulatedSoak(self.settings, self.clock, self.store, self.cluster)
        self.metrics = self.schedule.metrics
        return self.schedule.controller

    def run(self, seconds: float) -> None:
        self.schedule.run_for(seconds)


def test_a_plan_runs_through_its_window_and_every_run_is_recorded(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.run(5 * 60)
    assert soak.store.runs() == []  # nothing before the window opens
    soak.run(60 * 60 + 15 * 60)  # the whole hour-long window, and a quarter of an hour after

    runs = soak.store.runs()
    assert soak.cluster.probe_jobs() == []  # nothing of ours left on the platform
    assert all(r.state is RunState.DONE for r in runs)
    by_probe: dict[str, list[ProbeRun]] = {}
    for run in runs:
        by_probe.setdefault(run.probe, []).append(run)
        assert run.window == "weekday-peak"
        assert run.tenant in {"research", "prod"}
    # short every 5 min for both tenants, within the budget
    assert len(by_probe["short"]) >= 20
    assert {r.outcome for r in by_probe["short"]} == {Outcome.PASSED}
    # Each run that started keeps where it ran: as many nodes as it asked for, all real.
    for run in by_probe["short"] + by_probe["multi-gpu"]:
        assert len(run.node_names) == run.nodes
        assert set(run.node_names) <= set(soak.cluster.nodes)

    for run in by_probe["fail-exit"]:
        assert run.outcome is Outcome.PASSED
        assert run.exit_code == 3
        assert run.reason == "NonZeroExitCode"
    assert {(r.outcome, r.reason) for r in by_probe["fail-command"]} == {
        (Outcome.PASSED, "StartError")
    }
    assert {(r.outcome, r.reason) for r in by_probe["fail-oom"]} == {(Outcome.PASSED, "OOMKilled")}
    assert {(r.outcome, r.reason) for r in by_probe["fail-image"]} == {
        (Outcome.PASSED, "ImagePullBackOff")
    }
    assert {(r.outcome, r.reason) for r in by_probe["quota"]} == {(Outcome.PASSED, "Rejected")}
    assert all("quota" in (r.message or "") for r in by_probe["quota"])


def test_queue_waits_are_the_platforms_and_pending_reasons_are_kept_with_durations(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.run(5 * 60 + 60 * 60)
    runs = soak.store.runs()
    platform = soak.cluster.jobs([r.job_id for r in runs if r.job_id])
    waited = [r for r in runs if r.queue_wait_seconds and r.queue_wait_seconds > 0]
    assert waited, "a saturated cluster must make some probe wait"
    for run in waited:
        job = platform.get(run.job_id or "")
        if job is not None and job.started_at is not None:
            assert run.started_at == job.started_at
            assert run.submitted_at == job.submitted_at
        assert sum(run.pending_reasons.values()) > 0
        assert set(run.pending_reasons) <= {
            "Resources",
            "Priority",
            "QuotaExceeded",
            "ImagePullBackOff",
        }
    reasons = {reason for r in waited for reason in r.pending_reasons}
    assert reasons & {"Resources", "Priority"}


def test_the_budget_caps_probe_gpus_at_once(tmp_path: Path):
    soak = Soak(tmp_path, _settings(max_probe_gpus=3, max_probe_gpus_per_tenant=2))
    peak = 0
    for _ in range(70):
        soak.run(60)
        active = soak.controller.runner.active()
        peak = max(peak, sum(r.gpus for r in active))
        for tenant in ("research", "prod"):
            assert sum(r.gpus for r in active if r.tenant == tenant) <= 2
    assert 0 < peak <= 3
    skipped = soak.metrics.probe_runs_skipped_total.labels("multi-gpu", "budget")._value.get()
    assert skipped > 0  # a 4-GPU probe never fits a 3-GPU budget


def test_each_copy_the_budget_skips_is_stored_with_its_probe_tenant_window_and_reason(
    tmp_path: Path,
):
    soak = Soak(tmp_path, _settings(max_probe_gpus=3, max_probe_gpus_per_tenant=2))
    soak.run(5 * 60 + 60 * 60)

    skips = soak.store.probe_skips(MONDAY_0855, soak.clock.now() + timedelta(seconds=1))
    multi = [s for s in skips if s.probe == "multi-gpu"]
    # A 4-GPU probe never fits: every launch of it, for each tenant, is a stored skip.
    assert {(s.tenant, s.window, s.reason) for s in multi} == {
        (tenant, "weekday-peak", SkipReason.BUDGET) for tenant in ("research", "prod")
    }
    assert not any(r.probe == "multi-gpu" for r in soak.store.runs())
    assert {s.reason for s in skips} == {SkipReason.BUDGET}
    for probe in {s.probe for s in skips}:
        counted = soak.metrics.probe_runs_skipped_total.labels(probe, "budget")._value.get()
        assert counted == sum(1 for s in skips if s.probe == probe)


def test_a_skip_the_store_cannot_keep_is_counted_and_the_launch_goes_on(tmp_path: Path):
    soak = Soak(tmp_path, _settings(max_probe_gpus=3, max_probe_gpus_per_tenant=2))
    engine = sa.create_engine(soak.url)
    with engine.begin() as connection:  # every write of a skip now fails in the database
        connection.execute(sa.text("DROP TABLE probe_skips"))
    engine.dispose()

    soak.run(5 * 60 + 20 * 60)

    skipped = soak.metrics.probe_runs_skipped_total.labels("multi-gpu", "budget")._value.get()
    assert skipped > 0
    assert {r.probe for r in soak.store.runs()} >= {"short", "fail-exit"}


def test_outcome_metrics_agree_with_the_store(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.run(5 * 60 + 30 * 60)
    ended = [(r.probe, r.tenant, r.outcome) for r in soak.store.runs() if r.outcome is not None]
    registry_value = sum(
        soak.metrics.probe_runs_total.labels(
            probe, tenant, "weekday-peak", outcome.value
        )._value.get()
        for probe, tenant, outcome in set(ended)
    )
    assert registry_value == len(ended)


def test_a_restart_in_the_middle_loses_leaks_and_double_counts_nothing(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.run(5 * 60 + 20 * 60 + 30)  # 30 s after a round of launches
    before = {r.run_id for r in soak.store.runs()}
    in_flight = {r.run_id for r in soak.controller.runner.active()}
    assert in_flight, "the restart must happen with probes in flight"

    # The process dies: no shutdown, its in-memory state is gone. A new one starts.
    soak.controller = soak.new_controller()
    assert {r.run_id for r in soak.controller.runner.active()} <= in_flight
    soak.run(60 * 60)

    runs = soak.store.runs()
    assert {r.run_id for r in runs} >= before
    assert len({r.run_id for r in runs}) == len(runs)
    assert all(r.state is RunState.DONE for r in runs)
    assert not [r for r in runs if r.outcome is Outcome.LOST]
    adopted = [r for r in runs if r.run_id in in_flight]
    assert adopted and all(r.outcome is not None for r in adopted)
    assert soak.cluster.probe_jobs() == []


def test_a_submission_the_controller_never_saw_confirmed_is_adopted_or_declared_lost(
    tmp_path: Path,
):
    soak = Soak(tmp_path)
    soak.run(6 * 60)
    spec = soak.controller.catalog["short"]
    # Two runs stored as submitted with no job id (the process died right after saving them):
    # the platform took the first, never saw the second.
    template = soak.controller.runner.active()[0]
    taken = replace(template, run_id="taken", job_id=None, state=RunState.SUBMITTED)
    never = replace(template, run_id="never", job_id=None, state=RunState.SUBMITTED)
    soak.store.save_runs([taken, never])
    soak.cluster.submit(JobRequest("taken", "short", taken.tenant, None, spec.workload))
    soak.controller = soak.new_controller()
    soak.run(10 * 60)
    kept = soak.store.run("taken")
    assert kept is not None and kept.outcome is Outcome.PASSED
    lost = soak.store.run("never")
    assert lost is not None and lost.outcome is Outcome.LOST
    assert lost.reason == "SubmissionNotConfirmed"


def test_a_probe_job_no_run_accounts_for_is_cancelled_on_start(tmp_path: Path):
    soak = Soak(tmp_path)
    stray = soak.cluster.submit(
        JobRequest("unknown-run", "short", "prod", None, Workload(1, duration_seconds=3600))
    )
    soak.controller = soak.new_controller()
    assert soak.cluster.jobs([stray])[stray].phase.value == "cancelled"


def test_shutdown_cancels_every_probe_in_flight(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.run(5 * 60 + 10 * 60 + 30)
    assert soak.controller.runner.active()
    ended = soak.controller.stop()
    assert ended and {r.outcome for r in ended} == {Outcome.CANCELLED}
    assert soak.cluster.probe_jobs() == []
    assert not soak.store.runs(active_only=True)


def test_an_unreachable_scheduler_is_retried_and_runs_resume(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.run(5 * 60 + 5 * 60 + 30)
    soak.cluster.faults.reachable = False
    with pytest.raises(BackendError):
        soak.controller.follow()
    soak.run(5 * 60)  # errors captured by the loops, counted, nothing crashes
    errors = soak.metrics.loops.errors_total.labels("follow", "tick")._value.get()
    assert errors >= 50
    soak.cluster.faults.reachable = True
    soak.run(50 * 60 + 15 * 60)
    assert all(r.state is RunState.DONE for r in soak.store.runs())
    assert soak.cluster.probe_jobs() == []
