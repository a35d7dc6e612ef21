"""Every go-live criterion, in the order the verdict lists them. Pure."""

from __future__ import annotations

from typing import get_args

from observer.reports.compute.criteria import (
    audit,
    monitoring,
    release,
    scheduling,
    service,
    tenancy,
)
from observer.reports.compute.criteria.result import CriterionResult, VerdictRules
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.events import InterventionFigures, OwnerStateFigures
from observer.settings.reports import Criterion

# In the order the verdict lists them; the settings name them (reports.verdict_criteria_layers).
CRITERIA: tuple[Criterion, ...] = get_args(Criterion)


def judge(
    soak: PeriodData,
    context: ReportContext,
    rules: VerdictRules,
    interventions: InterventionFigures,
    owners: OwnerStateFigures,
) -> tuple[CriterionResult, ...]:
    """Every criterion, in the order of CRITERIA, on the evidence alone (layers.observed then
    judges what the soak could not see)."""
    return (
        scheduling.queue_explainable(soak, context, rules),
        monitoring.monitoring_linked(soak, context),
        tenancy.quota_enforced(soak.runs),
        release.quota_released(soak, context, rules),
        audit.failure_evidence(soak, rules),
        release.no_unreleased_resources(soak, context, owners),
        monitoring.no_log_loss(soak, context),
        monitoring.monitoring_lag_bound(soak, context, rules),
        monitoring.alerting_chain(soak, context),
        scheduling.no_persistent_unfairness(soak, context, rules),
        audit.interventions_audited(soak, interventions),
        tenancy.tenant_isolation(soak, context),
        service.gpu_health(soak, context),
        service.inference_available(soak, context),
    )
