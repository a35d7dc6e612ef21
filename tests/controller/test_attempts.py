"""Every attempt of a probe's job is evidence: a node failure under a running probe is kept
as an attempt of its run, in the platform's words where it names them, and the run's wait
counts each attempt from its own eligible time, never negative."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.clock import ManualClock
from observer.controller.runs import Budget, ProbeRunner, Tenant
from observer.domain import Attempt, Expectation, JobStatus, Outcome, ProbeRun, Workload
from observer.metrics import ControllerMetrics
from observer.probes.catalog import ProbeSpec
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

T0 = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
PROBE = ProbeSpec("short", "one GPU", Workload(1, duration_seconds=600), Expectation.SUCCEED)


class _CountOnly(SimulatedCluster):
    """A platform that counts a job's restarts but names no attempt, and resets its submit
    time on a requeue: Slurm's squeue while slurmdbd is unreachable."""

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        return {
            job_id: replace(
                status, attempts=(), submitted_at=status.eligible_at or status.submitted_at
            )
            for job_id, status in super().jobs(job_ids).items()
        }


def _world(tmp_path: Path, cluster_type: type[SimulatedCluster] = SimulatedCluster):
    clock = ManualClock(T0)
    cluster = cluster_type([NodeSpec("n1", 1), NodeSpec("n2", 1)], [TenantSpec("research")], clock)
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    runner = ProbeRunner(
        cluster,
        store,
        clock,
        ControllerMetrics(CollectorRegistry()),
        {"research": Tenant("research")},
        Budget(max_gpus=2, max_gpus_per_tenant=2),
    )
    return clock, cluster, store, runner


def _requeued_while_waiting(
    clock: ManualClock, cluster: SimulatedCluster, store: Store, runner: ProbeRunner
) -> list[ProbeRun]:
    """The probe waits 3 min for n1, runs there 2 min, n1 fails, it waits again until n2 frees
    at minute 20, runs its 10 min there and passes. Returns the run as seen at every follow."""
    cluster.submit_background("research", Workload(1, duration_seconds=180))  # n1 until 3 min
    cluster.submit_background("research", Workload(1, duration_seconds=1200))  # n2 until 20
    (launched,) = runner.launch(PROBE, ["research"], None)
    seen = [launched]
    for minute in range(1, 35):
        clock.advance(60)
        if minute == 5:
            cluster.fail_node("n1", "test")
        runner.follow()
        seen.append(store.run(launched.run_id) or launched)
    return seen


def test_a_node_failure_under_a_waiting_probe_is_an_attempt_in_the_platforms_words(
    tmp_path: Path,
):
    seen = _requeued_while_waiting(*_world(tmp_path))
    run = seen[-1]

    assert run.outcome is Outcome.PASSED
    assert run.attempts == (
        Attempt(
            eligible_at=T0,
            started_at=T0 + timedelta(minutes=3),
            ended_at=T0 + timedelta(minutes=5),
            nodes=("n1",),
            state="NODE_FAIL",
            reason="NodeDown",
        ),
    )
    assert run.node_names == ("n2",)
    assert run.submitted_at == T0  # the first submission, not the requeue
    assert run.started_at == T0 + timedelta(minutes=20)
    assert run.eligible_at == T0 + timedelta(minutes=5)
    # 3 min before the first start, 15 min from the requeue to the second
    assert run.queue_wait_seconds == 18 * 60
    for look in seen:
        assert look.queue_wait_seconds is None or look.queue_wait_seconds >= 0
        assert look.submitted_at == T0


def test_a_requeue_the_platform_only_counts_is_recorded_as_the_runner_saw_it(tmp_path: Path):
    seen = _requeued_while_waiting(*_world(tmp_path, _CountOnly))
    run = seen[-1]

    assert run.outcome is Outcome.PASSED
    (attempt,) = run.attempts
    assert attempt.nodes == ("n1",)
    assert attempt.started_at == T0 + timedelta(minutes=3)
    assert attempt.state == "REQUEUED"
    assert run.submitted_at == T0
    assert run.queue_wait_seconds == 18 * 60
    for look in seen:
        assert look.queue_wait_seconds is None or look.queue_wait_seconds >= 0
