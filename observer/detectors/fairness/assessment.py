"""One occurrence of a window assessed per tenant: its fairness probes' waits against the
other tenants' of the same launch batch, the GPUs it received against its entitlement while
its jobs were held pending, the stretch in which it was held short of the most GPUs and who
held them meanwhile, and the reason, in words, it was or was not disadvantaged."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from observer.detectors.fairness.entitlement import Capacity, Guarantee, entitlements, jain_index
from observer.detectors.scheduler_terms import QUOTA_REASONS
from observer.domain import Outcome, ProbeRun, QueueState, RunState
from observer.probes.windows import Occurrence
from observer.settings.detectors import FairnessSettings


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
        reasons.append(stretch_words(stretch))
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


def stretch_words(stretch: Stretch) -> str:
    """The stretch in words, for a tenant's reason and the symptom's summary: how long, not
    when, which its evidence gives as instants that readers see in the platform's zone."""
    held = "; ".join(_holder_words(holder) for holder in stretch.holders)
    minutes = (stretch.end - stretch.start).total_seconds() / 60
    return (
        f"{stretch.short_gpus:.1f} GPUs short for {minutes:.0f} min "
        f"({stretch.samples} samples)" + (f", while {held}" if held else "")
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
