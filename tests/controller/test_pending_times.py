"""The controller adds up why every tenant's own jobs waited: each snapshot adds the time
since the one before to the reason each of them pending then had, per quarter hour, tenant
and reason; the observer's own probes are left out (their runs keep theirs), and the listed
jobs' waits say who submitted each."""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pytest

from observer.controller.work import pending_times
from observer.domain import JobPhase, JobRequest, JobStatus, SchedulerSnapshot, Workload
from observer.records import JobOrigin, PendingTime
from tests.controller.test_job_tallies import QUARTER, T0, Platform


@pytest.fixture
def platform(tmp_path: Path):
    made = Platform(tmp_path)
    yield made
    made.store.close()


def _expected(snapshots: list[SchedulerSnapshot]) -> dict[tuple[str, str], float]:
    """Seconds per (tenant, reason) read off the snapshots as they were taken: each tenant
    job pending in one, for the time to the next."""
    expected: defaultdict[tuple[str, str], float] = defaultdict(float)
    for before, after in itertools.pairwise(snapshots):
        for job in before.jobs:
            if job.phase is JobPhase.PENDING and job.run_id is None:
                seconds = (after.at - before.at).total_seconds()
                expected[(job.tenant, job.reason or "Unknown")] += seconds
    return expected


def test_the_tenants_jobs_time_pending_is_stored_by_reason_and_the_probes_left_out(
    platform: Platform,
):
    for _ in range(2):  # research holds all eight GPUs for an hour
        platform.job("research", 3600, gpus=4)
    for _ in range(3):
        platform.job("prod", 600, gpus=2)
    probe = JobRequest("run-1", "short", "prod", None, Workload(gpus_per_node=1))
    platform.cluster.submit(probe)
    snapshots = []
    for _ in range(40):  # 02:07 to 02:27, across a quarter hour's edge
        snapshots.append(platform.controller.sample_scheduler())
        platform.clock.advance(30)

    stored = platform.store.pending_times(T0, T0 + timedelta(hours=1))
    totals: defaultdict[tuple[str, str], float] = defaultdict(float)
    for time in stored:
        totals[(time.tenant, time.reason)] += time.seconds
    assert totals == _expected(snapshots)
    assert {t.tenant for t in stored} == {"prod"}  # the probe waited too, and is not in it
    assert {t.slot for t in stored} == {T0, T0 + QUARTER}


def test_an_interval_across_a_quarter_hours_edge_is_cut_there():
    at = T0 + QUARTER - timedelta(seconds=10)
    jobs = (
        JobStatus("1", None, "prod", None, JobPhase.PENDING, 1, reason="Priority"),
        JobStatus("2", None, "prod", None, JobPhase.PENDING, 1, reason="Priority"),
        JobStatus("3", None, "prod", None, JobPhase.PENDING, 1),
        JobStatus("4", "run-4", "prod", None, JobPhase.PENDING, 1, reason="Priority"),
        JobStatus("5", None, "prod", None, JobPhase.RUNNING, 1),
    )
    before = SchedulerSnapshot(at=at, queues=(), nodes=(), jobs=jobs)

    assert pending_times(before, at + timedelta(seconds=30)) == [
        PendingTime(T0, "prod", "Priority", 2 * 10.0),
        PendingTime(T0, "prod", "Unknown", 10.0),
        PendingTime(T0 + QUARTER, "prod", "Priority", 2 * 20.0),
        PendingTime(T0 + QUARTER, "prod", "Unknown", 20.0),
    ]


def test_the_listed_waits_say_whose_jobs_they_are(platform: Platform):
    platform.job("prod", 60)
    platform.cluster.submit(JobRequest("run-1", "short", "prod", None, Workload(gpus_per_node=1)))
    platform.controller.tally_jobs()
    platform.clock.advance(900)
    [*_, slot] = [s for s in platform.controller.tally_jobs() if s.waits]

    assert sorted((w.tenant, w.origin) for w in slot.waits) == [
        ("prod", JobOrigin.OBSERVER),
        ("prod", JobOrigin.TENANT),
    ]
