"""Writes reports into reports.output_dir (Markdown, HTML, JSON) and says which days are due
and when the next falls due: `observer report ...` on demand, and the controller's report build
(`apart.py`) once a day, catching up every day it missed (a day whose files exist is not
built again)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from observer.delivery.directory import write_atomically
from observer.errors import ReportError
from observer.metrics import ReportMetrics
from observer.reports.compute.daily import build_daily
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import (
    day_period,
    load_daily,
    load_verdict,
    soak_ended_at,
    soak_started_at,
)
from observer.reports.render.blocks import Rendered
from observer.reports.render.daily import render_daily
from observer.reports.render.verdict import render_verdict
from observer.settings import Settings
from observer.storage.store import Store

SUFFIXES = ("md", "html", "json")


def daily_paths(settings: Settings, day: date, *, partial: bool = False) -> list[Path]:
    """The day's summary files; the day so far is filed apart, so that the day's own summary
    is still built once the day is over."""
    stem = f"daily-{day.isoformat()}{'-so-far' if partial else ''}"
    return [settings.reports.output_dir / f"{stem}.{s}" for s in SUFFIXES]


@dataclass(frozen=True, slots=True)
class Written:
    """A daily summary written: its day, the end of the period it covers, its three files.
    Plain values: the report build's process answers the controller with them."""

    day: date
    ends_at: datetime
    paths: tuple[Path, ...]


def write_daily(
    store: Store, settings: Settings, day: date, now: datetime, *, partial: bool = False
) -> list[Path]:
    """Build `day`'s summary (`partial`: the day so far) and write its files; returns the
    paths of its three forms."""
    return list(write_summary(store, settings, day, now, partial=partial).paths)


def write_summary(
    store: Store, settings: Settings, day: date, now: datetime, *, partial: bool = False
) -> Written:
    """`write_daily`, answering what was written."""
    report = build_daily(load_daily(store, settings, day, now, partial=partial))
    paths = daily_paths(settings, day, partial=report.partial)
    _write(render_daily(report, settings.reports.language), paths)
    return Written(day, report.figures.end, tuple(paths))


def write_verdict(
    store: Store,
    settings: Settings,
    now: datetime,
    metrics: ReportMetrics | None = None,
    *,
    provisional: bool = False,
) -> list[Path]:
    """Build the verdict over the soak so far (whole days; `provisional`: up to `now`) and
    write its three files, named after the soak's last day."""
    try:
        verdict = build_verdict(load_verdict(store, settings, now, provisional=provisional))
        tz = ZoneInfo(verdict.timezone)
        last = (verdict.soak_ended_at - timedelta(microseconds=1)).astimezone(tz).date()
        stem = f"verdict-{last.isoformat()}{'-provisional' if provisional else ''}"
        paths = [settings.reports.output_dir / f"{stem}.{s}" for s in SUFFIXES]
        written = _write(render_verdict(verdict, settings.reports.language), paths)
    except Exception:
        if metrics is not None:
            metrics.report_errors_total.labels("verdict").inc()
        raise
    if metrics is not None:
        metrics.reports_built_total.labels("verdict").inc()
    return written


def yesterday(settings: Settings, now: datetime) -> date:
    return now.astimezone(ZoneInfo(settings.controller.timezone)).date() - timedelta(days=1)


def due_days(store: Store, settings: Settings, now: datetime) -> list[date]:
    """Days whose summary should exist by `now` and does not: every day of the soak up to
    yesterday, yesterday itself only once the local build time has passed."""
    started = soak_started_at(store, settings)
    if started is None:
        return []
    tz = ZoneInfo(settings.controller.timezone)
    local = now.astimezone(tz)
    last = local.date() - timedelta(days=1)
    if local.time() < settings.reports.daily_build_time:
        last -= timedelta(days=1)
    if settings.reports.soak_ended_at is not None:
        last = min(
            last, (soak_ended_at(settings, now) - timedelta(microseconds=1)).astimezone(tz).date()
        )
    day = started.astimezone(tz).date()
    due = []
    while day <= last:
        if day_period(day, tz).end > started and not all(
            p.exists() for p in daily_paths(settings, day)
        ):
            due.append(day)
        day += timedelta(days=1)
    return due


def next_build_at(settings: Settings, now: datetime) -> datetime:
    """The first moment after `now` (UTC) at which a day's summary falls due: the next
    reports.daily_build_time in the platform's timezone. Compared in UTC, so that a build time
    in the hour a clock change repeats or skips is still one moment ahead."""
    tz = ZoneInfo(settings.controller.timezone)
    day = now.astimezone(tz).date()
    while (at := datetime.combine(day, settings.reports.daily_build_time, tz)) <= now:
        day += timedelta(days=1)
    return at.astimezone(UTC)


def _write(rendered: Rendered, paths: list[Path]) -> list[Path]:
    """Each file replaced whole (a reader, or delivery, never sees half a report); the
    CSV files beside the JSON, written last, are not delivered."""
    files = list(zip(paths, (rendered.markdown, rendered.html, rendered.json), strict=True))
    if rendered.csv is not None:
        files.append((paths[-1].with_suffix(".csv"), rendered.csv))
    stem = paths[-1].stem
    files += [(paths[-1].with_name(f"{stem}-{name}.csv"), text) for name, text in rendered.more_csv]
    for path, text in files:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
        except OSError as exc:
            raise ReportError(f"cannot write {path}: {exc.strerror}") from exc
    return paths
