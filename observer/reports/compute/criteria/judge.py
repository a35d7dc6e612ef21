"""Every go-live criterion, in the order the verdict lists them. Pure."""

from __future__ import annotations

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

CRITERIA = (
    "queue_explainable",
    "monitoring_linked",
    "quota_enforced",
    "quota_released",
    "failure_evidence",
    "no_unreleased_resources",
    "no_log_loss",
    "monitoring_lag_bound",
    "no_persistent_unfairness",
    "interventions_audited",
    "tenant_isolation",
    "gpu_health",
    "inference_available",
)
# The criteria a failure of which can be a must fix: the promises no tenant may do without
# (quota, isolation, released GPUs, logs, healthy GPUs). One not observed leaves the decision
# open, whatever else passed.
MUST = (
    "quota_enforced",
    "quota_released",
    "no_unreleased_resources",
    "no_log_loss",
    "tenant_isolation",
    "gpu_health",
)


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
        scheduling.no_persistent_unfairness(soak, context, rules),
        audit.interventions_audited(soak, interventions),
        tenancy.tenant_isolation(soak, context),
        service.gpu_health(soak, context),
        service.inference_available(soak, context),
    )
