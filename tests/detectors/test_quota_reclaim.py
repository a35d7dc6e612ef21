"""quota_not_reclaimed, the pure rule: a within-quota probe held by a quota reason longer than
the bound once the over-quota run ended and the tenant's own usage left room; the tenant's own
running work filling the quota, or a wait for GPUs, is no finding."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from observer.detectors.quota_reclaim import Reclaim, evaluate, has_room, own_usage_gpus
from observer.domain import (
    Expectation,
    JobPhase,
    JobStatus,
    ProbeRun,
    RunState,
    SchedulerSnapshot,
)

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
QUOTAS = {"batch": 4}


def _probe(reason: str | None = "AssocGrpGRES") -> ProbeRun:
    return ProbeRun(
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
        submitted_at=T0,
        reason=reason,
        message="held by a limit of the job's account",
        pending_reasons={reason or "Unknown": 300.0},
        reclaims_run_id="over-1",
    )


def _job(gpus: int, *, ending: bool = False, tenant: str = "batch") -> JobStatus:
    return JobStatus(
        job_id=f"{tenant}-{gpus}-{ending}",
        run_id=None,
        tenant=tenant,
        queue=None,
        phase=JobPhase.RUNNING,
        gpus=gpus,
        ending_since=T0 if ending else None,
    )


def _snapshot(*jobs: JobStatus) -> SchedulerSnapshot:
    return SchedulerSnapshot(T0 + timedelta(seconds=400), (), (), jobs)


def _evaluate(run: ProbeRun, room_since: datetime | None, snapshot: SchedulerSnapshot):
    reclaim = Reclaim(run, "over-1", T0, room_since)
    return evaluate(
        [reclaim], snapshot, T0 + timedelta(seconds=400), reclaim_seconds=300, quotas=QUOTAS
    )


def test_own_usage_counts_running_jobs_the_platform_is_not_ending():
    snapshot = _snapshot(_job(2), _job(2, ending=True), _job(4, tenant="prod"))
    assert own_usage_gpus(snapshot, "batch") == 2
    assert has_room(_probe(), snapshot, QUOTAS)  # 2 + 1 of 4: the ending job is no usage
    assert not has_room(_probe(), _snapshot(_job(4)), QUOTAS)
    assert has_room(replace(_probe(), tenant="prod"), _snapshot(_job(8, tenant="prod")), QUOTAS)


def test_a_probe_held_by_the_quota_past_the_bound_since_there_was_room_is_a_finding():
    snapshot = _snapshot(_job(3, ending=True))
    [symptom] = _evaluate(_probe(), T0 + timedelta(seconds=60), snapshot)

    assert symptom.subject == {"tenant": "batch", "run_id": "reclaim-1"}
    assert symptom.since == T0 + timedelta(seconds=60)
    evidence = symptom.evidence
    assert evidence["waited_seconds"] == 340.0
    assert (evidence["tenant_usage_gpus"], evidence["tenant_ending_gpus"]) == (0, 3)
    assert (evidence["over_quota_run_id"], evidence["pending_reason"]) == (
        "over-1",
        "AssocGrpGRES",
    )


def test_no_room_yet_within_the_bound_or_a_wait_for_gpus_is_no_finding():
    snapshot = _snapshot()
    assert _evaluate(_probe(), None, snapshot) == []  # its own work filled the quota
    assert _evaluate(_probe(), T0 + timedelta(seconds=200), snapshot) == []  # 200 s of 300
    assert _evaluate(_probe("Resources"), T0, snapshot) == []
    started = replace(_probe(), state=RunState.RUNNING, started_at=T0 + timedelta(seconds=390))
    assert _evaluate(started, T0, snapshot) == []
