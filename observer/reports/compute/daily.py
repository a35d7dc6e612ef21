"""The daily operational summary of one day in the platform's timezone, with the previous day
and the soak to date beside each figure. Pure: inputs in, a frozen report out; the same
inputs always give the same report."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.expected_wait import ExpectedWait, expected_wait
from observer.reports.compute.figures import PeriodFigures, period_figures
from observer.reports.compute.inference import InferenceFigures, inference_figures
from observer.reports.compute.tasks import TaskRecord, task_records
from observer.reports.compute.tenants import TenantFigures, tenant_figures
from observer.reports.compute.usage import Usage, usage


@dataclass(frozen=True, slots=True)
class DailyInputs:
    """`previous` is None on the soak's first day; `soak` runs from the soak's start to the
    day's end. `layer_blind_max_share`: see period_figures."""

    context: ReportContext
    day: date
    data: PeriodData
    previous: PeriodData | None
    soak: PeriodData
    intervention_match_seconds: float
    layer_blind_max_share: float
    partial: bool = False  # the day so far: `data` ends before the day does


@dataclass(frozen=True, slots=True)
class DailyReport:
    day: date
    timezone: str
    soak_started_at: datetime
    figures: PeriodFigures
    previous_day: PeriodFigures | None
    soak_to_date: PeriodFigures
    tasks: tuple[TaskRecord, ...]  # every run submitted in the day: the per-task appendix
    tenants: TenantFigures  # the day's tenant, queue and quota record
    partial: bool  # the day so far, up to figures.end: its figures will still change
    inference: InferenceFigures | None = None  # None: the inference probe did not run
    # the platform's estimates of waiting jobs' starts and the observer's own
    expected_wait: ExpectedWait = field(default_factory=ExpectedWait)
    usage: Usage = field(default_factory=Usage)  # who used what in the day


def build_daily(inputs: DailyInputs) -> DailyReport:
    def figures(data: PeriodData) -> PeriodFigures:
        return period_figures(
            data, inputs.context, inputs.intervention_match_seconds, inputs.layer_blind_max_share
        )

    day = figures(inputs.data)
    return DailyReport(
        day=inputs.day,
        timezone=inputs.context.calendar.timezone.key,
        soak_started_at=inputs.context.soak_started_at,
        figures=day,
        previous_day=None if inputs.previous is None else figures(inputs.previous),
        soak_to_date=figures(inputs.soak),
        tasks=task_records(inputs.data, inputs.context),
        tenants=tenant_figures(inputs.data, inputs.soak, inputs.context, day),
        partial=inputs.partial,
        inference=inference_figures(
            inputs.data.inference_samples,
            inputs.data.inference_phases,
            inputs.context.calendar,
        ),
        expected_wait=expected_wait(inputs.data.job_estimates, inputs.data.runs),
        usage=usage(inputs.data, inputs.context),
    )
