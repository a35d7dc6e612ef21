"""The figures of one period, from its stored data, each topic from its module: tasks and
failures, each probe's coverage (tasks), every tenant's jobs (jobs), queue waits (queues),
GPU utilisation and allocation (gpu), the GPUs' health (health), and (from events) alerts,
interventions, findings, deliveries and blind time. Pure. A figure the observer could not
see is None, never 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.events import (
    AlertFigures,
    BlindFigures,
    DeliveryFigures,
    FindingFigures,
    InterventionFigures,
    OwnerStateFigures,
    alert_figures,
    blind_figures,
    delivery_figures,
    finding_figures,
    intervention_figures,
    owner_state_figures,
)
from observer.reports.compute.gpu import GpuFigures, gpu_figures
from observer.reports.compute.health import GpuHealthFigures, gpu_health_figures
from observer.reports.compute.jobs import AllJobFigures, all_job_figures
from observer.reports.compute.queues import QueueFigures, queue_figures
from observer.reports.compute.tasks import (
    ProbeCoverage,
    TaskFigures,
    coverage_figures,
    task_figures,
)


@dataclass(frozen=True, slots=True)
class PeriodFigures:
    start: datetime
    end: datetime
    tasks: TaskFigures
    coverage: Mapping[str, ProbeCoverage]  # by probe
    all_jobs: AllJobFigures | None  # None: no listing of every tenant's jobs covered it
    queue: QueueFigures
    gpu: GpuFigures
    health: GpuHealthFigures
    owners: OwnerStateFigures
    alerts: AlertFigures
    interventions: InterventionFigures
    findings: FindingFigures
    blind: BlindFigures
    deliveries: DeliveryFigures


def period_figures(
    data: PeriodData,
    context: ReportContext,
    intervention_match_seconds: float,
    layer_blind_max_share: float,
) -> PeriodFigures:
    """`layer_blind_max_share`: a node whose owner state was unknown longer than this share
    of the period did not know it (reports.verdict_layer_blind_max_share)."""
    return PeriodFigures(
        start=data.period.start,
        end=data.period.end,
        tasks=task_figures(data.runs, data.findings, data.node_changes),
        coverage=coverage_figures(data.runs, data.probe_skips),
        all_jobs=all_job_figures(data.job_slots, data.period),
        queue=queue_figures(data.runs, data.queue_samples, data.job_slots, data.pending_times),
        gpu=gpu_figures(data, context),
        health=gpu_health_figures(data),
        owners=owner_state_figures(data, layer_blind_max_share),
        alerts=alert_figures(data, context),
        interventions=intervention_figures(data, intervention_match_seconds),
        findings=finding_figures(data.findings, data.period.start, data.period.end),
        blind=blind_figures(data, context),
        deliveries=delivery_figures(data.deliveries, context),
    )
