"""The rule, persistent_unfairness: a tenant disadvantaged in at least K of the last M
completed occurrences of a window, whichever windows they were."""

from __future__ import annotations

from collections.abc import Sequence

from observer.detectors.fairness.assessment import WindowAssessment
from observer.detectors.fairness.evidence import describe, rule_words
from observer.domain import Severity, Subject, Symptom
from observer.settings.detectors import FairnessSettings

PERSISTENT_UNFAIRNESS = "persistent_unfairness"


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
    bad = [a for a in recent if (t := a.tenant(tenant)) is not None and t.disadvantaged]
    if len(bad) < rules.persistence_k:
        return None
    summary, evidence = describe(tenant, recent, bad, rules)
    return Symptom(
        detector=PERSISTENT_UNFAIRNESS,
        subject={"tenant": tenant},
        severity=Severity.CRITICAL if len(bad) == rules.persistence_m else Severity.WARNING,
        summary=summary,
        rule=rule_words(rules),
        evidence=evidence,
        since=bad[0].occurrence.start,
    )
