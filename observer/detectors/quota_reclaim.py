"""The release half of a quota's lifecycle: once an over-quota probe was refused, or held and
cancelled, and the tenant's own usage leaves room for a probe within its quota, that probe
must start within the bound. One the platform still holds by a quota reason past it is
`quota_not_reclaimed`: the quota did not free (a job ended but still counted against it, a
GPU-minutes budget used up, a queue's reservation never given back).

The tenant's own usage is the GPUs its jobs run with in the scheduler's snapshot, less those
the platform is ending (a job stuck COMPLETING, a pod stuck Terminating: ended by their owner,
still counted by the quota). A tenant whose running work fills its quota keeps it full by
itself, which is no finding; nor is a wait for GPUs (Resources, Priority), which unfairness
and unexplained waits judge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from observer.domain import JobPhase, ProbeRun, RunState, SchedulerSnapshot, Severity, Symptom
from observer.probes.outcome import is_quota_hold

DETECTOR = "quota_not_reclaimed"


@dataclass(frozen=True, slots=True)
class Reclaim:
    """A within-quota probe run, when the over-quota run it follows ended, and since when
    the tenant's own usage has left room for it (None: not yet)."""

    run: ProbeRun
    over_quota_run_id: str
    over_quota_ended_at: datetime
    room_since: datetime | None


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
    """A symptom for each reclaim run still held by a quota (its reason or, for a Kubernetes
    ResourceQuota, its message says so) more than `reclaim_seconds` after both its over-quota
    run ended and its tenant's own usage left room for it."""
    symptoms = []
    for reclaim in reclaims:
        run, since = reclaim.run, reclaim.room_since
        if (
            since is None
            or run.state is not RunState.PENDING
            or not is_quota_hold(run.reason, run.message)
        ):
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
                "job ended and the tenant's own usage left room",
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
