"""The GPU figures of one period: utilisation overall and per pool, window, local hour,
tenant, kind of task and tenant within each window, from the agents' samples, beside what
the scheduler allocated, and the hours each window covers. Pure. A figure the observer could
not see is None, never 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from observer.probes.windows import Calendar
from observer.reports.compute.data import (
    Allocation,
    Period,
    PeriodData,
    ReportContext,
    UtilizationHistogram,
)
from observer.reports.compute.queues import tenant_queues


@dataclass(frozen=True, slots=True)
class UtilizationStats:
    samples: int
    avg_percent: float | None
    p50_percent: float | None
    p95_percent: float | None
    busy_share: float | None  # samples with any utilisation
    deciles: tuple[int, ...]  # samples per 10 % band


def utilization_stats(histogram: UtilizationHistogram) -> UtilizationStats:
    return UtilizationStats(
        samples=histogram.samples,
        avg_percent=histogram.mean(),
        p50_percent=histogram.percentile(0.5),
        p95_percent=histogram.percentile(0.95),
        busy_share=histogram.busy_share(),
        deciles=histogram.deciles(),
    )


@dataclass(frozen=True, slots=True)
class PoolUse:
    """Allocated (the scheduler's books) against used (the agents' readings) for a pool."""

    gpus_avg: float | None  # GPUs the scheduler had, time-weighted
    allocated_share: float | None
    used_share: float | None  # share of GPU samples that found the GPU busy
    utilization: UtilizationStats | None


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """`observed`: the agents' samples exist for the period. Per tenant: `by_tenant`, the
    utilisation of the GPUs its jobs held when sampled (`tenant_samples` of the samples
    could be attributed: not on Kubernetes, whose agents know pods only by UID), beside
    `tenant_running_gpus_avg`, the GPUs allocated to it by the scheduler's queues; and of
    the same samples, `by_task` (a probe's name, "job" for the tenants' own, "" not known)
    and `by_window_tenant` (window -> tenant)."""

    observed: bool
    overall: UtilizationStats | None
    by_pool: Mapping[str, PoolUse]
    by_window: Mapping[str, UtilizationStats]
    by_hour: Mapping[str, UtilizationStats]  # local hour "00".."23"
    hours_by_window: Mapping[str, tuple[str, ...]]  # the local hours each window covers
    allocated_share: float | None
    allocated_share_by_hour: Mapping[str, float]
    tenant_running_gpus_avg: Mapping[str, float]
    by_tenant: Mapping[str, UtilizationStats]
    by_task: Mapping[str, UtilizationStats]
    by_window_tenant: Mapping[str, Mapping[str, UtilizationStats]]
    tenant_samples: int
    nodes_sampled: int
    nodes_known: int
    unread_samples: int


def gpu_figures(data: PeriodData, context: ReportContext) -> GpuFigures:
    usage, alloc = data.gpu, data.allocation
    observed = usage.overall.samples > 0
    pools = sorted(usage.by_pool.keys() | alloc.total_gpu_seconds.keys())
    seconds = data.period.seconds
    by_pool = {}
    for pool in pools:
        histogram = usage.by_pool.get(pool)
        total = alloc.total_gpu_seconds.get(pool)
        by_pool[pool] = PoolUse(
            gpus_avg=total / seconds if total is not None and seconds else None,
            allocated_share=_share(alloc.allocated_gpu_seconds.get(pool), total),
            used_share=histogram.busy_share() if histogram else None,
            utilization=utilization_stats(histogram) if histogram else None,
        )
    queues = tenant_queues(data.queue_samples)
    known = {n.name for n in data.nodes_at_start} | {c.node.name for c in data.node_changes}
    return GpuFigures(
        observed=observed,
        overall=utilization_stats(usage.overall) if observed else None,
        by_pool=by_pool,
        by_window={k: utilization_stats(v) for k, v in usage.by_window.items()},
        by_hour={k: utilization_stats(v) for k, v in usage.by_hour.items()},
        hours_by_window=_window_hours(context.calendar, data.period),
        allocated_share=_share(
            sum(alloc.allocated_gpu_seconds.values()), sum(alloc.total_gpu_seconds.values())
        ),
        allocated_share_by_hour=_hourly_shares(alloc),
        tenant_running_gpus_avg={t: q.running_gpus_avg for t, q in queues.items()},
        by_tenant={k: utilization_stats(v) for k, v in usage.by_tenant.items()},
        by_task={k: utilization_stats(v) for k, v in usage.by_task.items()},
        by_window_tenant={
            window: {k: utilization_stats(v) for k, v in tenants.items()}
            for window, tenants in usage.by_window_tenant.items()
        },
        tenant_samples=sum(h.samples for h in usage.by_tenant.values()),
        nodes_sampled=len(usage.nodes),
        nodes_known=len(known),
        unread_samples=usage.unread_samples,
    )


def _window_hours(calendar: Calendar, period: Period) -> dict[str, tuple[str, ...]]:
    """The local hours ("00".."23") of which a quarter, in the period, falls in each window."""
    hours: dict[str, set[str]] = {}
    at = period.start
    while at < period.end:
        local = f"{at.astimezone(calendar.timezone).hour:02d}"
        for window in calendar.windows_at(at):
            hours.setdefault(window, set()).add(local)
        at += timedelta(minutes=15)
    return {window: tuple(sorted(h)) for window, h in sorted(hours.items())}


def _share(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole


def _hourly_shares(alloc: Allocation) -> dict[str, float]:
    return {
        hour: share
        for hour in sorted(alloc.total_by_hour)
        if (share := _share(alloc.allocated_by_hour.get(hour, 0.0), alloc.total_by_hour[hour]))
        is not None
    }
