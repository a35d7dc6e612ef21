"""One contract for every scheduler backend: what the controller relies on, whichever
platform answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from observer.domain import Behaviour, JobPhase, JobRequest, JobStatus, Workload
from tests import components
from tests.backends.k8s_harness import KubernetesHarness
from tests.backends.slurm_harness import require, slurm_harness
from tests.contracts.scheduler_harness import (
    HangingHarness,
    HangingPlatform,
    Harness,
    Platform,
    simulated,
)

HARNESSES: dict[str, Platform] = {
    "simulated": simulated,
    "kubernetes": KubernetesHarness,
    "slurm": slurm_harness,
    "slurm24": lambda: slurm_harness(require("slurm24")),
}
# The platforms that can be made unable to stop a job. The local Slurm has no epilog to hang,
# so its COMPLETING jobs are not driven here.
HANGING: dict[str, HangingPlatform] = {"simulated": simulated, "kubernetes": KubernetesHarness}


@pytest.fixture(params=components.params(*sorted(HARNESSES)))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    with HARNESSES[request.param]() as h:
        yield h
        for job in h.backend.probe_jobs():
            h.backend.cancel(job.job_id)


@pytest.fixture(params=sorted(HANGING))
def hanging(request: pytest.FixtureRequest) -> Iterator[HangingHarness]:
    with HANGING[request.param]() as h:
        yield h


def _request(h: Harness, workload: Workload, tenant: int = 0, probe: str = "short") -> JobRequest:
    return JobRequest(
        run_id=uuid.uuid4().hex,
        probe=probe,
        tenant=h.tenants[tenant],
        queue=h.queue,
        workload=workload,
    )


def _phase(h: Harness, job_id: str) -> JobPhase | None:
    status = h.backend.jobs([job_id]).get(job_id)
    return status.phase if status else None


def test_a_short_probe_runs_and_succeeds_with_its_timestamps(harness: Harness):
    request = _request(harness, Workload(gpus_per_node=1, duration_seconds=2))
    job_id = harness.backend.submit(request)
    status = harness.backend.jobs([job_id])[job_id]
    assert status.run_id == request.run_id
    assert status.tenant == request.tenant
    assert status.gpus == 1

    harness.settle(lambda: _phase(harness, job_id) is JobPhase.SUCCEEDED, 60)
    done = harness.backend.jobs([job_id])[job_id]
    assert done.exit_code == 0
    assert done.submitted_at is not None and done.started_at is not None
    assert done.finished_at is not None
    assert done.submitted_at <= done.started_at <= done.finished_at
    assert done.submitted_at.tzinfo is not None
    assert len(done.nodes) == 1


def test_a_failing_probe_fails_with_its_exit_code_and_a_reason(harness: Harness):
    job_id = harness.backend.submit(
        _request(harness, Workload(gpus_per_node=1, duration_seconds=1, exit_code=3), probe="fail")
    )
    harness.settle(lambda: _phase(harness, job_id) is JobPhase.FAILED, 60)
    failed = harness.backend.jobs([job_id])[job_id]
    assert failed.exit_code == 3
    assert failed.reason


def test_a_job_that_cannot_fit_waits_with_the_platforms_reason(harness: Harness):
    whole_cluster = Workload(
        gpus_per_node=harness.gpus_per_node, nodes=harness.nodes, duration_seconds=30
    )
    blocker = harness.backend.submit(_request(harness, whole_cluster))
    harness.settle(lambda: _phase(harness, blocker) is JobPhase.RUNNING, 60)
    waiting = harness.backend.submit(
        _request(harness, Workload(gpus_per_node=1, duration_seconds=1), tenant=1)
    )
    harness.settle(lambda: bool(harness.backend.jobs([waiting])[waiting].reason), 30)
    pending = harness.backend.jobs([waiting])[waiting]
    assert pending.phase is JobPhase.PENDING
    assert pending.started_at is None

    snap = harness.backend.snapshot()
    queue = next(q for q in snap.queues if q.tenant == harness.tenants[1])
    assert queue.pending_jobs >= 1
    assert queue.pending_gpus >= 1
    assert sum(queue.pending_reasons.values()) >= 1
    assert sum(n.gpus_allocated for n in snap.nodes) >= harness.gpus_per_node * harness.nodes
    assert {j.job_id for j in snap.jobs} >= {blocker, waiting}


def test_cancel_ends_a_job_and_frees_its_gpus(harness: Harness):
    job_id = harness.backend.submit(
        _request(harness, Workload(gpus_per_node=1, duration_seconds=300))
    )
    harness.settle(lambda: _phase(harness, job_id) is JobPhase.RUNNING, 60)
    harness.backend.cancel(job_id)
    harness.settle(lambda: _phase(harness, job_id) in (JobPhase.CANCELLED, None), 60)
    harness.backend.cancel(job_id)  # cancelling again is not an error
    assert job_id not in {j.job_id for j in harness.backend.probe_jobs()}


def test_probe_jobs_lists_the_observers_unfinished_jobs(harness: Harness):
    request = _request(harness, Workload(gpus_per_node=1, duration_seconds=300))
    job_id = harness.backend.submit(request)
    listed = {j.job_id: j for j in harness.backend.probe_jobs()}
    assert listed[job_id].run_id == request.run_id


def test_a_log_canary_leaves_every_sequenced_line_in_its_logs(harness: Harness):
    request = _request(
        harness,
        Workload(
            gpus_per_node=1,
            duration_seconds=3,
            behaviour=Behaviour.LOG_CANARY,
            log_lines=20,
            log_interval_seconds=0.1,
        ),
        probe="log-canary",
    )
    job_id = harness.backend.submit(request)
    harness.settle(lambda: _phase(harness, job_id) is JobPhase.SUCCEEDED, 60)
    lines = [
        line for line in harness.backend.logs(job_id).splitlines() if "observer-canary" in line
    ]
    assert [line.split("seq=")[1].split()[0] for line in lines] == [str(n) for n in range(20)]
    assert all(f"run={request.run_id}" in line for line in lines)


def test_a_running_job_names_the_owners_its_nodes_agents_see(harness: Harness):
    # Slurm and the simulator: the job id; Kubernetes: the UIDs of the Job's pods.
    job_id = harness.backend.submit(
        _request(harness, Workload(gpus_per_node=1, duration_seconds=300))
    )
    harness.settle(lambda: _phase(harness, job_id) is JobPhase.RUNNING, 60)
    expected = harness.owner_ids(job_id)
    running = harness.backend.jobs([job_id])[job_id]
    [listed] = [j for j in harness.backend.snapshot().jobs if j.job_id == job_id]

    assert expected
    assert set(running.owner_ids) == set(listed.owner_ids) == expected


def test_snapshot_reports_every_node_with_its_gpus(harness: Harness):
    snap = harness.backend.snapshot()
    assert len(snap.nodes) == harness.nodes
    assert all(n.gpus_total == harness.gpus_per_node for n in snap.nodes)
    assert snap.at.tzinfo is not None


def test_a_job_that_cannot_be_stopped_shows_as_ending_while_it_holds_its_gpus(
    hanging: HangingHarness,
):
    job_id = hanging.backend.submit(
        _request(hanging, Workload(gpus_per_node=1, duration_seconds=300))
    )
    hanging.settle(lambda: _phase(hanging, job_id) is JobPhase.RUNNING, 60)
    hanging.hang_ends(job_id)
    hanging.backend.cancel(job_id)

    def ending() -> JobStatus | None:
        jobs = hanging.backend.snapshot().jobs
        return next((j for j in jobs if j.job_id == job_id and j.ending_since), None)

    hanging.settle(lambda: ending() is not None, 60)
    stuck = ending()
    assert stuck is not None and stuck.gpus == 1 and len(stuck.nodes) == 1
    assert set(stuck.owner_ids) == hanging.owner_ids(job_id)
    snap = hanging.backend.snapshot()
    assert sum(n.gpus_allocated for n in snap.nodes if n.name in stuck.nodes) == 1
    assert job_id not in {j.job_id for j in hanging.backend.probe_jobs()}

    hanging.release_ends(job_id)
    hanging.settle(
        lambda: job_id not in {j.job_id for j in hanging.backend.snapshot().jobs},
        60,
    )
    assert sum(n.gpus_allocated for n in hanging.backend.snapshot().nodes) == 0


def test_finished_jobs_lists_every_job_that_ended_in_the_period_with_its_final_state(
    harness: Harness,
):
    ok = harness.backend.submit(_request(harness, Workload(gpus_per_node=1, duration_seconds=1)))
    failing = harness.backend.submit(
        _request(harness, Workload(gpus_per_node=1, duration_seconds=1, exit_code=3), tenant=1)
    )
    harness.settle(
        lambda: (
            _phase(harness, ok) is JobPhase.SUCCEEDED
            and _phase(harness, failing) is JobPhase.FAILED
        ),
        60,
    )
    done = harness.backend.jobs([ok, failing])
    ends = [s.finished_at for s in done.values()]
    assert None not in ends
    first, last = min(filter(None, ends)), max(filter(None, ends))
    listing: dict[str, JobStatus] = {}

    def listed() -> bool:  # accounting may record an end a moment after the scheduler
        result = harness.backend.finished_jobs(first, last + timedelta(seconds=1))
        listing.update({s.job_id: s for s in result.jobs})
        return {ok, failing} <= listing.keys()

    harness.settle(listed, 60)
    succeeded, failed = listing[ok], listing[failing]
    assert (succeeded.phase, succeeded.tenant, succeeded.gpus) == (
        JobPhase.SUCCEEDED,
        harness.tenants[0],
        1,
    )
    assert (failed.phase, failed.tenant, failed.exit_code) == (
        JobPhase.FAILED,
        harness.tenants[1],
        3,
    )
    assert failed.reason
    assert failed.submitted_at is not None and failed.started_at is not None
    assert failed.finished_at == done[failing].finished_at
    assert all(
        s.finished_at is not None and first <= s.finished_at < last + timedelta(seconds=1)
        for s in listing.values()
    )


def test_finished_jobs_leaves_out_jobs_that_ended_outside_the_period(harness: Harness):
    job_id = harness.backend.submit(
        _request(harness, Workload(gpus_per_node=1, duration_seconds=1))
    )
    harness.settle(lambda: _phase(harness, job_id) is JobPhase.SUCCEEDED, 60)
    end = harness.backend.jobs([job_id])[job_id].finished_at
    assert end is not None

    before = harness.backend.finished_jobs(end - timedelta(hours=1), end)
    after = harness.backend.finished_jobs(end + timedelta(seconds=1), end + timedelta(hours=1))

    assert job_id not in {s.job_id for s in (*before.jobs, *after.jobs)}
    assert (before.since, before.until) == (end - timedelta(hours=1), end)
    assert before.complete or before.note
