"""On the real Slurm a probe run keeps what the per-task record names: the user Slurm ran it
as (its user name) and the partition it went to, the default one when the tenant names
none."""

from __future__ import annotations

import os
import pwd
import time
from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.slurm_harness import slurm_harness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

pytestmark = pytest.mark.slurm


def test_a_probe_run_keeps_slurms_user_name_and_the_partition_it_went_to(tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    settings = controller_settings(
        backend="slurm",
        tenants=[{"name": "research"}],  # no queue: Slurm's default partition
        plan=[{"window": "always", "probe": "short", "every_seconds": 2}],
        probes={"short": {"duration_seconds": 2}},
        gpus_per_node=4,
        max_probe_gpus=1,
        follow_interval_seconds=1,
        snapshot_interval_seconds=5,
    )
    with slurm_harness() as slurm, Store(url) as store:
        soak = SimulatedSoak(settings, SystemClock(), store, slurm.backend)
        deadline = time.monotonic() + 60
        while not [r for r in store.runs() if r.started_at] and time.monotonic() < deadline:
            soak.run_for(2, lambda: time.sleep(0.5))
        started = [r for r in store.runs() if r.started_at]
        soak.controller.runner.cancel_all("test over")

    assert started
    assert {(r.user, r.queue) for r in started} == {(pwd.getpwuid(os.getuid()).pw_name, "gpu")}
