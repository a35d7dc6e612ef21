"""The daily operational summary of one day in the platform's timezone, with the previous day
and the soak to date beside each figure. Pure: inputs in, a frozen report out; the same
inputs always give the same report."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from observer.reports.build.data import PeriodData, ReportContext
from observer.reports.build.figures import PeriodFigures, period_figures


@dataclass(frozen=True, slots=True)
class DailyInputs:
    """`previous` is None on the soak's first day; `soak` runs from the soak's start to the
    day's end."""

    context: ReportContext
    day: date
    data: PeriodData
    previous: PeriodData | None
    soak: PeriodData
    intervention_match_seconds: float


@dataclass(frozen=True, slots=True)
class DailyReport:
    day: date
    timezone: str
    soak_started_at: datetime
    figures: PeriodFigures
    previous_day: PeriodFigures | None
    soak_to_date: PeriodFigures


def build_daily(inputs: DailyInputs) -> DailyReport:
    context, match = inputs.context, inputs.intervention_match_seconds
    return DailyReport(
        day=inputs.day,
        timezone=context.calendar.timezone.key,
        soak_started_at=context.soak_started_at,
        figures=period_figures(inputs.data, context, match),
        previous_day=(
            None if inputs.previous is None else period_figures(inputs.previous, context, match)
        ),
        soak_to_date=period_figures(inputs.soak, context, match),
    )
