"""Expected wait on each real Slurm release, through the controller: research's own job holds
every GPU with a one-minute time limit; prod's own job and a probe of prod's wait behind it,
and the backfill scheduler plans their start at the limit's end. The controller keeps the
first estimate of each, its own estimate for the probe, and their starts; the day's summary
gives the platform's estimate and its error per tenant and size, from the stored times."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmHarness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings, on_slurm

pytestmark = pytest.mark.timeout(300)


def test_the_platforms_expected_start_is_kept_and_reported_with_its_error(
    slurm: SlurmHarness, tmp_path: Path
):
    started = datetime.now(UTC).replace(microsecond=0)
    settings = controller_settings(
        **on_slurm(slurm.settings),
        tenants=[{"name": "research", "queue": "gpu"}, {"name": "prod", "queue": "gpu"}],
        plan=[],
        gpus_per_node=4,
        follow_interval_seconds=1,
        snapshot_interval_seconds=2,
        reports={"soak_started_at": started.isoformat()},
    )
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    soak = SimulatedSoak(settings, SystemClock(), store, slurm.backend)

    def step() -> None:
        time.sleep(0.5)

    def sbatch(account: str, *options: str) -> str:
        return slurm.cli(
            "sbatch", "--parsable", f"--account={account}", "--partition=gpu", "--time=1",
            "--output=/dev/null", *options,
        ).strip()  # fmt: skip

    blocker = sbatch("research", "-N", "3", "--gres=gpu:4", "--wrap=sleep 15")
    slurm.settle(
        lambda: any(j.job_id == blocker and j.started_at for j in slurm.backend.snapshot().jobs),
        30,
    )
    soak.run_for(4, step)  # the controller sees the blocker start
    # runs for longer than between two snapshots: one that starts and ends unseen is not counted
    waiting = sbatch("prod", "--gres=gpu:1", "--wrap=sleep 10")
    [probe] = soak.controller.runner.launch(soak.controller.catalog["short"], ["prod"], None)
    soak.run_for(40, step)  # the blocker ends after 15 s, the two start, the probe ends
    now = datetime.now(UTC)
    estimates = {e.job_id: e for e in store.job_estimates(started, now)}
    run = store.run(probe.run_id)
    report = build_daily(load_daily(store, settings, now.date(), now, partial=True))
    en, zh = render_daily(report, "en"), render_daily(report, "zh-CN")
    store.close()

    assert run is not None and run.job_id is not None
    assert set(estimates) == {waiting, run.job_id}
    for job in estimates.values():
        assert job.first_expected_start_at is not None and job.started_at is not None
        assert job.tenant == "prod" and job.gpus == 1
    # the observer's own: 12 GPUs started in the last hour, the probe's GPU pending ahead of it
    assert run.expected_wait_seconds is not None and run.expected_wait_seconds >= 0

    daily = json.loads(en.json)["expected_wait"]
    assert daily["platform_estimate"] is True
    [platform] = [r for r in daily["rows"] if r["source"] == "platform"]
    errors = sorted(
        (j.started_at - j.first_expected_start_at).total_seconds()
        for j in estimates.values()
        if j.started_at and j.first_expected_start_at
    )
    assert (platform["tenant"], platform["gpus"], platform["jobs"]) == ("prod", 1, 2)
    assert (platform["error_p50_seconds"], platform["error_p90_seconds"]) == (errors[0], errors[1])
    assert platform["error_p50_seconds"] < 0  # started early: the blocker ended before its limit
    assert platform["without_estimate_share"] == 0.0
    assert "shows no expected wait" not in en.markdown
    assert "## 预计等待时间" in zh.markdown
