"""The quota reclaim watch, check by check: the detect loop hands it each look (the runs as
followed, the scheduler's latest snapshot) and it judges a within-quota probe's hold over
every snapshot since the over-quota run ended. Own jobs that fill and free the quota near its
limit, or a probe held for GPUs before its quota, are no finding; a quota that leaves room at
every snapshot past the bound is, its evidence the tenant's usage over the hold."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from observer.controller.watches.base import Look
from observer.controller.watches.reclaims import QuotaReclaims
from observer.detectors.quota_reclaim import DETECTOR
from observer.domain import (
    Expectation,
    Finding,
    JobPhase,
    JobStatus,
    Outcome,
    ProbeRun,
    RunState,
    SchedulerSnapshot,
)
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

ENDED = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)  # the over-quota run's end
RECLAIM_SECONDS = 300
SNAPSHOT_SECONDS = 30
CHECK_SECONDS = 5
QUOTAS = {"batch": 4}

OVER = ProbeRun(
    run_id="over-1",
    probe="quota",
    tenant="batch",
    queue=None,
    window="night",
    expectation=Expectation.BLOCKED,
    gpus=5,
    nodes=1,
    state=RunState.DONE,
    job_id="70",
    submitted_at=ENDED - timedelta(seconds=60),
    finished_at=ENDED,
    outcome=Outcome.PASSED,
    reason="AssocGrpGRES",
)
HELD = ProbeRun(
    run_id="reclaim-1",
    probe="quota-reclaim",
    tenant="batch",
    queue=None,
    window="night",
    expectation=Expectation.SUCCEED,
    gpus=1,
    nodes=1,
    state=RunState.PENDING,
    job_id="71",
    submitted_at=ENDED,
    reason="AssocGrpGRES",
    message="held by a limit of the job's account",
    reclaims_run_id=OVER.run_id,
)


def _watch(database: Path) -> QuotaReclaims:
    store = Store(migrated_sqlite(database))
    store.save_runs([OVER])
    return QuotaReclaims(store, QUOTAS, RECLAIM_SECONDS)


def _snapshot(at: datetime, own_gpus: int) -> SchedulerSnapshot:
    own = JobStatus("own", None, "batch", None, JobPhase.RUNNING, own_gpus)
    return SchedulerSnapshot(at, (), (), (own,) if own_gpus else ())


def _follow(
    watch: QuotaReclaims, own_gpus: list[int], reasons: list[str] | None = None
) -> list[Finding]:
    """Check the watch every CHECK_SECONDS while the scheduler is sampled every
    SNAPSHOT_SECONDS, the tenant's own jobs using `own_gpus[i]` at the i-th snapshot (the
    first at the over-quota end) and the probe held for `reasons[i]` meanwhile; what opened
    or closed."""
    changed: list[Finding] = []
    for i, gpus in enumerate(own_gpus):
        snapshot = _snapshot(ENDED + timedelta(seconds=i * SNAPSHOT_SECONDS), gpus)
        run = replace(HELD, reason=reasons[i]) if reasons else HELD
        for check in range(SNAPSHOT_SECONDS // CHECK_SECONDS):
            now = snapshot.at + timedelta(seconds=check * CHECK_SECONDS)
            look = Look(now, (run,), (), {}, snapshot, blind=False)
            changed += watch.check(look).changed
    return changed


def test_own_jobs_filling_the_quota_now_and_then_or_a_wait_for_gpus_are_no_finding(
    tmp_path: Path,
):
    # quota 4 and a 1-GPU probe: room at 3 GPUs used, none at 4; room only at the last
    usage = [3, 4, 3, 3, 4, 4, 3, 4, 3, 4, 4, 4, 3]
    assert _follow(_watch(tmp_path / "own.db"), usage) == []

    # room all along, but the probe waited for GPUs until its quota held it, at the last
    reasons = ["Resources"] * (len(usage) - 1) + ["AssocGrpGRES"]
    assert _follow(_watch(tmp_path / "gpus.db"), [0] * len(usage), reasons) == []


def test_room_at_every_snapshot_past_the_bound_opens_it_with_the_usage_series(tmp_path: Path):
    # own work held the quota full for a minute after the end, then left room for good
    usage = [4, 4, 3, 2, 2, 0, 0, 1, 1, 0, 0, 0, 0]
    [finding] = _follow(_watch(tmp_path / "observer.db"), usage)

    room_at = ENDED + timedelta(seconds=2 * SNAPSHOT_SECONDS)
    assert finding.detector == DETECTOR
    assert finding.evidence["since"] == room_at.isoformat()
    assert (finding.opened_at - room_at).total_seconds() > RECLAIM_SECONDS
    changes = [(i, gpus) for i, gpus in enumerate(usage) if i == 0 or usage[i - 1] != gpus]
    assert finding.evidence["tenant_usage_gpus_series"] == [
        [(ENDED + timedelta(seconds=i * SNAPSHOT_SECONDS)).isoformat(), gpus] for i, gpus in changes
    ]
