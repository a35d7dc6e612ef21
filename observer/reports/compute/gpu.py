"""The GPU figures of one period: utilisation overall and per pool, window, local hour,
tenant, kind of task and tenant within each window, from the agents' samples, beside what
the scheduler allocated, and the hours each window covers; GPM's SM activity overall and per
pool, window and tenant, and the nodes whose GPUs have no GPM. Pure. A figure the observer
could not see is None, never 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from observer.probes.windows import Calendar
from observer.reports.compute.data import (
    Allocation,
    GpuUsage,
    Period,
    PeriodData,
    ReportContext,
    UtilizationHistogram,
)
from observer.reports.compute.events import NODE_NAMES
from observer.reports.compute.notes import Note, named
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
    sm_active: UtilizationStats | None = None  # GPM's; None: no GPU of the pool reported it


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """`observed`: the agents' samples exist for the period. Per tenant: `by_tenant`, the
    utilisation of the GPUs its jobs held when sampled (`tenant_samples` of the samples
    could be attributed: not on Kubernetes, whose agents know pods only by UID), beside
    `tenant_running_gpus_avg`, the GPUs allocated to it by the scheduler's queues; and of
    the same samples, `by_task` (a probe's name, "job" for the tenants' own, "" not known)
    and `by_window_tenant` (window -> tenant). `sm_*`: GPM's SM activity (the share of SMs busy,
    which utilisation, the share of time any kernel ran, cannot tell) of the samples that had
    it, overall and per window, tenant and kind of task; `gpm_not_supported_nodes`: the nodes
    whose GPUs said they have no GPM, and how many of their samples (their SM activity is not
    known, never 0)."""

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
    sm_overall: UtilizationStats | None = None
    sm_by_window: Mapping[str, UtilizationStats] = field(default_factory=dict)
    sm_by_tenant: Mapping[str, UtilizationStats] = field(default_factory=dict)
    sm_by_task: Mapping[str, UtilizationStats] = field(default_factory=dict)
    gpm_not_supported_nodes: tuple[str, ...] = ()
    gpm_not_supported_samples: int = 0


def gpu_figures(data: PeriodData, context: ReportContext) -> GpuFigures:
    usage, alloc = data.gpu, data.allocation
    sm = usage.sm_active or GpuUsage()
    observed = usage.overall.samples > 0
    pools = sorted(usage.by_pool.keys() | alloc.total_gpu_seconds.keys())
    seconds = data.period.seconds
    by_pool = {}
    for pool in pools:
        histogram = usage.by_pool.get(pool)
        sm_histogram = sm.by_pool.get(pool)
        total = alloc.total_gpu_seconds.get(pool)
        by_pool[pool] = PoolUse(
            gpus_avg=total / seconds if total is not None and seconds else None,
            allocated_share=_share(alloc.allocated_gpu_seconds.get(pool), total),
            used_share=histogram.busy_share() if histogram else None,
            utilization=utilization_stats(histogram) if histogram else None,
            sm_active=utilization_stats(sm_histogram) if sm_histogram else None,
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
        sm_overall=utilization_stats(sm.overall) if sm.overall.samples else None,
        sm_by_window={k: utilization_stats(v) for k, v in sm.by_window.items()},
        sm_by_tenant={k: utilization_stats(v) for k, v in sm.by_tenant.items()},
        sm_by_task={k: utilization_stats(v) for k, v in sm.by_task.items()},
        gpm_not_supported_nodes=tuple(sorted(sm.unread_nodes)),
        gpm_not_supported_samples=sm.unread_samples,
    )


def gpm_note(g: GpuFigures) -> Note:
    """The sentence under the SM activity columns: the nodes whose GPUs have no GPM (their
    SM activity not known, never 0); else how many samples had SM activity; else that none
    did (agents that do not read GPM, or no sample at all)."""
    if g.gpm_not_supported_nodes:
        return Note(
            "note.gpm_not_supported",
            {
                "nodes": named(g.gpm_not_supported_nodes, NODE_NAMES),
                "samples": g.gpm_not_supported_samples,
            },
        )
    if g.sm_overall is not None:
        return Note("note.gpm_reported", {"samples": g.sm_overall.samples})
    return Note("note.gpm_none")


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
