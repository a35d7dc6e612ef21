"""The quota's lifecycle on each real Slurm release, with the real sacctmgr: research's GrpTRES is
set and then lowered while the controller runs, and research's own job fills the lowered quota.
The over-quota probe is held (AssocGrpGRES) and cancelled; the within-quota probe after it
waits for research's own job, which is no finding, and starts once that job is cancelled.
Then research's GPU-minutes budget (GrpTRESMins) is used up: no job's end gives it back, the
next within-quota probe is held by it with research running nothing, and quota_not_reclaimed
opens with Slurm's words. The day's summary records the changes with root and their time,
before and after, and both attempts with how the quota freed, or did not."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.detectors.quota_reclaim import DETECTOR
from observer.domain import Outcome
from observer.probes.catalog import QUOTA_PROBE
from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmCluster, SlurmHarness, slurm_harness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings, on_slurm

RECLAIM_SECONDS = 6


@pytest.fixture
def slurm(slurm_cluster: SlurmCluster) -> Iterator[SlurmHarness]:
    with slurm_harness(slurm_cluster) as harness:
        try:
            yield harness
        finally:
            harness.cli(
                "sacctmgr", "-i", "modify", "account", "research", "set",
                "GrpTRES=gres/gpu=-1", "GrpTRESMins=gres/gpu=-1",
            )  # fmt: skip


def _settings(slurm: SlurmHarness, started: datetime) -> Settings:
    return controller_settings(
        **on_slurm(slurm.settings),
        tenants=[
            {"name": "research", "weight": 0.5, "queue": "gpu", "quota_gpus": 2},
            {"name": "prod", "weight": 0.5, "queue": "gpu"},
        ],
        plan=[
            {
                "window": "always",
                "probe": "quota",
                "every_seconds": 8,
                "tenants": ["research"],
            }
        ],
        probes={"quota-reclaim": {"duration_seconds": 1}},
        gpus_per_node=4,
        max_probe_gpus=12,
        max_probe_gpus_per_tenant=3,  # one over-quota probe, or a reclaim, at a time
        quota_reclaim_seconds=RECLAIM_SECONDS,
        follow_interval_seconds=1,
        snapshot_interval_seconds=2,
        job_listing_interval_seconds=4,
        reports={"soak_started_at": started.isoformat()},
    )


# A minute of real probes on the real Slurm alone; twice that under a loaded CI worker.
@pytest.mark.timeout(300)
def test_a_quota_lowered_with_sacctmgr_is_in_the_daily_summary_and_one_never_freed_is_found(
    slurm: SlurmHarness, tmp_path: Path
):
    started = datetime.now(UTC).replace(microsecond=0)
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    settings = _settings(slurm, started)
    soak = SimulatedSoak(settings, SystemClock(), store, slurm.backend)

    def step() -> None:
        time.sleep(0.5)

    soak.run_for(2, step)
    time.sleep(1)  # slurmdbd stamps to the second: each change after the last
    slurm.cli("sacctmgr", "-i", "modify", "account", "research", "set", "GrpTRES=gres/gpu=3")
    time.sleep(1)
    slurm.cli("sacctmgr", "-i", "modify", "account", "research", "set", "GrpTRES=gres/gpu=2")
    lowered = datetime.now(UTC)
    # research's own work fills the lowered quota for longer than the test runs
    own = slurm.cli(
        "sbatch", "--parsable", "--account=research", "--gres=gpu:2", "--output=/dev/null",
        "--wrap=sleep 600",
    ).strip()  # fmt: skip
    slurm.settle(
        lambda: any(j.job_id == own and j.started_at for j in slurm.backend.snapshot().jobs), 20
    )
    soak.run_for(8 + 2 * RECLAIM_SECONDS + 6, step)

    first_over, *_ = [r for r in store.runs() if r.probe == QUOTA_PROBE]
    [first] = [r for r in store.runs() if r.reclaims_run_id == first_over.run_id]
    assert (first_over.outcome, first_over.reason) == (Outcome.PASSED, "AssocGrpGRES")
    assert first.started_at is None and first.reason == "AssocGrpGRES"
    assert store.findings(detector=DETECTOR) == []  # research's own job fills its quota

    slurm.cli("scancel", own)
    deadline = time.monotonic() + 30
    while (store.run(first.run_id) or first).outcome is None and time.monotonic() < deadline:
        soak.run_for(1, step)
    first = store.run(first.run_id) or first
    assert first.outcome is Outcome.PASSED and first.started_at is not None

    slurm.cli("sacctmgr", "-i", "modify", "account", "research", "set", "GrpTRESMins=gres/gpu=0")
    budget_spent = datetime.now(UTC)
    soak.run_for(8 + RECLAIM_SECONDS + 10, step)

    [finding] = store.findings(detector=DETECTOR)
    held = store.run(finding.subject["run_id"])
    assert held is not None and held.reclaims_run_id is not None
    over = store.run(held.reclaims_run_id)
    assert over is not None and over.submitted_at is not None
    assert over.submitted_at >= budget_spent and over.outcome is Outcome.PASSED
    assert held.started_at is None and held.reason == "AssocGrpGRESMinutes"
    evidence = finding.evidence
    assert finding.subject == {"tenant": "research", "run_id": held.run_id}
    assert evidence["over_quota_run_id"] == over.run_id
    assert evidence["pending_reason"] == "AssocGrpGRESMinutes"
    assert (evidence["quota_gpus"], evidence["tenant_usage_gpus"]) == (2, 0)
    assert evidence["waited_seconds"] > RECLAIM_SECONDS
    since = datetime.fromisoformat(evidence["since"])
    assert over.finished_at is not None and since >= over.finished_at
    assert (finding.opened_at - since).total_seconds() > RECLAIM_SECONDS

    now = datetime.now(UTC)
    report = build_daily(load_daily(store, settings, now.date(), now, partial=True))
    en, zh = render_daily(report, "en"), render_daily(report, "zh-CN")

    tenants = json.loads(en.json)["tenants"]["tenants"]
    research = next(t for t in tenants if t["tenant"] == "research")
    changes = [(c["by"], c["before"], c["after"]) for c in research["changes"]]
    assert changes == [
        ("root", None, "GrpTRES=gres/gpu=3"),
        ("root", "GrpTRES=gres/gpu=3", "GrpTRES=gres/gpu=2"),
        ("root", None, "GrpTRESMins=gres/gpu=0"),
    ]
    at = datetime.fromisoformat(research["changes"][1]["at"])
    assert started <= at <= lowered
    row = next(
        line
        for line in en.markdown.splitlines()
        if "| GrpTRES=gres/gpu=3 | GrpTRES=gres/gpu=2" in line
    )
    assert row.startswith(f"| {at:%Y-%m-%d %H:%M} | tenant=research | root |")
    zh_row = next(line for line in zh.markdown.splitlines() if "GrpTRES=gres/gpu=2 |" in line)
    assert zh_row.startswith(f"| {at.year}年{at.month}月{at.day}日 {at:%H:%M} | tenant=research")
    attempts = {a["run_id"]: a for a in research["attempts"]}
    assert attempts[first_over.run_id]["reclaimed_seconds"] > 2 * RECLAIM_SECONDS
    assert attempts[over.run_id]["reclaimed_seconds"] is None
    assert attempts[over.run_id]["reclaim_reason"] == "AssocGrpGRESMinutes"
    [summary] = [line for line in en.markdown.splitlines() if line.startswith("| research | 0.50")]
    assert "| not freed |" in summary
    assert "still waiting (AssocGrpGRESMinutes)" in en.markdown
    assert "仍在排队等待（AssocGrpGRESMinutes）" in zh.markdown
    store.close()
