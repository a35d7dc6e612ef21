"""quota_not_reclaimed, the pure rule: a within-quota probe held by a quota reason longer than
the bound once the over-quota run ended and the tenant's own usage left room, at every
scheduler snapshot since; the tenant's own running work filling the quota, even now and then,
or a wait for GPUs, is no finding."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from observer.detectors.quota_reclaim import (
    USAGE_CHANGES,
    Reclaim,
    evaluate,
    has_room,
    observed,
    own_usage_gpus,
)
from observer.domain import (
    Expectation,
    JobPhase,
    JobStatus,
    ProbeRun,
    RunState,
    SchedulerSnapshot,
    Symptom,
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


def test_no_room_yet_or_within_the_bound_is_no_finding():
    snapshot = _snapshot()
    assert _evaluate(_probe(), None, snapshot) == []  # its own work filled the quota
    assert _evaluate(_probe(), T0 + timedelta(seconds=200), snapshot) == []  # 200 s of 300


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _hold(usage_gpus: list[int], *, every_seconds: float = 30, run: ProbeRun | None = None):
    """The hold after the tenant's own jobs ran `usage_gpus` at one snapshot each, the first
    when the over-quota run ended (T0), then one every `every_seconds`; the probe followed
    held as `run` throughout."""
    held = run or _probe()
    hold = Reclaim(held, "over-1", T0)
    for i, gpus in enumerate(usage_gpus):
        jobs = (_job(gpus),) if gpus else ()
        hold = observed(hold, held, SchedulerSnapshot(_at(i * every_seconds), (), (), jobs), QUOTAS)
    return hold


def _judged(hold: Reclaim, now: datetime) -> list[Symptom]:
    last = SchedulerSnapshot(hold.seen_at or T0, (), (), ())
    return evaluate([hold], last, now, reclaim_seconds=300, quotas=QUOTAS)


def test_own_jobs_filling_and_freeing_the_quota_near_its_limit_are_no_finding():
    # quota 4, the probe 1 GPU: room at 3 GPUs used, none at 4; room only at the last snapshot
    usage = [3, 4, 3, 3, 4, 4, 3, 4, 3, 4, 4, 4, 3]
    hold = _hold(usage)
    last = _at(30 * (len(usage) - 1))

    assert hold.room_since == last
    assert _judged(hold, last + timedelta(seconds=10)) == []


def test_room_at_every_snapshot_past_the_bound_is_a_finding_with_the_usage_series():
    # own work held the quota full until 60 s after the end, then left room for good
    usage = [4, 4, 3, 2, 2, 0, 0, 1, 1, 0, 0, 0, 0, 0]
    hold = _hold(usage)
    now = _at(30 * (len(usage) - 1) + 10)

    [symptom] = _judged(hold, now)
    assert symptom.since == hold.room_since == _at(60)
    assert symptom.evidence["waited_seconds"] == (now - _at(60)).total_seconds()
    # the series shows the hold where the usage changed: full, then room throughout
    assert symptom.evidence["tenant_usage_gpus_series"] == [
        [_at(0).isoformat(), 4],
        [_at(60).isoformat(), 3],
        [_at(90).isoformat(), 2],
        [_at(150).isoformat(), 0],
        [_at(210).isoformat(), 1],
        [_at(270).isoformat(), 0],
    ]


def test_a_snapshot_before_the_over_quota_end_or_seen_again_is_not_judged_twice():
    hold = _hold([0, 0])
    before = SchedulerSnapshot(T0 - timedelta(seconds=30), (), (), (_job(4),))
    again = SchedulerSnapshot(_at(30), (), (), (_job(4),))  # the same snapshot, read again

    for snapshot in (before, again):
        assert observed(hold, _probe(), snapshot, QUOTAS).room_since == T0


def test_a_look_at_the_probe_held_for_another_reason_starts_the_clock_over():
    hold = _hold([0] * 12)
    assert hold.room_since == T0
    # held for GPUs at one look (same snapshot), then by the quota again
    latest = SchedulerSnapshot(_at(330), (), (), ())
    waiting = observed(hold, _probe("Resources"), latest, QUOTAS)
    assert waiting.room_since is None
    assert observed(waiting, _probe(), latest, QUOTAS).room_since is None
    again = observed(waiting, _probe(), SchedulerSnapshot(_at(360), (), (), ()), QUOTAS)
    assert again.room_since == _at(360)
    assert _judged(again, _at(370)) == []


def test_a_started_probe_has_no_hold():
    started = replace(_probe(), state=RunState.RUNNING, started_at=_at(390), reason=None)
    hold = observed(_hold([0] * 14), started, SchedulerSnapshot(_at(390), (), (), ()), QUOTAS)

    assert hold.room_since is None
    assert _judged(hold, _at(400)) == []


def test_the_usage_series_keeps_the_latest_changes_only():
    usage = [i % 2 for i in range(3 * USAGE_CHANGES)]
    hold = _hold(usage)

    assert len(hold.usage) == USAGE_CHANGES
    assert hold.usage[-1] == (_at(30 * (len(usage) - 1)), usage[-1])
    assert hold.room_since == T0  # every snapshot left room
