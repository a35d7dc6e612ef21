"""The release half of a quota's lifecycle: once an over-quota probe was refused, or held and
cancelled, and the tenant's own usage leaves room for a probe within its quota, that probe
must start within the bound. One the platform still holds by a quota reason past it is
`quota_not_reclaimed`: the quota did not free (a job ended but still counted against it, a
GPU-minutes budget used up, a queue's reservation never given back).

The hold is judged over every scheduler snapshot since the over-quota run ended (`observed`
folds each one in): the bound runs from the first snapshot that left room while the probe was
held by a quota reason, and starts over at any snapshot that left none or any look at the
probe held for another reason. A tenant whose own jobs fill and free its quota near the limit
leaves room now and then, never long enough to judge the quota by.

The tenant's own usage is the GPUs its jobs run with in the scheduler's snapshot, less those
the platform is ending (a job stuck COMPLETING, a pod stuck Terminating: ended by their owner,
still counted by the quota). A tenant whose running work fills its quota keeps it full by
itself, which is no finding; nor is a wait for GPUs (Resources, Priority), which unfairness
and unexplained waits judge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from observer.domain import JobPhase, ProbeRun, RunState, SchedulerSnapshot, Severity, Symptom
from observer.probes.outcome import is_quota_hold

DETECTOR = "quota_not_reclaimed"

# The usage series a hold keeps, and its finding shows: the tenant's own GPUs where they
# changed, the latest this many changes.
USAGE_CHANGES = 12


@dataclass(frozen=True, slots=True)
class Reclaim:
    """A within-quota probe run, as last followed, and its hold since the over-quota run it
    follows ended: since when every snapshot has left room for it while it was held by a quota
    reason (None: the latest did not), the tenant's own GPUs (time, GPUs) at the first
    snapshot after that end and at each where they changed (the latest USAGE_CHANGES), and the
    latest snapshot folded in."""

    run: ProbeRun
    over_quota_run_id: str
    over_quota_ended_at: datetime
    room_since: datetime | None = None
    usage: tuple[tuple[datetime, int], ...] = ()
    seen_at: datetime | None = None


def observed(
    reclaim: Reclaim, run: ProbeRun, scheduler: SchedulerSnapshot, quotas: Mapping[str, int]
) -> Reclaim:
    """The hold with the run as followed now and the scheduler's latest snapshot. A snapshot
    taken after the over-quota run ended and not folded in yet joins the usage series and
    judges the room: the clock starts at the first that leaves room while the run is held by
    a quota reason and starts over at one that leaves none. A run not held by a quota reason
    stops the clock whatever the snapshot; the next snapshot with room starts it again."""
    held = run.state is RunState.PENDING and is_quota_hold(run.reason, run.message)
    taken = scheduler.at
    if taken < reclaim.over_quota_ended_at or (
        reclaim.seen_at is not None and taken <= reclaim.seen_at
    ):
        return replace(reclaim, run=run, room_since=reclaim.room_since if held else None)
    used = own_usage_gpus(scheduler, run.tenant)
    usage = reclaim.usage
    if not usage or usage[-1][1] != used:
        usage = (*usage, (taken, used))[-USAGE_CHANGES:]
    room = held and has_room(run, scheduler, quotas)
    return replace(
        reclaim,
        run=run,
        room_since=(reclaim.room_since or taken) if room else None,
        usage=usage,
        seen_at=taken,
    )


def reclaimed_seconds(run: ProbeRun, since: datetime) -> float | None:
    """From the over-quota run's end to the within-quota run's start; None if it never
    started."""
    if run.started_at is None:
        return None
    return max((run.started_at - since).total_seconds(), 0.0)


def own_usage_gpus(scheduler: SchedulerSnapshot, tenant: str) -> int:
    """The GPUs the tenant's jobs run with, those the platform is ending apart."""
    return sum(
        job.gpus
        for job in scheduler.jobs
        if job.tenant == tenant and job.phase is JobPhase.RUNNING and job.ending_since is None
    )


def has_room(run: ProbeRun, scheduler: SchedulerSnapshot, quotas: Mapping[str, int]) -> bool:
    """Whether the tenant's own usage leaves its quota room for the run (an unknown quota:
    taken to)."""
    quota = quotas.get(run.tenant)
    return quota is None or own_usage_gpus(scheduler, run.tenant) + run.gpus <= quota


def evaluate(
    reclaims: Sequence[Reclaim],
    scheduler: SchedulerSnapshot,
    now: datetime,
    *,
    reclaim_seconds: float,
    quotas: Mapping[str, int],
) -> list[Symptom]:
    """A symptom for each reclaim run whose hold (`observed`) has had room for more than
    `reclaim_seconds`: held by a quota (its reason or, for a Kubernetes ResourceQuota, its
    message says so) all that time, its tenant's own usage leaving room at every snapshot."""
    symptoms = []
    for reclaim in reclaims:
        run, since = reclaim.run, reclaim.room_since
        if since is None:
            continue
        waited = (now - since).total_seconds()
        if waited <= reclaim_seconds:
            continue
        symptoms.append(
            Symptom(
                detector=DETECTOR,
                subject={"tenant": run.tenant, "run_id": run.run_id},
                severity=Severity.CRITICAL,
                summary=f"tenant {run.tenant}'s quota did not free: a {run.gpus}-GPU probe "
                f"within it is still held ({run.reason}) {waited:.0f} s after the over-quota "
                "job ended and the tenant's own usage left room at every snapshot since",
                rule="once an over-quota job is refused or cancelled and the tenant's own "
                f"usage leaves room, a probe within its quota starts within {reclaim_seconds:g} s",
                evidence={
                    "tenant": run.tenant,
                    "over_quota_run_id": reclaim.over_quota_run_id,
                    "over_quota_ended_at": reclaim.over_quota_ended_at.isoformat(),
                    "run_id": run.run_id,
                    "job_id": run.job_id,
                    "since": since.isoformat(),
                    "waited_seconds": round(waited, 1),
                    "reclaim_seconds": reclaim_seconds,
                    "pending_reason": run.reason,
                    "pending_message": run.message,
                    "pending_reasons_seconds": {
                        k: round(v, 1) for k, v in sorted(run.pending_reasons.items())
                    },
                    "quota_gpus": quotas.get(run.tenant),
                    "tenant_usage_gpus": own_usage_gpus(scheduler, run.tenant),
                    "tenant_usage_gpus_series": [
                        [at.isoformat(), gpus] for at, gpus in reclaim.usage
                    ],
                    "tenant_ending_gpus": sum(
                        j.gpus
                        for j in scheduler.jobs
                        if j.tenant == run.tenant and j.ending_since is not None
                    ),
                    "scheduler_snapshot_at": scheduler.at.isoformat(),
                },
                since=since,
            )
        )
    return symptoms
