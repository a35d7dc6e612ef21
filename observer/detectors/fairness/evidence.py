"""What a persistent_unfairness symptom says: its summary, its rule in words, and its evidence
(each weighed occurrence as the tenant saw it, the stretch that lost it the most GPUs and who
held them, and the tenants whose probes waited longer yet were not held short)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from observer.detectors.fairness.assessment import (
    Stretch,
    TenantAssessment,
    WindowAssessment,
    stretch_words,
)
from observer.domain import Comparison, JsonValue, compare, written
from observer.settings.detectors import FairnessSettings

# A tenant that waited longer yet was not disadvantaged received at least its share less the
# rule's tolerance: possibly less than its share, which its sentence then says.
_AGAINST_SHARE = {
    Comparison.LESS: "less than its share but within the rule's tolerance",
    Comparison.EQUAL: "its share",
    Comparison.MORE: "more than its share",
}


def describe(
    tenant: str,
    recent: Sequence[WindowAssessment],
    bad: Sequence[WindowAssessment],
    rules: FairnessSettings,
) -> tuple[str, dict[str, JsonValue]]:
    """The summary and evidence of a tenant disadvantaged in `bad` of the `recent`
    occurrences."""
    windows = sorted({a.occurrence.window for a in bad})
    worst = _worst_stretch(tenant, bad)
    favoured = _favoured_with_longer_waits(tenant, bad, rules)
    summary = (
        f"tenant {tenant} was disadvantaged in {len(bad)} of the last {len(recent)} "
        f"windows ({', '.join(windows)})"
    )
    if worst is not None:
        summary += f"; worst stretch: {stretch_words(worst[1])}"
    for other in favoured:
        received, entitled = float(other["received_gpus"]), float(other["entitled_gpus"])
        summary += (
            f"; {other['tenant']} waited longer but is not disadvantaged: it received "
            f"{written(received)} of its entitled {written(entitled)} GPUs, "
            + _AGAINST_SHARE[compare(received, entitled)]
        )
    evidence: dict[str, JsonValue] = {
        "tenant": tenant,
        "windows": list(windows),
        "disadvantaged_occurrences": len(bad),
        "occurrences_weighed": len(recent),
        "persistence_k": rules.persistence_k,
        "persistence_m": rules.persistence_m,
        "occurrences": [_occurrence_evidence(a, a.tenant(tenant)) for a in recent],
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
    }
    return summary, evidence


def rule_words(rules: FairnessSettings) -> str:
    """The rule, in words, at the thresholds of `rules`."""
    return (
        f"disadvantaged in at least {rules.persistence_k} of the last {rules.persistence_m} "
        "completed window occurrences: "
        f"its fairness probes waited more than {rules.disadvantage_wait_seconds:g} s "
        f"longer than the other tenants' in most launch batches, or it received less than "
        f"{1 - rules.disadvantage_share_tolerance:.0%} of its entitled GPUs (its queue's "
        f"nominal quota where one guarantees it GPUs, else weighted max-min fair given every "
        f"tenant's demand) while its jobs had been pending more than "
        f"{rules.disadvantage_wait_seconds:g} s; never when it received its share and asked "
        "for more"
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
        "start": stretch.start.astimezone(UTC).isoformat(),
        "end": stretch.end.astimezone(UTC).isoformat(),
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
