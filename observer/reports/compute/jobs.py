"""Every tenant's jobs that ended in one period, the observer's probes among them, as the
platform listed them: per tenant, the failures grouped by cause and the platform's reason,
and the queue waits. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from observer.domain import JobPhase
from observer.records import JobOrigin, JobSlot
from observer.reports.compute.causes import Cause
from observer.reports.compute.data import Period
from observer.reports.compute.queues import WaitStats, counted_wait_stats


@dataclass(frozen=True, slots=True)
class TenantJobs:
    total: int
    failed: int


@dataclass(frozen=True, slots=True)
class JobFailureGroup:
    """Failed jobs of every tenant sharing a cause (causes.Cause; None: tallied before causes
    were kept) and the platform's reason (None: it gave none)."""

    cause: str | None
    reason: str | None
    count: int
    by_tenant: Mapping[str, int]
    by_observer: int = 0  # of `count`, the observer's own probes (expected failures too)


@dataclass(frozen=True, slots=True)
class AllJobFigures:
    """Every tenant's jobs that ended in the period, the observer's probes among them, as
    the platform listed them. `complete` is False when the listings left part of the period
    uncovered (`listed_seconds` short of it) or the platform said they may have missed jobs
    (`notes`): the counts are then lower bounds. `failed` is the platform's failed phase;
    `cancelled` apart."""

    total: int
    failed: int
    cancelled: int
    by_tenant: Mapping[str, TenantJobs]
    failure_groups: tuple[JobFailureGroup, ...]
    complete: bool
    listed_seconds: float
    notes: tuple[str, ...]
    # Of `total` and `failed`, the observer's own probes: their outcomes are judged under the
    # probe runs, against what each expects (a fail-exit probe is meant to fail).
    by_observer: TenantJobs = TenantJobs(0, 0)
    # The queue waits of every tenant's jobs that started (the observer's among them), from
    # the platform's submission and start times; slots listed before waits were kept add none.
    waits_by_tenant: Mapping[str, WaitStats] = field(default_factory=dict)


def all_job_figures(slots: Sequence[JobSlot], period: Period) -> AllJobFigures | None:
    listed = sum(period.clip(s.start, s.listed_until) for s in slots)
    if listed == 0:
        return None
    tallies = [t for s in slots for t in s.tallies]
    failed = [t for t in tallies if t.phase is JobPhase.FAILED]
    tenants = sorted({t.tenant for t in tallies})
    groups: dict[tuple[str | None, str | None], dict[str, int]] = {}
    ours: Counter[tuple[str | None, str | None]] = Counter()
    for t in failed:
        by_tenant = groups.setdefault((t.cause, t.reason), {})
        by_tenant[t.tenant] = by_tenant.get(t.tenant, 0) + t.jobs
        if t.origin is JobOrigin.OBSERVER:
            ours[(t.cause, t.reason)] += t.jobs
    order = [*(c.value for c in Cause), None]  # tallied before causes were kept: last
    return AllJobFigures(
        total=sum(t.jobs for t in tallies),
        failed=sum(t.jobs for t in failed),
        cancelled=sum(t.jobs for t in tallies if t.phase is JobPhase.CANCELLED),
        by_tenant={
            tenant: TenantJobs(
                sum(t.jobs for t in tallies if t.tenant == tenant),
                sum(t.jobs for t in failed if t.tenant == tenant),
            )
            for tenant in tenants
        },
        failure_groups=tuple(
            JobFailureGroup(
                cause,
                reason,
                sum(counts.values()),
                dict(sorted(counts.items())),
                ours[(cause, reason)],
            )
            for (cause, reason), counts in sorted(
                groups.items(),
                key=lambda kv: (order.index(kv[0][0]), -sum(kv[1].values()), kv[0][1] or ""),
            )
        ),
        complete=listed >= period.seconds and all(s.complete for s in slots),
        listed_seconds=listed,
        notes=tuple(sorted({s.note for s in slots if s.note})),
        by_observer=TenantJobs(
            sum(t.jobs for t in tallies if t.origin is JobOrigin.OBSERVER),
            sum(t.jobs for t in failed if t.origin is JobOrigin.OBSERVER),
        ),
        waits_by_tenant=_tenant_waits(slots),
    )


def _tenant_waits(slots: Sequence[JobSlot]) -> dict[str, WaitStats]:
    counts: dict[str, Counter[int]] = {}
    for slot in slots:
        for wait in slot.waits:
            counts.setdefault(wait.tenant, Counter())[wait.wait_seconds] += wait.jobs
    return {tenant: counted_wait_stats(counts[tenant]) for tenant in sorted(counts)}
