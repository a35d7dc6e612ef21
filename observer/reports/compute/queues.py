"""The queue figures of one period: the probe runs' waits (submission to start), overall and
per tenant, window and probe; every tenant's queue as the scheduler's snapshots saw it; the
tenants' own jobs' waits as the platform listed them; and why both waited, the time pending
per tenant and reason in the scheduler's words. Pure. A figure the observer could not see is
None, never 0."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from observer.domain import ProbeRun
from observer.records import JobOrigin, JobSlot, PendingTime, StoredQueueSample
from observer.reports.compute.data import nearest_rank


@dataclass(frozen=True, slots=True)
class WaitStats:
    """Queue waits (submission to start, the platform's timestamps) of the runs that started."""

    runs: int
    avg_seconds: float | None
    p50_seconds: float | None
    p95_seconds: float | None
    max_seconds: float | None


def counted_wait_stats(counts: Mapping[int, int]) -> WaitStats:
    """WaitStats of waits given as {whole seconds: jobs}, exactly as if listed one by one."""
    n = sum(counts.values())
    if not n:
        return WaitStats(0, None, None, None, None)
    ordered = sorted(counts.items())

    def ranked(q: float) -> float:
        rank, seen = nearest_rank(q, n), 0
        for seconds, jobs in ordered:
            seen += jobs
            if seen >= rank:
                return float(seconds)
        return float(ordered[-1][0])

    return WaitStats(
        runs=n,
        avg_seconds=sum(seconds * jobs for seconds, jobs in ordered) / n,
        p50_seconds=ranked(0.5),
        p95_seconds=ranked(0.95),
        max_seconds=float(ordered[-1][0]),
    )


def wait_stats(waits: Iterable[float]) -> WaitStats:
    values = sorted(waits)
    if not values:
        return WaitStats(0, None, None, None, None)
    n = len(values)
    return WaitStats(
        runs=n,
        avg_seconds=sum(values) / n,
        p50_seconds=values[nearest_rank(0.5, n) - 1],
        p95_seconds=values[nearest_rank(0.95, n) - 1],
        max_seconds=values[-1],
    )


@dataclass(frozen=True, slots=True)
class TenantQueue:
    """Every job of one tenant as the scheduler's stored snapshots saw its queue."""

    samples: int
    pending_jobs_avg: float
    pending_gpus_avg: float
    running_gpus_avg: float
    longest_wait_seconds_max: float


@dataclass(frozen=True, slots=True)
class QueueFigures:
    overall: WaitStats
    by_tenant: Mapping[str, WaitStats]
    by_window: Mapping[str, WaitStats]  # the window the run was launched in
    by_probe: Mapping[str, WaitStats]
    never_started: int  # ended without starting: refused, blocked, failed to start
    all_jobs_by_tenant: Mapping[str, TenantQueue]
    # The tenants' own jobs (not the observer's) that ended in the period having started:
    # their waits from the platform's submission and start times, as it listed them.
    tenant_jobs: WaitStats = WaitStats(0, None, None, None, None)
    # Time pending by tenant, then reason: of the tenants' own jobs, added up over the jobs
    # (two jobs pending an hour are two hours), and of the probe runs submitted in the period.
    wait_reason_seconds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    probe_wait_reason_seconds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


def queue_figures(
    runs: Sequence[ProbeRun],
    samples: Sequence[StoredQueueSample],
    job_slots: Sequence[JobSlot] = (),
    pending: Sequence[PendingTime] = (),
) -> QueueFigures:
    """`job_slots` and `pending`: the period's listed jobs and the tenants' jobs' time
    pending, per slot."""
    started = [(r, r.queue_wait_seconds) for r in runs if r.queue_wait_seconds is not None]

    def by(key: str) -> dict[str, WaitStats]:
        groups: dict[str, list[float]] = {}
        for run, wait in started:
            assert wait is not None
            groups.setdefault(getattr(run, key) or "-", []).append(wait)
        return {name: wait_stats(groups[name]) for name in sorted(groups)}

    return QueueFigures(
        overall=wait_stats(w for _, w in started if w is not None),
        by_tenant=by("tenant"),
        by_window=by("window"),
        by_probe=by("probe"),
        never_started=sum(1 for r in runs if r.outcome is not None and r.started_at is None),
        all_jobs_by_tenant=tenant_queues(samples),
        tenant_jobs=counted_wait_stats(_tenant_job_waits(job_slots)),
        wait_reason_seconds=_by_tenant_reason((p.tenant, p.reason, p.seconds) for p in pending),
        probe_wait_reason_seconds=_by_tenant_reason(
            (r.tenant, reason, seconds)
            for r in runs
            for reason, seconds in r.pending_reasons.items()
        ),
    )


def _tenant_job_waits(slots: Sequence[JobSlot]) -> dict[int, int]:
    """The tenants' own jobs' waits as {whole seconds: jobs}; waits kept before their origin
    was are left out, the observer's probes being among them."""
    counts: dict[int, int] = {}
    for slot in slots:
        for wait in slot.waits:
            if wait.origin is JobOrigin.TENANT:
                counts[wait.wait_seconds] = counts.get(wait.wait_seconds, 0) + wait.jobs
    return counts


def _by_tenant_reason(
    times: Iterable[tuple[str, str, float]],
) -> dict[str, dict[str, float]]:
    """Seconds added up per tenant and reason, the longest reason of each tenant first; a
    reason seen for no time at all is left out."""
    sums: dict[str, dict[str, float]] = {}
    for tenant, reason, seconds in times:
        if seconds > 0:
            mine = sums.setdefault(tenant, {})
            mine[reason] = mine.get(reason, 0.0) + seconds
    return {
        tenant: dict(sorted(sums[tenant].items(), key=lambda kv: (-kv[1], kv[0])))
        for tenant in sorted(sums)
    }


def tenant_queues(samples: Sequence[StoredQueueSample]) -> dict[str, TenantQueue]:
    # A tenant's queues (partitions) of one snapshot are added up first.
    per_snapshot: dict[str, dict[datetime, list[float]]] = {}
    for sample in samples:
        q = sample.state
        row = per_snapshot.setdefault(q.tenant, {}).setdefault(sample.at, [0.0, 0.0, 0.0, 0.0])
        row[0] += q.pending_jobs
        row[1] += q.pending_gpus
        row[2] += q.running_gpus
        row[3] = max(row[3], q.longest_wait_seconds)
    result = {}
    for tenant in sorted(per_snapshot):
        rows = list(per_snapshot[tenant].values())
        n = len(rows)
        result[tenant] = TenantQueue(
            samples=n,
            pending_jobs_avg=sum(r[0] for r in rows) / n,
            pending_gpus_avg=sum(r[1] for r in rows) / n,
            running_gpus_avg=sum(r[2] for r in rows) / n,
            longest_wait_seconds_max=max(r[3] for r in rows),
        )
    return result
