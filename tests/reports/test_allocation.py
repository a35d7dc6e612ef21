"""GPUs the scheduler had and allocated over a period, per pool and per local hour: each node
counts with its GPUs from its state at the period's start or its last change until its next
change, its removal or the period's end, in the pool of that state; and a period's GPU-time is
exactly the sum of its parts', so that days add up to the soak."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from observer.domain import SchedulerNode
from observer.probes.windows import Calendar
from observer.records import StoredNodeChange
from observer.reports.compute.data import NO_POOL, Period, allocation

# Half an hour off UTC: a local hour is not a UTC hour.
CALENDAR = Calendar(ZoneInfo("Asia/Kolkata"), [])
START = datetime(2026, 11, 30, 22, 10, tzinfo=CALENDAR.timezone)
NAMES = ("n0", "n1", "n2", "n3")


def _node(rng: random.Random, name: str) -> SchedulerNode:
    total = rng.choice((0, 4, 8))
    pool = rng.choice(("pool-a", "pool-b", None))  # a node may move between pools
    return SchedulerNode(name, pool, total, rng.randint(0, total), "mixed")


def _log(
    rng: random.Random, seconds: int, step_seconds: float
) -> tuple[list[SchedulerNode], list[StoredNodeChange]]:
    at_start = [_node(rng, name) for name in NAMES[:3]]  # n3 appears later
    changes = []
    at = START
    while (at := at + timedelta(seconds=rng.uniform(0, step_seconds))) < START + timedelta(
        seconds=seconds
    ):
        name = rng.choice(NAMES)
        # A few changes share an instant, as a snapshot's do; some are removals.
        for _ in range(rng.choice((1, 1, 2))):
            removed = rng.random() < 0.15
            changes.append(StoredNodeChange(at, _node(rng, name), removed))
    return at_start, changes


def _whole_second(at: datetime) -> datetime:
    return START + timedelta(seconds=round((at - START).total_seconds()))


def test_each_node_counts_its_gpus_in_its_pool_until_its_next_change_or_removal():
    rng = random.Random(11)
    seconds = 5 * 3600
    at_start, changes = _log(rng, seconds, 600)
    whole = [StoredNodeChange(_whole_second(c.at), c.node, c.removed) for c in changes]
    period = Period(START, START + timedelta(seconds=seconds))

    got = allocation(period, at_start, whole, CALENDAR)

    # Second by second: every node as the log says it was, where it was.
    total: dict[str, float] = {}
    allocated: dict[str, float] = {}
    total_hour: dict[str, float] = {}
    allocated_hour: dict[str, float] = {}
    state = {n.name: n for n in at_start}
    pending = list(whole)
    for second in range(seconds):
        at = START + timedelta(seconds=second)
        while pending and pending[0].at <= at:
            change = pending.pop(0)
            if change.removed:
                state.pop(change.node.name, None)
            else:
                state[change.node.name] = change.node
        hour = f"{at.astimezone(CALENDAR.timezone).hour:02d}"
        for node in state.values():
            pool = node.pool or NO_POOL
            total[pool] = total.get(pool, 0) + node.gpus_total
            allocated[pool] = allocated.get(pool, 0) + node.gpus_allocated
            total_hour[hour] = total_hour.get(hour, 0) + node.gpus_total
            allocated_hour[hour] = allocated_hour.get(hour, 0) + node.gpus_allocated

    assert got.total_gpu_seconds == dict(sorted(total.items()))
    assert got.allocated_gpu_seconds == dict(sorted(allocated.items()))
    assert got.total_by_hour == dict(sorted(total_hour.items()))
    assert got.allocated_by_hour == dict(sorted(allocated_hour.items()))
    assert set(got.total_gpu_seconds) == {"pool-a", "pool-b", NO_POOL}


def test_a_periods_gpu_time_is_exactly_the_sum_of_its_parts():
    rng = random.Random(5)
    seconds = 3 * 86400
    at_start, changes = _log(rng, seconds, 900)  # instants to the microsecond
    whole = Period(START, START + timedelta(seconds=seconds))
    inside = [rng.choice(changes).at for _ in range(4)]
    cuts = sorted({START, *inside, inside[0] + timedelta(microseconds=1), whole.end})

    state = {n.name: n for n in at_start}
    parts = []
    for lo, hi in itertools.pairwise(cuts):
        within = [c for c in changes if lo <= c.at < hi]
        parts.append(allocation(Period(lo, hi), list(state.values()), within, CALENDAR))
        for change in within:
            if change.removed:
                state.pop(change.node.name, None)
            else:
                state[change.node.name] = change.node

    def microseconds(values: dict[str, float]) -> dict[str, int]:
        return {key: round(value * 1_000_000) for key, value in values.items()}

    got = allocation(whole, at_start, changes, CALENDAR)
    for field in ("total_gpu_seconds", "allocated_gpu_seconds", "total_by_hour"):
        summed: dict[str, int] = {}
        for part in parts:
            for key, value in microseconds(getattr(part, field)).items():
                summed[key] = summed.get(key, 0) + value
        assert microseconds(getattr(got, field)) == summed
