"""What a report is built from: one period's stored data, and the aggregates of the data too
large to hold for a whole soak (GPU samples, reduced a day at a time). Pure."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from observer.domain import STALE_AFTER_INTERVALS, Finding, ProbeRun, SchedulerNode
from observer.probes.windows import Calendar
from observer.records import (
    TASK_NOT_KNOWN,
    UTILIZATION_PERCENTS,
    ControllerRun,
    GpuMeasure,
    GpuSampleCounts,
    GpuUsageCounts,
    InferencePhase,
    InferenceSample,
    JobEstimate,
    JobSlot,
    PendingTime,
    ProbeSkip,
    RunGpuFigures,
    StoredAlert,
    StoredDelivery,
    StoredGpuSample,
    StoredIntervention,
    StoredNodeChange,
    StoredQueueSample,
    TenantTaskCounts,
)
from observer.settings.detectors import FairnessSettings

NO_POOL = "-"  # the pool key of nodes the platform puts in no pool
_PERCENTS = len(UTILIZATION_PERCENTS)  # NVML reports utilisation in whole percent, 0..100


@dataclass(frozen=True, slots=True)
class Period:
    """[start, end), aware."""

    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0)

    def clip(self, start: datetime, end: datetime | None) -> float:
        """Seconds of [start, end) (end None: still going) that fall in this period."""
        lo = max(start, self.start)
        hi = self.end if end is None else min(end, self.end)
        return max((hi - lo).total_seconds(), 0.0)


@dataclass(frozen=True, slots=True)
class UtilizationHistogram:
    """How many samples read each whole percent: exact mean and percentiles, and two days'
    histograms add up to the histogram of both."""

    counts: tuple[int, ...] = (0,) * _PERCENTS

    @classmethod
    def of(cls, percents: Iterable[int]) -> UtilizationHistogram:
        counts = [0] * _PERCENTS
        for percent in percents:
            counts[min(max(percent, 0), 100)] += 1
        return cls(tuple(counts))

    def plus(self, other: UtilizationHistogram) -> UtilizationHistogram:
        return UtilizationHistogram(
            tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        )

    @property
    def samples(self) -> int:
        return sum(self.counts)

    def mean(self) -> float | None:
        n = self.samples
        return sum(p * c for p, c in enumerate(self.counts)) / n if n else None

    def percentile(self, q: float) -> float | None:
        """The nearest-rank percentile (q in 0..1)."""
        n = self.samples
        if not n:
            return None
        rank = nearest_rank(q, n)
        seen = 0
        for percent, count in enumerate(self.counts):
            seen += count
            if seen >= rank:
                return float(percent)
        return 100.0

    def busy_share(self) -> float | None:
        """Share of samples that found the GPU doing any work."""
        n = self.samples
        return (n - self.counts[0]) / n if n else None

    def deciles(self) -> tuple[int, ...]:
        """Samples per tenth: 0-9 %, 10-19 %, ... 90-100 %."""
        tenths = [sum(self.counts[i * 10 : i * 10 + 10]) for i in range(10)]
        tenths[9] += self.counts[100]
        return tuple(tenths)


def nearest_rank(q: float, n: int) -> int:
    """The 1-based rank of the q-th (0..1) percentile of n values: ceil(q * n), at least 1;
    rounded first so that 0.95 * 20 is 19, not 19.000000000000004."""
    return max(1, math.ceil(round(q * n, 9)))


def _plus_all(
    a: Mapping[str, UtilizationHistogram], b: Mapping[str, UtilizationHistogram]
) -> dict[str, UtilizationHistogram]:
    return {
        key: a.get(key, UtilizationHistogram()).plus(b.get(key, UtilizationHistogram()))
        for key in sorted(a.keys() | b.keys())
    }


def _plus_nested(
    a: Mapping[str, Mapping[str, UtilizationHistogram]],
    b: Mapping[str, Mapping[str, UtilizationHistogram]],
) -> dict[str, dict[str, UtilizationHistogram]]:
    return {key: _plus_all(a.get(key, {}), b.get(key, {})) for key in sorted(a.keys() | b.keys())}


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """Agents' GPU samples of a period, reduced: utilisation overall, per pool, per window,
    per local hour of day, and of the samples attributed to a tenant's job: per tenant, per
    kind of task (a probe's name, TENANT_JOB, TASK_NOT_KNOWN) and per tenant within each
    window; which nodes were sampled; samples whose utilisation could not be read and the
    nodes they came from. `sm_active`: the same of GPM's SM activity, whose unread samples
    are those of GPUs without GPM (None: not reduced)."""

    overall: UtilizationHistogram = UtilizationHistogram()
    by_pool: Mapping[str, UtilizationHistogram] = field(default_factory=dict)
    by_window: Mapping[str, UtilizationHistogram] = field(default_factory=dict)
    by_hour: Mapping[str, UtilizationHistogram] = field(default_factory=dict)  # "00".."23"
    by_tenant: Mapping[str, UtilizationHistogram] = field(default_factory=dict)
    by_task: Mapping[str, UtilizationHistogram] = field(default_factory=dict)
    by_window_tenant: Mapping[str, Mapping[str, UtilizationHistogram]] = field(default_factory=dict)
    nodes: frozenset[str] = frozenset()
    unread_samples: int = 0
    unread_nodes: frozenset[str] = frozenset()
    sm_active: GpuUsage | None = None

    def plus(self, other: GpuUsage) -> GpuUsage:
        sm_active = None
        if self.sm_active is not None or other.sm_active is not None:
            sm_active = (self.sm_active or GpuUsage()).plus(other.sm_active or GpuUsage())
        return GpuUsage(
            overall=self.overall.plus(other.overall),
            by_pool=_plus_all(self.by_pool, other.by_pool),
            by_window=_plus_all(self.by_window, other.by_window),
            by_hour=_plus_all(self.by_hour, other.by_hour),
            by_tenant=_plus_all(self.by_tenant, other.by_tenant),
            by_task=_plus_all(self.by_task, other.by_task),
            by_window_tenant=_plus_nested(self.by_window_tenant, other.by_window_tenant),
            nodes=self.nodes | other.nodes,
            unread_samples=self.unread_samples + other.unread_samples,
            unread_nodes=self.unread_nodes | other.unread_nodes,
            sm_active=sm_active,
        )


def gpu_usage(
    samples: Iterable[StoredGpuSample],
    pools: Mapping[str, str | None],
    calendar: Calendar,
    measure: GpuMeasure = GpuMeasure.UTILIZATION,
) -> GpuUsage:
    """Reduce samples' `measure`; `pools` maps node to pool (nodes the scheduler does not
    know are in NO_POOL). Windows and hours are the platform's (calendar.timezone). The
    samples are counted as the database counts them, by node, by instant rather than by
    minute, and by tenant and task over the period and within each window, then grouped as
    its counts are."""
    slots: dict[datetime, _Slot] = {}  # a node's GPUs are sampled at one instant: looked up once
    by_node: dict[str, list[int]] = {}
    unread: Counter[str] = Counter()
    by_slot: dict[_Slot, list[int]] = {}
    by_owner: dict[tuple[str, str], list[int]] = {}
    by_window: dict[str, dict[tuple[str, str], list[int]]] = {}
    for sample in samples:
        node = _tally(by_node, sample.node)
        if measure is GpuMeasure.UTILIZATION:
            reading, not_read = sample.utilization_gpu_percent, False
        else:  # only a GPU without GPM is unread: one not read this tick has no reading
            reading, not_read = sample.sm_active_percent, sample.gpm_supported is False
        if reading is None:
            if not_read or measure is GpuMeasure.UTILIZATION:
                unread[sample.node] += 1
            continue
        percent = min(max(reading, 0), 100)
        node[percent] += 1
        slot = slots.get(sample.at)
        if slot is None:
            slot = slots[sample.at] = _slot(calendar, sample.at)
        _tally(by_slot, slot)[percent] += 1
        if sample.tenant is not None:
            owner = (sample.tenant, sample.task or TASK_NOT_KNOWN)
            _tally(by_owner, owner)[percent] += 1
            for name in slot[0]:
                _tally(by_window.setdefault(name, {}), owner)[percent] += 1
    return _grouped(
        pools,
        [(node, counts, unread[node]) for node, counts in by_node.items()],
        by_slot.items(),
        _tenant_task_counts(by_owner),
        {name: _tenant_task_counts(owners) for name, owners in by_window.items()},
    )


def counts_are_exact(calendar: Calendar) -> bool:
    """Whether samples counted per UTC minute reduce exactly as the samples themselves: the
    windows begin and end on whole minutes (and every zone in use today is offset from UTC
    by whole minutes), so a minute's windows and local hour are those of its every instant."""
    return all(
        t.second == 0 and t.microsecond == 0 for w in calendar.windows for t in (w.start, w.end)
    )


def gpu_usage_of_counts(
    counts: GpuSampleCounts,
    pools: Mapping[str, str | None],
    calendar: Calendar,
    windows: Mapping[str, TenantTaskCounts],
) -> GpuUsage:
    """gpu_usage over samples counted by the database (see counts_are_exact); `windows`: each
    window's samples by tenant and task, counted over its occurrences in the period."""
    return _grouped(
        pools,
        counts.by_node,
        ((_slot(calendar, minute), histogram) for minute, histogram in counts.by_minute),
        counts.by_tenant_task,
        windows,
    )


# The windows an instant falls in and its local hour ("00".."23"): samples alike in both are
# grouped alike, so those of a minute (counted) or of an instant (read) are added up as one.
_Slot = tuple[tuple[str, ...], str]
_Key = TypeVar("_Key", bound=Hashable)


def _slot(calendar: Calendar, at: datetime) -> _Slot:
    return tuple(calendar.windows_at(at)), f"{at.astimezone(calendar.timezone).hour:02d}"


def _tally(tallies: dict[_Key, list[int]], key: _Key) -> list[int]:
    """The samples per percent counted so far under `key`."""
    tally = tallies.get(key)
    if tally is None:
        tally = tallies[key] = [0] * _PERCENTS
    return tally


def _tenant_task_counts(by_owner: Mapping[tuple[str, str], Sequence[int]]) -> TenantTaskCounts:
    return tuple((tenant, task, tuple(counts)) for (tenant, task), counts in by_owner.items())


def _grouped(
    pools: Mapping[str, str | None],
    by_node: Iterable[tuple[str, Sequence[int], int]],
    by_slot: Iterable[tuple[_Slot, Sequence[int]]],
    by_tenant_task: Iterable[tuple[str, str, Sequence[int]]],
    windows: Mapping[str, Iterable[tuple[str, str, Sequence[int]]]],
) -> GpuUsage:
    """GpuUsage from samples counted per percent: by node (with those that could not be
    read), by slot, by tenant and task, and by tenant and task within each window. A key may
    come more than once; its counts add up."""
    overall = [0] * _PERCENTS
    by_pool: dict[str, list[int]] = {}
    by_window: dict[str, list[int]] = {}
    by_hour: dict[str, list[int]] = {}
    by_tenant: dict[str, list[int]] = {}
    by_task: dict[str, list[int]] = {}
    by_window_tenant: dict[str, dict[str, list[int]]] = {}
    nodes: set[str] = set()
    unread_nodes: set[str] = set()
    unread = 0

    def add(groups: dict[str, list[int]], key: str, counts: Sequence[int]) -> None:
        groups[key] = [a + b for a, b in zip(_tally(groups, key), counts, strict=True)]

    for node, histogram, node_unread in by_node:
        nodes.add(node)
        unread += node_unread
        if node_unread:
            unread_nodes.add(node)
        if any(histogram):
            add(by_pool, pools.get(node) or NO_POOL, histogram)
    for (names, hour), histogram in by_slot:
        overall = [a + b for a, b in zip(overall, histogram, strict=True)]
        for name in names:
            add(by_window, name, histogram)
        add(by_hour, hour, histogram)
    for tenant, task, histogram in by_tenant_task:
        add(by_tenant, tenant, histogram)
        add(by_task, task, histogram)
    for name, window in windows.items():
        for tenant, _, histogram in window:
            add(by_window_tenant.setdefault(name, {}), tenant, histogram)

    def reduce(groups: dict[str, list[int]]) -> dict[str, UtilizationHistogram]:
        return {key: UtilizationHistogram(tuple(groups[key])) for key in sorted(groups)}

    return GpuUsage(
        overall=UtilizationHistogram(tuple(overall)),
        by_pool=reduce(by_pool),
        by_window=reduce(by_window),
        by_hour=reduce(by_hour),
        by_tenant=reduce(by_tenant),
        by_task=reduce(by_task),
        by_window_tenant={k: reduce(by_window_tenant[k]) for k in sorted(by_window_tenant)},
        nodes=frozenset(nodes),
        unread_samples=unread,
        unread_nodes=frozenset(unread_nodes),
    )


@dataclass(frozen=True, slots=True)
class Allocation:
    """GPU-seconds the scheduler had and allocated over a period, per pool and per local hour
    of day, integrated over the node change log (a node's state holds until its next
    change)."""

    total_gpu_seconds: Mapping[str, float] = field(default_factory=dict)
    allocated_gpu_seconds: Mapping[str, float] = field(default_factory=dict)
    total_by_hour: Mapping[str, float] = field(default_factory=dict)
    allocated_by_hour: Mapping[str, float] = field(default_factory=dict)


def allocation(
    period: Period,
    at_start: Sequence[SchedulerNode],
    changes: Sequence[StoredNodeChange],
    calendar: Calendar,
) -> Allocation:
    """`at_start`: every node as it was at the period's start; `changes`: the log within the
    period, in order. Integrated per pool, not per node: between two instants of the log a
    pool's GPUs do not change, so each change costs a few additions (a week of a large fleet
    is a million changes); in whole GPU-microseconds, so that sums are exact."""
    held: dict[str, SchedulerNode] = {}
    pools: dict[str, list[int]] = {}  # pool -> [nodes, GPUs, allocated GPUs] held now
    by_pool: dict[str, list[int]] = {}  # pool -> [GPU-microseconds, allocated]
    by_hour: dict[str, list[int]] = {}  # local hour -> [GPU-microseconds, allocated]

    def take(node: SchedulerNode, sign: int) -> None:
        now = pools.setdefault(node.pool or NO_POOL, [0, 0, 0])
        now[0] += sign
        now[1] += sign * node.gpus_total
        now[2] += sign * node.gpus_allocated

    def hold(start: datetime, end: datetime) -> None:
        if end <= start or not any(nodes for nodes, _, _ in pools.values()):
            return
        span = (end - start) // _MICROSECOND
        gpus = allocated = 0
        for pool, (nodes, total, used) in pools.items():
            if nodes:
                sums = by_pool.setdefault(pool, [0, 0])
                sums[0] += total * span
                sums[1] += used * span
                gpus += total
                allocated += used
        for hour, part in _hours(start, end, calendar):
            sums = by_hour.setdefault(hour, [0, 0])
            sums[0] += gpus * part
            sums[1] += allocated * part

    for node in at_start:
        held[node.name] = node
        take(node, 1)
    since = period.start
    for change in changes:
        if change.at > since:
            hold(since, change.at)
            since = change.at
        node = change.node
        before = held.pop(node.name, None)
        if change.removed:
            if before is not None:
                take(before, -1)
        elif before is not None and before.pool == node.pool:
            # Most changes are a node's allocation moving within its pool: one update.
            held[node.name] = node
            now = pools[node.pool or NO_POOL]
            now[1] += node.gpus_total - before.gpus_total
            now[2] += node.gpus_allocated - before.gpus_allocated
        else:
            if before is not None:
                take(before, -1)
            held[node.name] = node
            take(node, 1)
    hold(since, period.end)

    def seconds(sums: dict[str, list[int]], which: int) -> dict[str, float]:
        return {key: sums[key][which] / 1_000_000 for key in sorted(sums)}

    return Allocation(
        seconds(by_pool, 0), seconds(by_pool, 1), seconds(by_hour, 0), seconds(by_hour, 1)
    )


_MICROSECOND = timedelta(microseconds=1)


def _hours(start: datetime, end: datetime, calendar: Calendar) -> Iterable[tuple[str, int]]:
    """[start, end) cut at local hour boundaries: (hour "00".."23", microseconds in it)."""
    at = start
    while at < end:
        local = at.astimezone(calendar.timezone)
        next_hour = local.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        cut = min(end, next_hour)
        yield f"{local.hour:02d}", (cut - at) // _MICROSECOND
        at = cut


@dataclass(frozen=True, slots=True)
class Sources:
    """What the observer was set up to watch; a source not set up is never reported healthy."""

    agents: bool  # controller.agent_urls or agent_dns_name
    prometheus: bool  # controller.prometheus_url
    alertmanager: bool  # reports.alertmanager_url
    logs: bool  # controller.logs.reader is not "none"


@dataclass(frozen=True, slots=True)
class TenantTerms:
    """What the settings say a tenant is entitled to."""

    weight: float
    quota_gpus: int | None


@dataclass(frozen=True, slots=True)
class ReportContext:
    """The settings a report needs, already resolved."""

    calendar: Calendar
    sources: Sources
    snapshot_interval_seconds: float
    soak_started_at: datetime
    alive_interval_seconds: float = 60.0  # how often a running controller says so

    @property
    def controller_gone_after_seconds(self) -> float:
        """A controller not alive for this long is not running (the staleness rule)."""
        return STALE_AFTER_INTERVALS * self.alive_interval_seconds

    ignored_alerts: frozenset[str] = frozenset()
    delivery_channels: tuple[str, ...] = ()  # where reports go besides the directory
    canary_probes: frozenset[str] = frozenset({"log-canary"})
    busy_probes: frozenset[str] = frozenset({"gpu-busy"})
    fairness_probes: frozenset[str] = frozenset({"fairness"})
    # The probes of the plan, each with the copies a launch submits per tenant: what the
    # soak is to exercise.
    planned_copies: Mapping[str, int] = field(default_factory=dict)
    # Each configured tenant's weight and quota, and the fairness rule that weighs them.
    tenants: Mapping[str, TenantTerms] = field(default_factory=dict)
    fairness: FairnessSettings | None = None
    # Who used what: the time each stored GPU sample stands for, the price of a GPU-hour per
    # pool ("*": any other; empty: no cost) and its currency.
    gpu_sample_seconds: float = 300.0
    gpu_hour_price: Mapping[str, float] = field(default_factory=dict)
    currency: str = "CNY"


@dataclass(frozen=True, slots=True)
class PeriodData:
    """Everything stored about one period. `runs`: submitted in it; `findings`: active at
        some moment of it; `queue_samples`, `node_changes`, `alerts` (started), `interventions`
        (recorded), `deliveries` (of earlier reports, made in it): within it; `nodes_at_start`:
        every node as it was at its start; `gpu` and `allocation`: the period's GPU samples and
        node log, reduced; `job_slots`: every tenant's finished jobs, per listed slot that
        overlaps it; `pending_times`: every tenant's own jobs' time pending, per slot that
        overlaps it; `controller_runs`: every run of the controller started before its end;
        `probe_skips`: the probe copies that came due in it and were not submitted;
    `inference_samples` and `inference_phases`: the inference service's looks in it and the
    changes that became ready in it; `job_estimates`: the jobs seen waiting that started in
    it, with the platform's estimates of their start; `run_gpu`: by run id, the GPU samples
    attributed to each run of it that started; `usage`: its GPU samples attributed to a
    tenant, counted per node, tenant and task type."""

    period: Period
    runs: Sequence[ProbeRun] = ()
    findings: Sequence[Finding] = ()
    queue_samples: Sequence[StoredQueueSample] = ()
    nodes_at_start: Sequence[SchedulerNode] = ()
    node_changes: Sequence[StoredNodeChange] = ()
    gpu: GpuUsage = GpuUsage()
    allocation: Allocation = Allocation()
    alerts: Sequence[StoredAlert] = ()
    interventions: Sequence[StoredIntervention] = ()
    deliveries: Sequence[StoredDelivery] = ()
    job_slots: Sequence[JobSlot] = ()
    pending_times: Sequence[PendingTime] = ()
    controller_runs: Sequence[ControllerRun] = ()
    probe_skips: Sequence[ProbeSkip] = ()
    inference_samples: Sequence[InferenceSample] = ()  # read for a day's summary and the verdict
    inference_phases: Sequence[InferencePhase] = ()
    job_estimates: Sequence[JobEstimate] = ()  # read for a day's summary
    # Each probe run's own GPUs, reduced by the store (read for a day's summary alone).
    run_gpu: Mapping[str, RunGpuFigures] = field(default_factory=dict)
    usage: GpuUsageCounts = field(default_factory=GpuUsageCounts)
