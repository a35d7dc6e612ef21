"""Later optimisations the soak's data shows beside the criteria: pools whose GPUs are
allocated far more than they are used, tenants whose jobs wait long on their own quota. Each is
a criterion-like result, failed and classed later optimisation, and only when it holds: it
names what to tune after launch and never blocks one. Pure."""

from __future__ import annotations

from observer.domain import Comparison, Expectation, compare_seconds, compare_shares
from observer.probes.outcome import is_quota_reason
from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    Status,
    Subjects,
    VerdictRules,
)
from observer.reports.compute.data import PeriodData
from observer.reports.compute.gpu import GpuFigures
from observer.reports.compute.notes import Note

LOW_UTILISATION = "low_utilisation"
LONG_QUOTA_HOLDS = "long_quota_holds"


def later_checks(
    gpu: GpuFigures, soak: PeriodData, rules: VerdictRules
) -> tuple[CriterionResult, ...]:
    checks = (_low_utilisation(gpu, rules), _long_quota_holds(soak, rules))
    return tuple(c for c in checks if c is not None)


def _low_utilisation(gpu: GpuFigures, rules: VerdictRules) -> CriterionResult | None:
    """Utilisation averages over every GPU of the pool, allocated or not: a pool whose
    allocated GPUs all ran flat out would average its allocated share. The lowest use of
    its allocation first."""
    limit = rules.later_utilisation_share_of_allocated
    low: dict[str, tuple[float, float, float]] = {}
    for pool, use in gpu.by_pool.items():
        percent = use.utilization.avg_percent if use.utilization else None
        allocated = use.allocated_share
        if percent is None or not allocated:
            continue
        used = percent / 100.0
        # Below the limit as both are written in percent beside each other.
        if compare_shares(used / allocated, limit) is Comparison.LESS:
            low[pool] = (used, allocated, used / allocated)
    if not low:
        return None
    evidence = [
        Note(
            "ev.low_utilisation",
            {
                "pool": pool,
                "utilisation_share": used,
                "allocated_share": allocated,
                "used_share": used_of_allocated,
                "limit_share": limit,
            },
        )
        for pool, (used, allocated, used_of_allocated) in sorted(low.items(), key=lambda p: p[1][2])
    ]
    return _later(LOW_UTILISATION, evidence, Subjects(pools=tuple(sorted(low))))


def _long_quota_holds(soak: PeriodData, rules: VerdictRules) -> CriterionResult | None:
    """The longest hold by its own quota of each tenant's work: a probe's time pending for a
    quota reason (not the quota probe's, which is meant to be held), and the longest wait of
    a queue whose every pending job waits for a quota reason. The longest first."""
    longest: dict[str, float] = {}

    def held(tenant: str, seconds: float) -> None:
        longest[tenant] = max(longest.get(tenant, 0.0), seconds)

    for run in soak.runs:
        if run.expectation is not Expectation.BLOCKED:
            held(run.tenant, sum(t for r, t in run.pending_reasons.items() if is_quota_reason(r)))
    for sample in soak.queue_samples:
        reasons = sample.state.pending_reasons
        if reasons and all(is_quota_reason(r) for r in reasons):
            held(sample.state.tenant, sample.state.longest_wait_seconds)
    bound = rules.later_quota_hold_seconds
    long = {
        tenant: seconds
        for tenant, seconds in longest.items()
        if compare_seconds(seconds, bound) is Comparison.MORE
    }
    if not long:
        return None
    evidence = [
        Note("ev.quota_hold", {"tenant": t, "longest_seconds": s, "limit_seconds": bound})
        for t, s in sorted(long.items(), key=lambda ts: (-ts[1], ts[0]))
    ]
    return _later(LONG_QUOTA_HOLDS, evidence, Subjects(tenants=tuple(sorted(long))))


def _later(name: str, evidence: list[Note], subjects: Subjects) -> CriterionResult:
    return CriterionResult(
        criterion=name,
        status=Status.FAIL,
        failure_class=FailureClass.LATER_OPTIMISATION,
        class_reason=Note(f"class.{name}.later_optimisation"),
        evidence=tuple(evidence),
        findings=(),
        subjects=subjects,
    )
