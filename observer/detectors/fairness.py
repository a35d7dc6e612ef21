"""Persistent queue unfairness, from stored probe runs and scheduler state.

Per occurrence of a window (Monday's night, Tuesday's night...) and per tenant:
- the waits of the fairness probes (identical one-GPU jobs every tenant submits at the same
  moment), each compared with the other tenants' probes of the same launch batch;
- the GPUs the tenant received against its entitlement, over the queue samples in which its
  jobs had been pending longer than the wait rule (a job submitted just before a sample has
  not yet been through a scheduling cycle: its wait says nothing about the scheduler). The
  entitlement is weighted max-min fair given every tenant's demand (running + pending GPUs)
  and the GPUs in service at that sample: nobody is entitled to more than it asks, and what
  one tenant does not ask for is shared by the others in proportion to their weights. Where
  the tenant's queue guarantees it GPUs (a Kueue ClusterQueue's nominal quota, a Volcano
  Queue's deserved GPUs) the entitlement is that guarantee, capped by its demand, plus its
  weighted share of what the guarantees leave, up to its borrowing limit;
- Jain's fairness index over the tenants' received/entitled ratios;
- for a tenant held short: the stretch of samples in which it was (start, end, GPUs short)
  and who held the GPUs then (the tenants beyond their entitlement, by priority and user).

A tenant is *disadvantaged* in an occurrence when its probes waited longer than the others'
in most launch batches, or when it received less than its entitlement (within a tolerance)
while its jobs were held pending, unless it *over-asked*: it received its entitlement and still
wanted more, so its waits are the price of asking beyond its share, not the scheduler's doing.

The rule, persistent_unfairness (a condition, opened by the tracker): a tenant disadvantaged in
at least K of the last M completed occurrences of a window; one bad night is not a finding, a
pattern across nights is.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from observer.detectors.scheduler_terms import QUOTA_REASONS, in_service
from observer.domain import (
    JsonValue,
    Outcome,
    ProbeRun,
    QueueState,
    RunState,
    SchedulerNode,
    Severity,
    Subject,
    Symptom,
)
from observer.probes.windows import Occurrence
from observer.settings.detectors import FairnessSettings

PERSISTENT_UNFAIRNESS = "persistent_unfairness"


# --- entitlement and fairness index -------------------------------------------------------


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


# --- one occurrence ---------------------------------------------------------------------------


class QueueSample(Protocol):
    """One tenant's queue at one sampling instant (storage's StoredQueueSample)."""

    @property
    def at(self) -> datetime: ...
    @property
    def state(self) -> QueueState: ...


NOMINAL_QUOTA, WEIGHTED_SHARE = "nominal_quota", "weighted_share"


@dataclass(frozen=True, slots=True)
class Holder:
    """A tenant that held GPUs beyond its entitlement through a stretch: the mean GPUs beyond,
    and the mean running GPUs of its jobs by priority (QOS, priorityClassName) and by user."""

    tenant: str
    beyond_gpus: float
    by_priority: Mapping[str, float]
    by_user: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Stretch:
    """Consecutive queue samples in which a tenant was held below its entitlement: from the
    first to the last, the mean GPUs it was short, and who held the GPUs meanwhile."""

    start: datetime
    end: datetime
    samples: int
    short_gpus: float
    received_gpus: float
    entitled_gpus: float
    holders: tuple[Holder, ...]  # most GPUs beyond first


@dataclass(frozen=True, slots=True)
class TenantAssessment:
    """One tenant in one occurrence. Waits are medians over the tenant's fairness probes (a
    probe that never started counts with the wait it had when it ended or was assessed, a
    lower bound); shares are means over the queue samples in which the tenant's jobs had been
    pending longer than the wait rule."""

    tenant: str
    weight: float
    probes: int
    unstarted_probes: int
    median_wait_seconds: float | None
    mean_wait_seconds: float | None
    others_median_wait_seconds: float | None  # the other tenants' probes, same batches
    batches: int  # launch batches with a probe of this tenant and of another
    longer_wait_batches: int  # of those, where this tenant waited beyond the rule
    pending_samples: int
    demand_gpus: float | None
    received_gpus: float | None
    entitled_gpus: float | None
    over_ask: bool
    disadvantaged: bool
    reason: str
    # "nominal_quota" where its queue guaranteed it GPUs in most of its pending samples,
    # else "weighted_share"; with the guarantee's mean nominal GPUs and borrowing limit
    basis: str = WEIGHTED_SHARE
    nominal_gpus: float | None = None
    borrowing_limit_gpus: float | None = None
    stretch: Stretch | None = None  # the longest run of samples it was held short, if any

    @property
    def share_ratio(self) -> float | None:
        if self.received_gpus is None or not self.entitled_gpus:
            return None
        return self.received_gpus / self.entitled_gpus


@dataclass(frozen=True, slots=True)
class WindowAssessment:
    occurrence: Occurrence
    tenants: tuple[TenantAssessment, ...]  # by tenant name
    batches: int
    contention_samples: int  # samples in which some tenant's jobs had waited beyond the rule
    fairness_index: float | None  # Jain's, over received/entitled in contention samples

    def tenant(self, name: str) -> TenantAssessment | None:
        return next((t for t in self.tenants if t.tenant == name), None)


def assess_window(
    occurrence: Occurrence,
    fairness_runs: Sequence[ProbeRun],
    queue_samples: Sequence[QueueSample],
    weights: Mapping[str, float],
    capacity: Capacity,
    rules: FairnessSettings,
    as_of: datetime | None = None,
    quotas: Mapping[str, int] | None = None,
) -> WindowAssessment:
    """Assess one occurrence from its fairness probe runs and the queue samples taken in it.
    `capacity` is the GPUs tenants share at each sample (see `capacity_over`); GPUs held by
    tenants without a weight (other users) are taken off it first, as they are outside the
    contract. A tenant's demand counts up to its quota: GPUs its own quota withholds are
    not the scheduler's unfairness. A probe still pending counts as waiting until `as_of`
    (default: the occurrence's end)."""
    as_of = as_of or occurrence.end
    waits = [w for run in fairness_runs if (w := _wait(run, as_of)) is not None]
    batches = _batches(waits, rules.batch_gap_seconds)
    samples = _group_samples(
        queue_samples, weights, quotas or {}, capacity, rules.disadvantage_wait_seconds
    )
    tenants = sorted({w.tenant for w in waits} | {t for s in samples for t in s.demand})
    assessed = tuple(
        _assess_tenant(tenant, weights.get(tenant, 0.0), waits, batches, samples, rules)
        for tenant in tenants
    )
    contention = [s for s in samples if s.held]
    received = {t: sum(s.running.get(t, 0) for s in contention) for t in tenants}
    entitled = {t: sum(s.entitled.get(t, 0.0) for s in contention) for t in tenants}
    return WindowAssessment(
        occurrence=occurrence,
        tenants=assessed,
        batches=len(batches),
        contention_samples=len(contention),
        fairness_index=jain_index(received[t] / entitled[t] for t in tenants if entitled[t]),
    )


@dataclass(frozen=True, slots=True)
class _Wait:
    tenant: str
    submitted_at: datetime
    seconds: float
    started: bool  # False: a lower bound, the probe never started


@dataclass(frozen=True, slots=True)
class _Sample:
    at: datetime
    demand: Mapping[str, int]
    running: Mapping[str, int]
    entitled: Mapping[str, float]
    held: frozenset[str]  # tenants whose jobs had been pending longer than the wait rule
    guarantees: Mapping[str, Guarantee]
    by_priority: Mapping[str, Mapping[str, int]]  # tenant -> priority -> running GPUs
    by_user: Mapping[str, Mapping[str, int]]


def _wait(run: ProbeRun, as_of: datetime) -> _Wait | None:
    if run.submitted_at is None:
        return None
    if run.started_at is not None:
        seconds, started = (run.started_at - run.submitted_at).total_seconds(), True
    elif run.state is RunState.PENDING or run.outcome in (Outcome.TIMED_OUT, Outcome.CANCELLED):
        # It waited at least until it was given up or assessed.
        end = run.finished_at if run.finished_at is not None else as_of
        seconds, started = (end - run.submitted_at).total_seconds(), False
    else:
        return None  # refused, lost or never confirmed: it never waited in the queue
    # Time held by the tenant's own quota is its limit at work, not the scheduler's choice.
    seconds -= sum(t for reason, t in run.pending_reasons.items() if reason in QUOTA_REASONS)
    return _Wait(run.tenant, run.submitted_at, max(seconds, 0.0), started)


def _batches(waits: Sequence[_Wait], gap_seconds: float) -> list[list[_Wait]]:
    batches: list[list[_Wait]] = []
    for wait in sorted(waits, key=lambda w: w.submitted_at):
        last = batches[-1][-1].submitted_at if batches else None
        if last is not None and (wait.submitted_at - last).total_seconds() <= gap_seconds:
            batches[-1].append(wait)
        else:
            batches.append([wait])
    return batches


def _group_samples(
    queue_samples: Sequence[QueueSample],
    weights: Mapping[str, float],
    quotas: Mapping[str, int],
    capacity: Capacity,
    held_seconds: float,
) -> list[_Sample]:
    by_at: dict[datetime, list[QueueState]] = {}
    for sample in queue_samples:
        by_at.setdefault(sample.at, []).append(sample.state)
    samples = []
    for at, states in sorted(by_at.items()):
        running: dict[str, int] = {}
        pending: dict[str, int] = {}
        held: set[str] = set()
        guarantees: dict[str, Guarantee] = {}
        by_priority: dict[str, Counter[str]] = {}
        by_user: dict[str, Counter[str]] = {}
        for state in states:
            running[state.tenant] = running.get(state.tenant, 0) + state.running_gpus
            pending[state.tenant] = pending.get(state.tenant, 0) + state.pending_gpus
            if state.pending_gpus and state.longest_wait_seconds > held_seconds:
                held.add(state.tenant)
            if state.nominal_gpus is not None:  # the tenant's, the same on each of its rows
                guarantees[state.tenant] = Guarantee(state.nominal_gpus, state.borrowing_limit_gpus)
            by_priority.setdefault(state.tenant, Counter()).update(state.running_gpus_by_priority)
            by_user.setdefault(state.tenant, Counter()).update(state.running_gpus_by_user)
        others = sum(gpus for tenant, gpus in running.items() if tenant not in weights)
        demand = {
            t: min(running[t] + pending[t], quotas.get(t, running[t] + pending[t]))
            for t in running
            if t in weights
        }
        mine = {t: g for t, g in guarantees.items() if t in demand}
        samples.append(
            _Sample(
                at=at,
                demand=demand,
                running={t: running[t] for t in demand},
                entitled=entitlements(weights, demand, capacity.at(at) - others, mine),
                held=frozenset(held & demand.keys()),
                guarantees=mine,
                by_priority=by_priority,
                by_user=by_user,
            )
        )
    return samples


def _assess_tenant(
    tenant: str,
    weight: float,
    waits: Sequence[_Wait],
    batches: Sequence[Sequence[_Wait]],
    samples: Sequence[_Sample],
    rules: FairnessSettings,
) -> TenantAssessment:
    mine = [w.seconds for w in waits if w.tenant == tenant]
    compared = longer = 0
    others_medians: list[float] = []
    for batch in batches:
        own = [w for w in batch if w.tenant == tenant]
        others = [w for w in batch if w.tenant != tenant]
        if not own or not others:
            continue
        compared += 1
        own_low = statistics.median(w.seconds for w in own)
        # An unstarted probe's wait is a lower bound: for "longer than the others" the others'
        # waits count as unbounded above, so an unstarted other never makes this tenant late.
        others_high = statistics.median(w.seconds if w.started else math.inf for w in others)
        others_medians.append(statistics.median(w.seconds for w in others))
        if own_low - others_high > rules.disadvantage_wait_seconds:
            longer += 1
    pending = [s for s in samples if tenant in s.held]
    demand = _mean(s.demand[tenant] for s in pending)
    received = _mean(s.running[tenant] for s in pending)
    entitled = _mean(s.entitled[tenant] for s in pending)
    floor = 1 - rules.disadvantage_share_tolerance
    short = received is not None and entitled is not None and received < entitled * floor
    over_ask = (
        received is not None
        and entitled is not None
        and demand is not None
        and not short
        and demand > entitled
    )
    late = compared > 0 and longer * 2 > compared
    reasons = []
    if late:
        reasons.append(
            f"waited more than {rules.disadvantage_wait_seconds:g} s longer than the other "
            f"tenants' probes in {longer} of {compared} launch batches"
        )
    if short:
        reasons.append(
            f"received {received:.1f} of its entitled {entitled:.1f} GPUs while asking {demand:.1f}"
        )
    if over_ask:
        reasons.append(
            f"asked for more than its share: received {received:.1f} of its entitled "
            f"{entitled:.1f} GPUs while asking {demand:.1f}"
        )
    guaranteed = [s.guarantees[tenant] for s in pending if tenant in s.guarantees]
    basis = NOMINAL_QUOTA if guaranteed and len(guaranteed) * 2 >= len(pending) else WEIGHTED_SHARE
    limits = [g.borrowing_limit_gpus for g in guaranteed]
    stretch = _stretch(tenant, samples, floor) if short else None
    if stretch is not None:
        reasons.append(_stretch_words(stretch))
    return TenantAssessment(
        tenant=tenant,
        weight=weight,
        probes=len(mine),
        unstarted_probes=sum(1 for w in waits if w.tenant == tenant and not w.started),
        median_wait_seconds=statistics.median(mine) if mine else None,
        mean_wait_seconds=statistics.fmean(mine) if mine else None,
        others_median_wait_seconds=statistics.median(others_medians) if others_medians else None,
        batches=compared,
        longer_wait_batches=longer,
        pending_samples=len(pending),
        demand_gpus=demand,
        received_gpus=received,
        entitled_gpus=entitled,
        over_ask=over_ask,
        disadvantaged=(late or short) and not over_ask,
        reason="; ".join(reasons) or "within its share and waiting no longer than the others",
        basis=basis,
        nominal_gpus=_mean(g.nominal_gpus for g in guaranteed) if basis == NOMINAL_QUOTA else None,
        borrowing_limit_gpus=(
            _mean(x for x in limits if x is not None)
            if basis == NOMINAL_QUOTA and None not in limits
            else None
        ),
        stretch=stretch,
    )


def _stretch(tenant: str, samples: Sequence[_Sample], floor: float) -> Stretch | None:
    """The run of consecutive samples of the tenant's in which it was held (pending beyond the
    wait rule) below its entitlement that lost it the most GPU-samples; a sample in which it
    was not held short ends a run."""
    runs: list[list[_Sample]] = [[]]
    for sample in samples:
        if tenant not in sample.demand:
            continue
        if tenant in sample.held and sample.running[tenant] < sample.entitled[tenant] * floor:
            runs[-1].append(sample)
        elif runs[-1]:
            runs.append([])
    worst = max(runs, key=lambda run: sum(s.entitled[tenant] - s.running[tenant] for s in run))
    if not worst:
        return None
    n = len(worst)
    holders = []
    for other in sorted({t for s in worst for t in s.demand} - {tenant}):
        beyond = sum(s.running.get(other, 0) - s.entitled.get(other, 0.0) for s in worst) / n
        if beyond <= 0:
            continue
        holders.append(
            Holder(
                tenant=other,
                beyond_gpus=beyond,
                by_priority=_mean_by(s.by_priority.get(other, {}) for s in worst),
                by_user=_mean_by(s.by_user.get(other, {}) for s in worst),
            )
        )
    received = sum(s.running[tenant] for s in worst) / n
    entitled = sum(s.entitled[tenant] for s in worst) / n
    return Stretch(
        start=worst[0].at,
        end=worst[-1].at,
        samples=n,
        short_gpus=entitled - received,
        received_gpus=received,
        entitled_gpus=entitled,
        holders=tuple(sorted(holders, key=lambda h: (-h.beyond_gpus, h.tenant))),
    )


def _mean_by(counts: Iterable[Mapping[str, int]]) -> dict[str, float]:
    """Mean GPUs per name over the stretch's samples (a name absent from a sample held none)."""
    rows = list(counts)
    total: Counter[str] = Counter()
    for row in rows:
        total.update(row)
    return {name: gpus / len(rows) for name, gpus in total.most_common()}


def _stretch_words(stretch: Stretch) -> str:
    held = "; ".join(_holder_words(holder) for holder in stretch.holders)
    return (
        f"{stretch.short_gpus:.1f} GPUs short from {_utc(stretch.start):%Y-%m-%d %H:%M} to "
        f"{_utc(stretch.end):%H:%M} UTC ({stretch.samples} samples)"
        + (f", while {held}" if held else "")
    )


def _holder_words(holder: Holder) -> str:
    whose = [
        f"{kind} " + ", ".join(f"{name} {gpus:.1f}" for name, gpus in by.items())
        for kind, by in (("priority", holder.by_priority), ("user", holder.by_user))
        if by
    ]
    words = f"{holder.tenant} held {holder.beyond_gpus:.1f} GPUs beyond its share"
    return words + (f" ({'; '.join(whose)})" if whose else "")


def _mean(values: Iterable[float]) -> float | None:
    xs = list(values)
    return statistics.fmean(xs) if xs else None


# --- persistence --------------------------------------------------------------------------


def evaluate(assessments: Sequence[WindowAssessment], rules: FairnessSettings) -> list[Symptom]:
    """persistent_unfairness symptoms from completed window occurrences, whichever window
    each was: a tenant disadvantaged in at least K of the last M. A pattern across a peak and
    two nights counts as much as one across three nights; the evidence names each window."""
    recent = sorted(assessments, key=lambda a: a.occurrence.end)[-rules.persistence_m :]
    tenants = sorted({t.tenant for a in recent for t in a.tenants})
    return [s for tenant in tenants if (s := _persistence(tenant, recent, rules)) is not None]


def covers(assessments: Sequence[WindowAssessment], detector: str, subject: Subject) -> bool:
    """Whether an evaluation of these assessments could see a persistent_unfairness condition:
    any completed occurrence says something about every tenant (one absent from it was not
    disadvantaged there)."""
    return detector == PERSISTENT_UNFAIRNESS and bool(assessments)


def _persistence(
    tenant: str, recent: Sequence[WindowAssessment], rules: FairnessSettings
) -> Symptom | None:
    k, m = rules.persistence_k, rules.persistence_m
    views = [(a, a.tenant(tenant)) for a in recent]
    bad = [a for a, t in views if t is not None and t.disadvantaged]
    if len(bad) < k:
        return None
    everywhere = len(bad) == m
    windows = sorted({a.occurrence.window for a in bad})
    worst = _worst_stretch(tenant, bad)
    favoured = _favoured_with_longer_waits(tenant, bad, rules)
    summary = (
        f"tenant {tenant} was disadvantaged in {len(bad)} of the last {len(recent)} "
        f"windows ({', '.join(windows)})"
    )
    if worst is not None:
        summary += f"; worst stretch: {_stretch_words(worst[1])}"
    for other in favoured:
        summary += (
            f"; {other['tenant']} waited longer but is not disadvantaged: it received "
            f"{other['received_gpus']:.1f} of its entitled {other['entitled_gpus']:.1f} GPUs, "
            "more than its share"
        )
    return Symptom(
        detector=PERSISTENT_UNFAIRNESS,
        subject={"tenant": tenant},
        severity=Severity.CRITICAL if everywhere else Severity.WARNING,
        summary=summary,
        rule=f"disadvantaged in at least {k} of the last {m} completed window occurrences: "
        f"its fairness probes waited more than {rules.disadvantage_wait_seconds:g} s "
        f"longer than the other tenants' in most launch batches, or it received less than "
        f"{1 - rules.disadvantage_share_tolerance:.0%} of its entitled GPUs (its queue's "
        f"nominal quota where one guarantees it GPUs, else weighted max-min fair given every "
        f"tenant's demand) while its jobs had been pending more than "
        f"{rules.disadvantage_wait_seconds:g} s; never when it received its share and asked "
        "for more",
        evidence={
            "tenant": tenant,
            "windows": list(windows),
            "disadvantaged_occurrences": len(bad),
            "occurrences_weighed": len(recent),
            "persistence_k": k,
            "persistence_m": m,
            "occurrences": [_occurrence_evidence(a, t) for a, t in views],
            "worst_stretch": (
                {
                    "window": worst[0].occurrence.window,
                    "entitlement_basis": worst[2],
                    **_stretch_evidence(worst[1]),
                }
                if worst is not None
                else None
            ),
            "favoured_with_longer_waits": favoured,
        },
        since=bad[0].occurrence.start,
    )


def _worst_stretch(
    tenant: str, bad: Sequence[WindowAssessment]
) -> tuple[WindowAssessment, Stretch, str] | None:
    """The stretch, of all the disadvantaged occurrences', that lost the tenant the most GPUs,
    with the basis of its entitlement there."""
    found = [
        (a, t.stretch, t.basis)
        for a in bad
        if (t := a.tenant(tenant)) is not None and t.stretch is not None
    ]
    return max(found, key=lambda f: f[1].short_gpus * f[1].samples, default=None)


def _favoured_with_longer_waits(
    tenant: str, bad: Sequence[WindowAssessment], rules: FairnessSettings
) -> list[dict[str, JsonValue]]:
    """The other tenants whose probes waited longer than the others' in an occurrence where
    `tenant` was disadvantaged, yet received at least their entitlement there: why the one
    with longer waits is not the disadvantaged one. One per tenant, where its waits were
    longest against the others'."""
    floor = 1 - rules.disadvantage_share_tolerance
    best: dict[str, tuple[float, dict[str, JsonValue]]] = {}
    for assessment in bad:
        for other in assessment.tenants:
            if other.tenant == tenant or other.disadvantaged:
                continue
            mine, theirs = other.median_wait_seconds, other.others_median_wait_seconds
            received, entitled = other.received_gpus, other.entitled_gpus
            if mine is None or theirs is None or mine <= theirs:
                continue
            if received is None or not entitled or received < entitled * floor:
                continue
            gap = mine - theirs
            if other.tenant not in best or gap > best[other.tenant][0]:
                best[other.tenant] = (
                    gap,
                    {
                        "tenant": other.tenant,
                        "window": assessment.occurrence.window,
                        "start": assessment.occurrence.start.isoformat(),
                        "median_wait_seconds": _round(mine),
                        "others_median_wait_seconds": _round(theirs),
                        "received_gpus": _round(received),
                        "entitled_gpus": _round(entitled),
                        "demand_gpus": _round(other.demand_gpus),
                        "basis": other.basis,
                        "over_ask": other.over_ask,
                    },
                )
    return [best[name][1] for name in sorted(best)]


def _stretch_evidence(stretch: Stretch) -> dict[str, JsonValue]:
    return {
        "start": _utc(stretch.start).isoformat(),
        "end": _utc(stretch.end).isoformat(),
        "samples": stretch.samples,
        "short_gpus": _round(stretch.short_gpus),
        "received_gpus": _round(stretch.received_gpus),
        "entitled_gpus": _round(stretch.entitled_gpus),
        "holders": [
            {
                "tenant": h.tenant,
                "beyond_gpus": _round(h.beyond_gpus),
                "by_priority": {k: _round(v) for k, v in h.by_priority.items()},
                "by_user": {k: _round(v) for k, v in h.by_user.items()},
            }
            for h in stretch.holders
        ],
    }


def _occurrence_evidence(
    assessment: WindowAssessment, tenant: TenantAssessment | None
) -> dict[str, JsonValue]:
    occurrence = assessment.occurrence
    evidence: dict[str, JsonValue] = {
        "window": occurrence.window,
        "start": occurrence.start.isoformat(),
        "end": occurrence.end.isoformat(),
        "fairness_index": _round(assessment.fairness_index),
        "launch_batches": assessment.batches,
        "contention_samples": assessment.contention_samples,
    }
    if tenant is None:
        return {**evidence, "disadvantaged": False, "reason": "no probes and no jobs"}
    return {
        **evidence,
        "disadvantaged": tenant.disadvantaged,
        "over_ask": tenant.over_ask,
        "reason": tenant.reason,
        "probes": tenant.probes,
        "unstarted_probes": tenant.unstarted_probes,
        "median_wait_seconds": _round(tenant.median_wait_seconds),
        "others_median_wait_seconds": _round(tenant.others_median_wait_seconds),
        "longer_wait_batches": tenant.longer_wait_batches,
        "compared_batches": tenant.batches,
        "pending_samples": tenant.pending_samples,
        "demand_gpus": _round(tenant.demand_gpus),
        "received_gpus": _round(tenant.received_gpus),
        "entitled_gpus": _round(tenant.entitled_gpus),
        "share_ratio": _round(tenant.share_ratio),
        "entitlement_basis": tenant.basis,
        "nominal_gpus": _round(tenant.nominal_gpus),
        "borrowing_limit_gpus": _round(tenant.borrowing_limit_gpus),
        "stretch": _stretch_evidence(tenant.stretch) if tenant.stretch is not None else None,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _utc(at: datetime) -> datetime:
    # Same-zone comparisons of aware datetimes compare wall times; UTC compares instants.
    return at.astimezone(UTC)
