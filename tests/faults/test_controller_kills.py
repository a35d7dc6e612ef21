"""`kill -9` of the controller at ten random points of a plan on the real Slurm, restarted
each time: every probe job Slurm accounts for is one run, ended, and none is left running."""

from __future__ import annotations

import random
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from observer.domain import RunState
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmCluster, slurm_harness
from tests.faults.daemon import accounted_jobs, controller, slurm_config, stop

# Real time on the real components, and a shared Slurm another test may hold: not 120 s.
pytestmark = pytest.mark.timeout(600)

KILLS = 10


def test_ten_kills_leave_every_probe_job_accounted_for_by_exactly_one_run(
    slurm_cluster: SlurmCluster, tmp_path: Path
):
    url = f"sqlite:///{tmp_path / 'observer.db'}"
    log = tmp_path / "controller.log"
    # A fixed seed: the points differ from one another, and a failure can be replayed.
    pauses = random.Random(20261201).sample([x / 4 for x in range(4, 32)], KILLS)
    with slurm_harness(slurm_cluster) as slurm:
        since = datetime.now(UTC) - timedelta(seconds=1)
        config = slurm_config(tmp_path, slurm, url)
        for pause in pauses:
            with controller(config, log) as ctl:
                time.sleep(pause)
                ctl.proc.kill()
        with controller(config, log) as ctl:
            # The last run adopts or settles what the killed ones left, then stops cleanly.
            time.sleep(8)
            stop(ctl)
        with Store(url) as store:
            runs = {run.run_id: run for run in store.runs()}
            starts = store.controller_runs()
        jobs = accounted_jobs(slurm, since, {r.job_id for r in runs.values() if r.job_id})
        still_queued = slurm.cli("squeue", "-h", "-o", "%i %j").split()

    assert len(starts) == KILLS + 1
    assert jobs, "no probe reached Slurm"
    per_run = Counter(run_id for run_id, _ in jobs.values())
    assert max(per_run.values()) == 1, "a run was submitted twice"
    assert set(per_run) <= set(runs), "Slurm holds probe jobs no run accounts for"
    for job_id, (run_id, _) in jobs.items():
        assert runs[run_id].job_id == job_id
    assert all(run.state is RunState.DONE for run in runs.values())
    # A run with no job is one whose submission a kill cut off before Slurm took it.
    unsubmitted = {r.run_id for r in runs.values() if r.job_id is None}
    assert set(runs) == set(per_run) | unsubmitted
    assert {runs[r].reason for r in unsubmitted} <= {"SubmissionNotConfirmed"}
    print(f"{len(jobs)} probe jobs, {len(unsubmitted)} submissions cut off")
    assert not any(name.startswith("observer-") for name in still_queued)
