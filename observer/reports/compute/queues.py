"""The queue figures of one period: the probe runs' waits (submission to start), overall and
per tenant, window and probe, and every tenant's queue as the scheduler's snapshots saw it.
Pure. A figure the observer could not see is None, never 0."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from observer.domain import ProbeRun
from observer.records import StoredQueueSample
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


def queue_figures(runs: Sequence[ProbeRun], samples: Sequence[StoredQueueSample]) -> QueueFigures:
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
    )


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
