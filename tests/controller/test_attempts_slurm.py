"""On the real Slurm: a probe whose node is set down under it is requeued by Slurm (NODE_FAIL,
then a BeginTime hold of about two minutes), and its run keeps both attempts, the first in
Slurm's words on that node; its waits are never negative, and the all-jobs listing counts
the failed attempt as well as the one that passed."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.clock import SystemClock
from observer.controller.runs import Budget, ProbeRunner, Tenant
from observer.domain import Expectation, JobPhase, Outcome, ProbeRun, RunState, Workload
from observer.metrics import ControllerMetrics
from observer.probes.catalog import ProbeSpec
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmHarness, slurm_harness
from tests.support.databases import migrated_sqlite

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(420)]

PROBE = ProbeSpec("short", "one GPU", Workload(1, duration_seconds=10), Expectation.SUCCEED)


def _follow_until(
    runner: ProbeRunner,
    store: Store,
    run_id: str,
    done: Callable[[ProbeRun], object],
    seconds: float,
) -> list[ProbeRun]:
    """Follow every second until `done(run)`; every look at the run, in order."""
    looks: list[ProbeRun] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        runner.follow()
        run = store.run(run_id)
        assert run is not None
        looks.append(run)
        if done(run):
            return looks
        time.sleep(1)
    raise AssertionError(f"the run did not get there in {seconds} s: {looks[-1]}")


def _resume(slurm: SlurmHarness, node: str) -> None:
    """Back in service; with ReturnToService=2 slurmd's next registration may have done it."""
    subprocess.run(
        ["scontrol", "update", f"nodename={node}", "state=resume"],
        env={"SLURM_CONF": str(slurm.slurm_conf), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=False,
        timeout=30,
    )


def test_a_probe_on_a_node_set_down_keeps_both_attempts_in_slurms_words(tmp_path: Path):
    with slurm_harness() as slurm, Store(migrated_sqlite(tmp_path / "observer.db")) as store:
        clock = SystemClock()
        runner = ProbeRunner(
            slurm.backend,
            store,
            clock,
            ControllerMetrics(CollectorRegistry()),
            {"research": Tenant("research", queue="gpu")},
            Budget(max_gpus=1, max_gpus_per_tenant=1),
        )
        (launched,) = runner.launch(PROBE, ["research"], None)
        looks = _follow_until(
            runner, store, launched.run_id, lambda r: r.state is RunState.RUNNING, 60
        )
        node = looks[-1].node_names[0]
        try:
            slurm.cli("scontrol", "update", f"nodename={node}", "state=down", "reason=test")
            looks += _follow_until(runner, store, launched.run_id, lambda r: r.outcome, 300)
        finally:
            _resume(slurm, node)
        run = looks[-1]
        listed = slurm.backend.finished_jobs(launched.submitted_at or clock.now(), clock.now())

    assert run.outcome is Outcome.PASSED
    first = run.attempts[0]
    assert (first.state, first.nodes, first.reason) == ("NODE_FAIL", (node,), "NodeDown")
    assert len(run.attempts) == 1
    assert run.started_at is not None and first.ended_at is not None
    assert run.started_at >= first.ended_at
    for look in looks:
        assert look.queue_wait_seconds is None or look.queue_wait_seconds >= 0
        assert look.submitted_at == looks[0].submitted_at  # the requeue does not move it
    mine = [s for s in listed.jobs if s.job_id == run.job_id]
    assert sorted(s.phase for s in mine) == [JobPhase.FAILED, JobPhase.SUCCEEDED]
    assert [s.reason for s in mine if s.phase is JobPhase.FAILED] == ["NodeDown"]
