"""The controller follows the platform's estimate of each waiting job's start, snapshot by
snapshot, and records a job twice at most: when it first gets an estimate, and when it
starts (with the last estimate seen before); a job that started with none is recorded with
none. Its own estimate for a probe about to be submitted is the GPUs pending in the probe's
queue over the GPUs started there in the last hour."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from observer.controller.estimates import RATE_WINDOW, ExpectedStarts
from observer.domain import JobPhase, JobStatus, QueueState, SchedulerSnapshot
from observer.records import JobEstimate, JobOrigin
from tests.controller.test_job_tallies import T0, Platform

MINUTE = timedelta(minutes=1)


def job(job_id: str, phase: JobPhase, **fields: object) -> JobStatus:
    status = JobStatus(job_id, None, "prod", "gpu", phase, 4)
    return replace(status, **fields)  # type: ignore[arg-type]


def queue(pending_gpus: int, name: str | None = "gpu") -> QueueState:
    return QueueState("prod", name, 1, pending_gpus, 0, 0, 0.0)


def snap(minutes: int, *jobs: JobStatus, queues: tuple[QueueState, ...] = ()) -> SchedulerSnapshot:
    return SchedulerSnapshot(T0 + minutes * MINUTE, queues, (), jobs)


def test_a_job_is_recorded_when_it_first_gets_an_estimate_and_when_it_starts():
    first, later = T0 + 40 * MINUTE, T0 + 50 * MINUTE
    started = T0 + 45 * MINUTE
    snapshots = [
        snap(0, job("a", JobPhase.PENDING), job("b", JobPhase.PENDING)),
        snap(1, job("a", JobPhase.PENDING, expected_start_at=first), job("b", JobPhase.PENDING)),
        snap(2, job("a", JobPhase.PENDING, expected_start_at=later), job("b", JobPhase.PENDING)),
        snap(3, job("a", JobPhase.PENDING, expected_start_at=later), job("b", JobPhase.PENDING)),
        snap(
            45,
            job("a", JobPhase.RUNNING, started_at=started),
            job("b", JobPhase.RUNNING, started_at=started),
            job("c", JobPhase.RUNNING, started_at=started),  # never seen waiting
        ),
    ]
    expected = ExpectedStarts()

    records = [expected.observe(s) for s in snapshots]

    a = JobEstimate("a", "prod", JobOrigin.TENANT, 4, first, snapshots[1].at, first)
    assert records == [
        [],
        [a],
        [],
        [],
        [
            replace(a, last_expected_start_at=later, started_at=started),
            JobEstimate("b", "prod", JobOrigin.TENANT, 4, started_at=started),
        ],
    ]


def test_the_observers_estimate_is_the_gpus_pending_over_the_gpus_started_in_the_last_hour():
    expected = ExpectedStarts()
    old = job("old", JobPhase.RUNNING, started_at=T0 - RATE_WINDOW - MINUTE, gpus=8)
    started = [job(f"s{i}", JobPhase.RUNNING, started_at=T0 - i * 10 * MINUTE) for i in range(3)]
    other = job("x", JobPhase.RUNNING, queue="debug", started_at=T0, gpus=2)
    snapshot = snap(0, old, *started, other, queues=(queue(6), queue(2, "debug")))

    assert expected.expected_wait_seconds("gpu") is None  # before the first snapshot
    expected.observe(snapshot)

    in_the_hour = sum(j.gpus for j in started)  # the old job's start is before the hour
    assert expected.expected_wait_seconds("gpu") == 6 / in_the_hour * 3600
    # a probe in no queue is judged against the whole platform
    assert expected.expected_wait_seconds(None) == (6 + 2) / (in_the_hour + 2) * 3600


def test_nothing_pending_is_no_wait_and_gpus_pending_with_none_started_no_estimate():
    expected = ExpectedStarts()
    expected.observe(snap(0, job("p", JobPhase.PENDING), queues=(queue(4), queue(0, "idle"))))

    assert expected.expected_wait_seconds("idle") == 0.0
    assert expected.expected_wait_seconds("gpu") is None


@pytest.fixture
def platform(tmp_path: Path):
    made = Platform(tmp_path)
    yield made
    made.store.close()


def test_a_probe_keeps_the_controllers_estimate_made_at_its_submission(platform: Platform):
    for _ in range(2):  # research holds all eight GPUs for an hour
        platform.job("research", 3600, gpus=4)
    platform.controller.sample_scheduler()
    platform.clock.advance(30)
    for _ in range(3):
        platform.job("prod", 600, gpus=2)
    snapshot = platform.controller.sample_scheduler()

    controller = platform.controller
    [probe] = controller.runner.launch(controller.catalog["short"], ["prod"], None)

    pending = sum(q.pending_gpus for q in snapshot.queues)
    started = sum(j.gpus for j in snapshot.jobs if j.started_at is not None)
    assert pending and started
    stored = platform.store.run(probe.run_id)
    assert stored is not None
    assert stored.expected_wait_seconds == pytest.approx(pending / started * 3600)
