"""The controller counts every tenant's finished jobs, not only its probes: each listing
from where the last one ended, stored per quarter hour, no period skipped when a listing
fails or the controller restarts; each failed job counted by its cause, from what happened on
its nodes while it ran; every quota changed in that time stored once as a detected
intervention, with who changed it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.backends.base import FinishedJobs
from observer.backends.simulated import SimulatedCluster
from observer.clock import ManualClock
from observer.controller.compose import build_backend, build_controller
from observer.controller.work import Controller, tally_slots
from observer.domain import (
    Expectation,
    Finding,
    FindingKind,
    JobPhase,
    JobRequest,
    JobStatus,
    ProbeRun,
    RunState,
    Severity,
    Workload,
)
from observer.errors import BackendError
from observer.metrics import ControllerMetrics
from observer.records import InterventionSource, JobOrigin, JobSlot, JobTally
from observer.reports.compute.causes import classify_job
from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from observer.settings import Settings
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
QUARTER = timedelta(minutes=15)


def _ended(job_id: str, tenant: str, phase: JobPhase, at: datetime, reason: str | None = None):
    return JobStatus(job_id, None, tenant, None, phase, 1, finished_at=at, reason=reason)


def test_a_listing_is_counted_by_the_quarter_hour_of_each_jobs_end():
    listing = FinishedJobs(
        T0,
        T0 + timedelta(minutes=20),
        (
            _ended("1", "prod", JobPhase.FAILED, T0 + timedelta(minutes=1), "OOMKilled"),
            _ended("2", "prod", JobPhase.FAILED, T0 + timedelta(minutes=14), "OOMKilled"),
            _ended("3", "research", JobPhase.SUCCEEDED, T0 + timedelta(minutes=2)),
            _ended("4", "research", JobPhase.SUCCEEDED, T0 + timedelta(minutes=15)),
        ),
        complete=False,
        note="TTL",
    )

    assert tally_slots(listing, lambda job: classify_job(job, [], [])) == [
        JobSlot(
            T0,
            T0 + QUARTER,
            False,
            "TTL",
            (
                JobTally("prod", JobPhase.FAILED, "OOMKilled", "application", 2),
                JobTally("research", JobPhase.SUCCEEDED, None, None, 1),
            ),
        ),
        JobSlot(
            T0 + QUARTER,
            T0 + timedelta(minutes=20),
            False,
            "TTL",
            (JobTally("research", JobPhase.SUCCEEDED, None, None, 1),),
        ),
    ]


def test_a_listing_that_does_not_start_on_a_slot_is_refused():
    with pytest.raises(ValueError, match="slot"):
        tally_slots(
            FinishedJobs(T0 + timedelta(minutes=1), T0 + QUARTER, (), True), lambda job: None
        )


class Platform:
    """The controller over the simulated cluster and a store, on one manual clock."""

    def __init__(self, tmp_path: Path) -> None:
        self.settings = Settings.model_validate(
            {
                "controller": {
                    "tenants": [{"name": "research"}, {"name": "prod"}],
                    "simulation": {"nodes": 2, "gpus_per_node": 4},
                },
                "reports": {"soak_started_at": T0.isoformat()},
            }
        )
        self.clock = ManualClock(T0 + timedelta(minutes=7))
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        cluster = build_backend(self.settings.controller, self.clock)
        assert isinstance(cluster, SimulatedCluster)
        self.cluster = cluster
        self.controller = self.new_controller()

    def new_controller(self) -> Controller:
        self.registry = CollectorRegistry()  # a new process: its own metrics
        metrics = ControllerMetrics(self.registry)
        return build_controller(self.settings, self.cluster, self.store, self.clock, metrics)

    def job(self, tenant: str, seconds: float, exit_code: int = 0, gpus: int = 1) -> str:
        work = Workload(gpus_per_node=gpus, duration_seconds=seconds, exit_code=exit_code)
        return self.cluster.submit_background(tenant, work)

    def node_of(self, job_id: str) -> str:
        [node] = self.cluster.jobs([job_id])[job_id].nodes
        return node

    def counted(self, since: datetime, until: datetime) -> dict[tuple[str, JobPhase], int]:
        totals: dict[tuple[str, JobPhase], int] = {}
        for slot in self.store.job_slots(since, until):
            for tally in slot.tallies:
                key = (tally.tenant, tally.phase)
                totals[key] = totals.get(key, 0) + tally.jobs
        return totals


@pytest.fixture
def platform(tmp_path: Path):
    made = Platform(tmp_path)
    yield made
    made.store.close()


def test_every_tenants_jobs_are_counted_once_however_often_they_are_listed(platform: Platform):
    platform.job("research", 60)
    platform.job("prod", 120, exit_code=2)
    platform.controller.tally_jobs()  # 02:07: nothing ended yet
    platform.clock.advance(180)
    platform.controller.tally_jobs()  # 02:10
    platform.job("research", 600)
    platform.clock.advance(1200)
    platform.controller.tally_jobs()  # 02:30
    platform.controller.tally_jobs()  # again, at once

    assert platform.counted(T0, T0 + timedelta(hours=1)) == {
        ("research", JobPhase.SUCCEEDED): 2,
        ("prod", JobPhase.FAILED): 1,
    }
    slots = platform.store.job_slots(T0, T0 + timedelta(hours=1))
    assert [(s.start, s.listed_until, s.complete) for s in slots] == [
        (T0, T0 + QUARTER, True),
        (T0 + QUARTER, T0 + 2 * QUARTER, True),
    ]
    failed = next(t for s in slots for t in s.tallies if t.phase is JobPhase.FAILED)
    assert failed.reason == "NonZeroExitCode"


def test_a_failed_listing_stores_nothing_and_the_next_one_covers_its_time(platform: Platform):
    platform.controller.tally_jobs()
    platform.job("prod", 60, exit_code=1)
    platform.clock.advance(600)
    platform.cluster.faults.reachable = False

    with pytest.raises(BackendError):
        platform.controller.tally_jobs()

    assert platform.store.jobs_listed_until() == T0 + timedelta(minutes=7)
    assert (
        platform.registry.get_sample_value(
            "observer_scheduler_errors_total", {"operation": "finished_jobs"}
        )
        == 1.0
    )
    platform.clock.advance(600)
    platform.cluster.faults.reachable = True
    platform.controller.tally_jobs()
    assert platform.counted(T0, T0 + timedelta(hours=1)) == {("prod", JobPhase.FAILED): 1}
    assert platform.store.jobs_listed_until() == T0 + timedelta(minutes=27)


def test_an_accounting_outage_is_a_condition_from_its_first_failed_listing_to_the_next_good(
    platform: Platform,
):
    """The scheduler answers throughout; only its record of finished jobs does not."""
    platform.controller.tally_jobs()
    platform.clock.advance(600)
    platform.cluster.faults.accounting_reachable = False
    failed_at = platform.clock.now()
    with pytest.raises(BackendError):
        platform.controller.tally_jobs()
    platform.controller.sample_scheduler()

    [opened] = platform.controller.detect()
    assert (opened.detector, opened.opened_at, opened.closed_at) == (
        "accounting_unreachable",
        failed_at,
        None,
    )
    assert opened.subject == {"accounting": "simulated"}
    assert "the cluster's accounting is unreachable" in opened.evidence["error"]
    platform.clock.advance(60)
    assert platform.controller.detect() == []  # still down: nothing new

    platform.clock.advance(540)
    platform.cluster.faults.accounting_reachable = True
    platform.controller.tally_jobs()
    platform.clock.advance(5)
    [closed] = platform.controller.detect()
    assert closed.closed_at == platform.clock.now()
    assert platform.store.findings(detector="accounting_unreachable") == [closed]


def test_a_restarted_controller_lists_from_where_the_last_listing_ended(platform: Platform):
    platform.controller.tally_jobs()
    platform.job("research", 60)
    platform.clock.advance(3 * 3600)  # the controller was down for three hours
    platform.controller = platform.new_controller()
    platform.controller.tally_jobs()

    assert platform.counted(T0, T0 + timedelta(hours=4)) == {("research", JobPhase.SUCCEEDED): 1}
    slots = platform.store.job_slots(T0, T0 + timedelta(hours=4))
    assert len(slots) == 13  # 02:00 to 05:07, every quarter hour listed
    assert all(s.complete for s in slots)


def test_a_listing_beyond_what_the_platform_remembers_is_stored_as_incomplete(
    platform: Platform,
):
    platform.controller.tally_jobs()
    platform.job("research", 60)
    platform.clock.advance(3 * 24 * 3600)  # past the simulated cluster's two days of history
    platform.controller.tally_jobs()

    slots = platform.store.job_slots(T0, T0 + timedelta(days=4))
    assert not any(s.complete for s in slots)
    assert all("forgotten" in s.note for s in slots)
    assert platform.counted(T0, T0 + timedelta(days=4)) == {}


def test_a_stopping_controller_lists_the_last_stretch_and_its_cancelled_probes(
    platform: Platform,
):
    platform.controller.tally_jobs()
    platform.job("prod", 60)
    platform.clock.advance(120)  # ended, not yet listed: the next listing is 600 s away

    platform.controller.stop()

    assert platform.counted(T0, T0 + timedelta(hours=1)) == {("prod", JobPhase.SUCCEEDED): 1}
    assert platform.store.jobs_listed_until() == platform.clock.now()


def test_a_stopping_controller_whose_listing_fails_still_stops(platform: Platform):
    platform.controller.tally_jobs()
    platform.cluster.faults.reachable = False

    platform.controller.stop()

    assert platform.store.jobs_listed_until() == T0 + timedelta(minutes=7)


def test_each_failed_job_is_counted_by_what_happened_on_its_node_while_it_ran(
    platform: Platform,
):
    platform.controller.tally_jobs()  # 02:07
    platform.controller.sample_scheduler()
    on_bad_gpu = platform.job("prod", 3600, gpus=3)
    on_drained_node = platform.job("research", 3600, gpus=3)
    platform.job("research", 60, exit_code=3)
    platform.job("prod", 60)
    bad_gpu, drained = platform.node_of(on_bad_gpu), platform.node_of(on_drained_node)
    assert bad_gpu != drained
    platform.clock.advance(300)  # 02:12: the agent reports an Xid 79, the job dies of it
    now = platform.clock.now()
    platform.store.save_findings(
        [
            Finding(
                detector="gpu_xid",
                kind=FindingKind.EVENT,
                subject={"node": bad_gpu, "pci_bus_id": "0000:3b:00.0", "xid": "79"},
                severity=Severity.CRITICAL,
                summary="Xid 79: GPU has fallen off the bus",
                opened_at=now,
                closed_at=now,
                # on the GPU the job's processes ran on, as the agent saw it
                evidence={
                    "xid": 79,
                    "xid_class": "bus",
                    "fatal": True,
                    "gpu_owner_ids": [on_bad_gpu],
                },
            )
        ]
    )
    platform.cluster.fail_job(on_bad_gpu, "Error", "exited with code 1", 1)
    platform.cluster.drain(drained, "not responding")
    platform.controller.sample_scheduler()
    platform.clock.advance(60)
    platform.cluster.fail_job(on_drained_node, "Error", "killed", 143)
    platform.clock.advance(1200)  # 02:33
    platform.controller.tally_jobs()

    tallies = [t for s in platform.store.job_slots(T0, T0 + timedelta(hours=1)) for t in s.tallies]
    assert {(t.tenant, t.phase, t.reason, t.cause): t.jobs for t in tallies} == {
        ("prod", JobPhase.FAILED, "Error", "gpu_driver"): 1,
        ("research", JobPhase.FAILED, "Error", "node"): 1,
        ("research", JobPhase.FAILED, "NonZeroExitCode", "application"): 1,
        ("prod", JobPhase.SUCCEEDED, None, None): 1,
    }


def test_the_observers_own_probes_are_tallied_apart_from_the_tenants_jobs(platform: Platform):
    platform.controller.tally_jobs()
    platform.job("prod", 60, exit_code=1)
    probe = Workload(gpus_per_node=1, duration_seconds=60, exit_code=3)
    platform.cluster.submit(JobRequest("run-1", "fail-exit", "prod", None, probe))
    platform.clock.advance(600)

    platform.controller.tally_jobs()

    tallies = [t for s in platform.store.job_slots(T0, T0 + timedelta(hours=1)) for t in s.tallies]
    assert sorted((t.origin, t.phase, t.jobs) for t in tallies if t.tenant == "prod") == [
        (JobOrigin.OBSERVER, JobPhase.FAILED, 1),
        (JobOrigin.TENANT, JobPhase.FAILED, 1),
    ]


def test_a_probe_job_that_failed_as_its_probe_expects_is_tallied_as_designed(platform: Platform):
    platform.controller.tally_jobs()
    meant = ProbeRun(
        "run-1", "fail-exit", "prod", None, None, Expectation.FAIL, 1, 1, RunState.SUBMITTED
    )
    platform.store.save_runs([meant])
    probe = Workload(gpus_per_node=1, duration_seconds=60, exit_code=3)
    platform.cluster.submit(JobRequest("run-1", "fail-exit", "prod", None, probe))
    platform.clock.advance(600)

    platform.controller.tally_jobs()

    [tally] = [t for s in platform.store.job_slots(T0, T0 + timedelta(hours=1)) for t in s.tallies]
    assert (tally.origin, tally.phase, tally.cause) == (
        JobOrigin.OBSERVER,
        JobPhase.FAILED,
        "as_designed",
    )


def test_a_quota_changed_during_the_soak_is_stored_once_with_who_changed_it(platform: Platform):
    platform.controller.tally_jobs()  # 02:07
    platform.clock.advance(120)
    platform.cluster.change_quota("research", 2, actor="ops-carol")  # 02:09
    platform.clock.advance(60)
    platform.controller.tally_jobs()  # 02:10
    platform.controller.tally_jobs()  # again, at once
    platform.clock.advance(600)
    platform.controller = platform.new_controller()  # restarted: lists from 02:00 again
    platform.controller.tally_jobs()

    [stored] = platform.store.interventions(T0, T0 + timedelta(hours=1))
    assert (stored.at, stored.by, stored.subject) == (
        T0 + timedelta(minutes=9),
        "ops-carol",
        {"tenant": "research"},
    )
    assert stored.source is InterventionSource.DETECTED
    assert stored.detail["action"] == "quota_changed"
    assert "2" in stored.reason  # the platform's own words for the new limit


def test_a_failed_quota_read_is_read_again_with_the_next_listing(platform: Platform):
    platform.controller.tally_jobs()  # 02:07
    platform.cluster.change_quota("prod", 1, actor="ops-dan")
    platform.clock.advance(600)
    platform.cluster.faults.reachable = False
    with pytest.raises(BackendError):
        platform.controller.tally_jobs()
    assert platform.store.interventions(T0, T0 + timedelta(hours=1)) == []

    platform.cluster.faults.reachable = True
    platform.clock.advance(600)
    platform.controller.tally_jobs()
    assert [i.by for i in platform.store.interventions(T0, T0 + timedelta(hours=1))] == ["ops-dan"]


def test_the_daily_summary_lists_a_quota_change_with_its_actor_and_time(platform: Platform):
    platform.controller.tally_jobs()
    platform.clock.advance(180)
    platform.cluster.change_quota("research", 2, actor="ops-carol")  # 02:10 UTC
    platform.clock.advance(60)
    platform.controller.tally_jobs()
    day = T0.date()
    tomorrow = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=2)

    report = build_daily(load_daily(platform.store, platform.settings, day, tomorrow))
    en, zh = render_daily(report, "en"), render_daily(report, "zh-CN")

    [item] = json.loads(en.json)["manual_interventions"]["items"]
    assert (item["by"], item["subject"], item["action"]) == (
        "ops-carol",
        {"tenant": "research"},
        "quota_changed",
    )
    # once in the tenants' quota record (before -> after), once in the interventions' audit
    record, row = [line for line in en.markdown.splitlines() if "ops-carol" in line]
    assert record.split(" | ")[1:] == [
        "tenant=research",
        "ops-carol",
        "not recorded",
        "quota_gpus=2 |",
    ]
    assert "quota changed" in row and "02:10" in row and "tenant=research" in row
    assert "detected" in row
    record, row = [line for line in zh.markdown.splitlines() if "ops-carol" in line]
    assert "02:10" in record and "无记录" in record
    assert "配额变更" in row and "02:10" in row


def test_a_replica_of_the_observers_inference_service_is_the_observers_not_the_tenants():
    replaced = replace(
        _ended("7", "prod", JobPhase.CANCELLED, T0 + timedelta(minutes=1)),
        service="observer-inference",
    )
    listing = FinishedJobs(T0, T0 + QUARTER, (replaced,), complete=True)

    [slot] = tally_slots(listing, lambda job: None)

    assert [(t.tenant, t.phase, t.origin) for t in slot.tallies] == [
        ("prod", JobPhase.CANCELLED, JobOrigin.OBSERVER)
    ]


def test_a_node_failure_counted_in_the_day_so_far_stays_in_the_final_count(platform: Platform):
    job = platform.job("research", 1200)  # 02:07, on a node until 02:27
    platform.clock.advance(180)
    platform.cluster.fail_node(platform.node_of(job), "test")  # 02:10: requeued, runs again
    platform.clock.advance(120)
    platform.controller.tally_jobs()  # 02:12: the day so far
    so_far = platform.counted(T0, T0 + timedelta(days=1))
    platform.clock.advance(3600)
    platform.controller.tally_jobs()  # 03:12: the job passed on its second attempt
    final = platform.counted(T0, T0 + timedelta(days=1))

    assert so_far == {("research", JobPhase.FAILED): 1}
    assert final == {("research", JobPhase.FAILED): 1, ("research", JobPhase.SUCCEEDED): 1}
    [failed] = [
        t
        for s in platform.store.job_slots(T0, T0 + timedelta(days=1))
        for t in s.tallies
        if t.phase is JobPhase.FAILED
    ]
    assert (failed.reason, failed.cause) == ("NodeDown", "node")
