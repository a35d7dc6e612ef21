"""The GPUs each tenant is entitled to at one queue sample, the capacity the tenants share
through an occurrence (nodes drained and resumed inside it change it), and Jain's index over
how close the tenants came to their entitlements."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from observer.detectors.scheduler_terms import in_service
from observer.domain import SchedulerNode


@dataclass(frozen=True, slots=True)
class Guarantee:
    """What a tenant's queue guarantees it: nominal GPUs, and how many more it may borrow
    (None: without limit)."""

    nominal_gpus: int
    borrowing_limit_gpus: int | None


def entitlements(
    weights: Mapping[str, float],
    demand_gpus: Mapping[str, float],
    capacity_gpus: float,
    guarantees: Mapping[str, Guarantee] | None = None,
) -> dict[str, float]:
    """Each tenant's entitled GPUs. A tenant with a guarantee is entitled to its nominal GPUs
    up to its demand (scaled down together when the guarantees exceed the capacity); what the
    guarantees leave (GPUs nobody is guaranteed, guaranteed GPUs their owner leaves idle) is
    shared by weight, a guaranteed tenant's part up to its borrowing limit."""
    guarantees = guarantees or {}
    base = {
        t: float(min(demand_gpus[t], g.nominal_gpus))
        for t, g in guarantees.items()
        if t in demand_gpus
    }
    capacity = float(max(capacity_gpus, 0))
    if sum(base.values()) > capacity:
        scale = capacity / sum(base.values())
        base = {t: gpus * scale for t, gpus in base.items()}
    beyond = {}
    for tenant, demand in demand_gpus.items():
        if tenant not in base:
            beyond[tenant] = demand
            continue
        limit = guarantees[tenant].borrowing_limit_gpus
        wanted = demand - base[tenant]
        beyond[tenant] = wanted if limit is None else min(wanted, limit)
    shared = _water_fill(weights, beyond, capacity - sum(base.values()))
    return {t: base.get(t, 0.0) + shared[t] for t in demand_gpus}


def _water_fill(
    weights: Mapping[str, float], demand_gpus: Mapping[str, float], capacity_gpus: float
) -> dict[str, float]:
    """Weighted max-min fair shares (water-filling) of `capacity_gpus` among the tenants of
    `demand_gpus`: no tenant is entitled to more than it asks, and capacity one tenant leaves
    is shared by the others by weight. A tenant without a positive weight is entitled to none."""
    entitled = dict.fromkeys(demand_gpus, 0.0)
    active = {t for t, d in demand_gpus.items() if d > 0 and weights.get(t, 0.0) > 0}
    left = float(max(capacity_gpus, 0))
    while active and left > 0:
        total_weight = sum(weights[t] for t in active)
        share = {t: left * weights[t] / total_weight for t in active}
        sated = {t for t in active if demand_gpus[t] <= share[t]}
        if not sated:
            entitled.update(share)
            break
        for tenant in sated:
            entitled[tenant] = float(demand_gpus[tenant])
            left -= demand_gpus[tenant]
        active -= sated
    return entitled


def jain_index(values: Iterable[float]) -> float | None:
    """Jain's fairness index, (sum x)^2 / (n * sum x^2): 1 when all are equal, 1/n when one
    tenant has everything. None when there are no values or all are zero."""
    xs = list(values)
    squares = sum(x * x for x in xs)
    if not xs or squares == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * squares)


def schedulable_gpus(nodes: Iterable[SchedulerNode]) -> int:
    """GPUs of the nodes in service (not drained, down, unresponsive or cordoned): the
    capacity tenants share. Tainted nodes count: GPU nodes are commonly tainted for GPU jobs
    only."""
    return sum(_in_service_gpus(node) for node in nodes)


def _in_service_gpus(node: SchedulerNode) -> int:
    return node.gpus_total if in_service(node) else 0


class NodeChange(Protocol):
    """A node appeared, changed or left at `at` (storage's StoredNodeChange)."""

    @property
    def at(self) -> datetime: ...
    @property
    def node(self) -> SchedulerNode: ...
    @property
    def removed(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Capacity:
    """The GPUs tenants share through an occurrence: nodes drained and resumed inside it
    change it, so each queue sample is judged against the capacity of its own moment."""

    initial_gpus: int
    # The GPUs from each instant of changed_at on (UTC, oldest first): kept apart so that
    # each sample's lookup bisects the instants, not a list of them made again per sample
    # (an occurrence of a large fleet's window: some 200,000 changes, thousands of samples).
    changed_at: tuple[datetime, ...] = ()
    gpus: tuple[int, ...] = ()

    def at(self, when: datetime) -> int:
        i = bisect_right(self.changed_at, _utc(when))
        return self.gpus[i - 1] if i else self.initial_gpus


def capacity_over(
    nodes_at_start: Iterable[SchedulerNode], changes: Iterable[NodeChange]
) -> Capacity:
    """The capacity from the nodes as they were when an occurrence began and their changes
    during it, oldest first."""
    nodes = {node.name: node for node in nodes_at_start}
    gpus = initial = schedulable_gpus(nodes.values())
    changed_at, steps = [], []
    for change in changes:
        before = nodes.pop(change.node.name, None)
        if before is not None:
            gpus -= _in_service_gpus(before)
        if not change.removed:
            nodes[change.node.name] = change.node
            gpus += _in_service_gpus(change.node)
        changed_at.append(_utc(change.at))
        steps.append(gpus)
    return Capacity(initial, tuple(changed_at), tuple(steps))


def _utc(at: datetime) -> datetime:
    # Same-zone comparisons of aware datetimes compare wall times; UTC compares instants.
    return at.astimezone(UTC)
