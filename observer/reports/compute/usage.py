"""Who used what in a period, for a capacity decision and cost attribution: GPU-hours per
tenant x pool x task type (allocated, busy, idle, cost), the memory a tenant's GPUs used,
GPU-hours per user where the scheduler names users, and the fleet's peak demand against its
capacity per window. Pure.

Each attributed GPU sample stands for the time until the next one is kept (ReportContext's
gpu_sample_seconds). Allocated: GPUs held by the tenant's jobs; busy: allocated weighted by
utilisation; idle: allocated while the GPU read 0 % (the detectors' idle where GPM is not
read). What the samples did not attribute to a tenant is the UNATTRIBUTED row, with which a
pool's rows add up to its allocated GPU-hours as the scheduler's node log gives them
(Allocation); jobs shorter than a sample's interval can make the attributed hours more than
those, and the pool then gets a note (pool_notes) instead of a negative row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from observer.domain import Comparison, SchedulerNode, compare
from observer.records import GpuUsageCounts, StoredNodeChange, StoredQueueSample
from observer.reports.compute.data import NO_POOL, PeriodData, ReportContext, nearest_rank
from observer.reports.compute.notes import Note

UNATTRIBUTED = ""  # the tenant of allocated GPU-hours no tenant's job was seen holding
ANY_POOL = "*"  # the price of a pool gpu_hour_price does not name
WHOLE_DAY = ""  # the capacity row over the whole period, beside each window's
_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class UsageRow:
    """GPU-hours of one tenant's jobs of one task type in one pool; busy and idle None on the
    UNATTRIBUTED row (no sample says how used they were); cost None without a price."""

    tenant: str
    pool: str
    task_type: str  # "probe", a configured type, "other"; "" where the samples had none
    allocated_hours: float
    busy_hours: float | None
    idle_hours: float | None
    cost: float | None


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """The GPU memory used by one tenant's GPUs, in whole GiB (rounded down)."""

    tenant: str
    p50_gib: int
    p95_gib: int
    samples: int


@dataclass(frozen=True, slots=True)
class UserRow:
    tenant: str
    user: str
    allocated_hours: float  # from the scheduler's running GPUs per user


@dataclass(frozen=True, slots=True)
class CapacityRow:
    """The whole fleet in one window (WHOLE_DAY: the period): the queues do not say which
    pool a pending job will run in, so demand is not split by pool."""

    window: str
    capacity_gpus: int  # the fleet's GPUs when demand peaked
    peak_demand_gpus: int  # running + pending GPUs of every tenant, at its peak
    over_capacity_hours: float  # time demand exceeded the GPUs the fleet had then
    observed_hours: float  # time the scheduler's queues were seen


@dataclass(frozen=True, slots=True)
class Usage:
    rows: tuple[UsageRow, ...] = ()
    pool_allocated_hours: Mapping[str, float] = field(default_factory=dict)  # the scheduler's
    # Each pool whose samples attribute more GPU-hours than the scheduler allocated: its rows
    # do not add up to its allocated hours, and the report says so.
    pool_notes: tuple[Note, ...] = ()
    memory: tuple[MemoryRow, ...] = ()
    users: tuple[UserRow, ...] = ()
    capacity: tuple[CapacityRow, ...] = ()
    capacity_note: Note | None = None  # None: no queue snapshot in the period
    currency: str | None = None  # None: no price set, no cost
    sample_seconds: float = 0.0


def usage(data: PeriodData, context: ReportContext) -> Usage:
    pools = _first_pools(data.nodes_at_start, data.node_changes)
    prices = context.gpu_hour_price
    rows = _rows(data.usage, pools, data.allocation.allocated_gpu_seconds, context, prices)
    capacity = _capacity(data, context)
    allocated = {
        pool: seconds / _HOUR for pool, seconds in data.allocation.allocated_gpu_seconds.items()
    }
    return Usage(
        rows=rows,
        pool_allocated_hours=allocated,
        pool_notes=_over_attributed(rows, allocated),
        memory=_memory(data.usage),
        users=_users(data.queue_samples, context.snapshot_interval_seconds, data.period.end),
        capacity=capacity,
        capacity_note=_capacity_note(capacity),
        currency=context.currency if prices else None,
        sample_seconds=context.gpu_sample_seconds,
    )


def price_of(pool: str, prices: Mapping[str, float]) -> float | None:
    return prices.get(pool, prices.get(ANY_POOL))


def _first_pools(
    at_start: Sequence[SchedulerNode], changes: Sequence[StoredNodeChange]
) -> dict[str, str]:
    """Each node's pool, as it was when the period first saw it."""
    pools = {node.name: node.pool or NO_POOL for node in at_start}
    for change in changes:
        pools.setdefault(change.node.name, change.node.pool or NO_POOL)
    return pools


def _rows(
    counts: GpuUsageCounts,
    pools: Mapping[str, str],
    allocated_seconds: Mapping[str, float],
    context: ReportContext,
    prices: Mapping[str, float],
) -> tuple[UsageRow, ...]:
    each = context.gpu_sample_seconds / _HOUR
    sums: dict[tuple[str, str, str], list[int]] = {}  # [samples, percents, idle]
    for node, tenant, task_type, samples, percents, idle in counts.usage:
        tally = sums.setdefault((tenant, pools.get(node, NO_POOL), task_type), [0, 0, 0])
        tally[0] += samples
        tally[1] += percents
        tally[2] += idle

    def cost(pool: str, hours: float) -> float | None:
        price = price_of(pool, prices)
        return None if price is None else hours * price

    rows = [
        UsageRow(
            tenant,
            pool,
            kind,
            samples * each,
            percents / 100 * each,
            idle * each,
            cost(pool, samples * each),
        )
        for (tenant, pool, kind), (samples, percents, idle) in sums.items()
    ]
    attributed: dict[str, float] = {}
    for row in rows:
        attributed[row.pool] = attributed.get(row.pool, 0.0) + row.allocated_hours
    for pool, seconds in allocated_seconds.items():
        rest = seconds / _HOUR - attributed.get(pool, 0.0)
        # Sampled hours over the scheduler's (a sample stands for its whole interval) leave no
        # row, never a negative one: _over_attributed says so.
        if rest > 1e-9:
            rows.append(UsageRow(UNATTRIBUTED, pool, "", rest, None, None, cost(pool, rest)))
    return tuple(
        sorted(rows, key=lambda r: (r.pool, r.tenant == UNATTRIBUTED, r.tenant, r.task_type))
    )


def _memory(counts: GpuUsageCounts) -> tuple[MemoryRow, ...]:
    by_tenant: dict[str, dict[int, int]] = {}
    for tenant, gib, samples in counts.memory:
        tally = by_tenant.setdefault(tenant, {})
        tally[gib] = tally.get(gib, 0) + samples

    def percentile(tally: Mapping[int, int], q: float) -> int:
        rank, seen = nearest_rank(q, sum(tally.values())), 0
        for gib in sorted(tally):
            seen += tally[gib]
            if seen >= rank:
                return gib
        return max(tally)

    return tuple(
        MemoryRow(tenant, percentile(tally, 0.5), percentile(tally, 0.95), sum(tally.values()))
        for tenant, tally in sorted(by_tenant.items())
        if sum(tally.values())
    )


def _weights(instants: Sequence[datetime], interval: float, end: datetime) -> list[float]:
    """Seconds each of the scheduler's snapshots stands for: until the next one (or the
    period's end), at most one interval: a gap in the snapshots is not counted."""
    ends = [*instants[1:], end] if instants else []
    return [
        min((after - at).total_seconds(), interval)
        for at, after in zip(instants, ends, strict=True)
    ]


def _by_instant(samples: Sequence[StoredQueueSample]) -> dict[datetime, list[StoredQueueSample]]:
    snapshots: dict[datetime, list[StoredQueueSample]] = {}
    for sample in samples:
        snapshots.setdefault(sample.at, []).append(sample)
    return dict(sorted(snapshots.items()))


def _users(
    samples: Sequence[StoredQueueSample], interval: float, end: datetime
) -> tuple[UserRow, ...]:
    snapshots = _by_instant(samples)
    hours: dict[tuple[str, str], float] = {}
    for weight, queues in zip(
        _weights(list(snapshots), interval, end), snapshots.values(), strict=True
    ):
        for queue in queues:
            for user, gpus in queue.state.running_gpus_by_user.items():
                key = (queue.state.tenant, user)
                hours[key] = hours.get(key, 0.0) + gpus * weight / _HOUR
    return tuple(UserRow(t, u, h) for (t, u), h in sorted(hours.items()) if h > 0)


def _capacity(data: PeriodData, context: ReportContext) -> tuple[CapacityRow, ...]:
    snapshots = _by_instant(data.queue_samples)
    weights = _weights(list(snapshots), context.snapshot_interval_seconds, data.period.end)
    gpus = {node.name: node.gpus_total for node in data.nodes_at_start}
    changes = iter(data.node_changes)
    change = next(changes, None)
    # window -> [peak demand, capacity then, seconds over capacity, seconds observed]
    windows: dict[str, list[float]] = {}
    for (at, queues), weight in zip(snapshots.items(), weights, strict=True):
        while change is not None and change.at <= at:
            if change.removed:
                gpus.pop(change.node.name, None)
            else:
                gpus[change.node.name] = change.node.gpus_total
            change = next(changes, None)
        demand = sum(q.state.running_gpus + q.state.pending_gpus for q in queues)
        capacity = sum(gpus.values())
        for name in (WHOLE_DAY, *context.calendar.windows_at(at)):
            window = windows.setdefault(name, [-1, 0, 0.0, 0.0])
            if demand > window[0]:
                window[0], window[1] = demand, capacity
            window[2] += weight if demand > capacity else 0.0
            window[3] += weight
    return tuple(
        CapacityRow(name, int(capacity), int(peak), over / _HOUR, seen / _HOUR)
        for name, (peak, capacity, over, seen) in sorted(windows.items())
    )


def _capacity_note(capacity: Sequence[CapacityRow]) -> Note | None:
    """Whether demand ever exceeded the fleet, from the whole period's row: how long it did,
    else its peak against the GPUs the fleet had then (demand never above them, the peak
    never was)."""
    whole = next((c for c in capacity if c.window == WHOLE_DAY), None)
    if whole is None:
        return None
    observed = whole.observed_hours * _HOUR
    if whole.over_capacity_hours > 0:
        over = whole.over_capacity_hours * _HOUR
        return Note("usage.capacity_exceeded", {"over_seconds": over, "observed_seconds": observed})
    return Note(
        "usage.capacity_within",
        {
            "peak": whole.peak_demand_gpus,
            "capacity": whole.capacity_gpus,
            "observed_seconds": observed,
        },
    )


def _over_attributed(rows: Sequence[UsageRow], allocated: Mapping[str, float]) -> tuple[Note, ...]:
    """A pool whose attributed GPU-hours, as the report writes them, are more than its
    allocated ones: each sample stands for its whole interval, and a job shorter than it is
    counted for more than it held."""
    attributed: dict[str, float] = {}
    for row in rows:
        if row.tenant != UNATTRIBUTED:
            attributed[row.pool] = attributed.get(row.pool, 0.0) + row.allocated_hours
    return tuple(
        Note(
            "usage.pool_over_attributed",
            {
                "pool": pool,
                "attributed_hours": hours,
                "allocated_hours": allocated.get(pool, 0.0),
            },
        )
        for pool, hours in sorted(attributed.items())
        if compare(hours, allocated.get(pool, 0.0)) is Comparison.MORE
    )
