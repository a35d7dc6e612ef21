"""The headline figures as a report's table rows show them, shared by the daily summary and
the verdict."""

from __future__ import annotations

from collections.abc import Callable

from observer.reports.compute.daily import DailyReport
from observer.reports.compute.events import PartBlind
from observer.reports.compute.figures import PeriodFigures
from observer.reports.compute.gpu import UtilizationStats
from observer.reports.compute.jobs import AllJobFigures
from observer.reports.compute.verdict import Verdict
from observer.reports.render.i18n import Words


def daily_title(report: DailyReport, w: Words) -> str:
    day = w.day(report.day)
    return w("title.daily_partial", day=day) if report.partial else w("title.daily", day=day)


def verdict_title(verdict: Verdict, w: Words) -> str:
    return w("title.verdict_provisional") if verdict.provisional else w("title.verdict")


def headline_rows(w: Words) -> list[tuple[str, Callable[[PeriodFigures], str]]]:
    return [
        ("fig.tasks_total", lambda f: w.integer(f.tasks.total)),
        ("fig.tasks_failed", lambda f: w.integer(f.tasks.failed)),
        ("fig.tasks_cancelled", lambda f: w.integer(f.tasks.cancelled)),
        ("fig.tasks_cancelled_by_observer", lambda f: w.integer(f.tasks.cancelled_by_observer)),
        ("fig.tasks_unfinished", lambda f: w.integer(f.tasks.unfinished)),
        ("fig.all_jobs_total", lambda f: all_jobs_text(f.all_jobs, w, lambda a: a.total)),
        ("fig.all_jobs_failed", lambda f: all_jobs_text(f.all_jobs, w, lambda a: a.failed)),
        (
            "fig.all_jobs_observer_failed",
            lambda f: all_jobs_text(f.all_jobs, w, lambda a: a.by_observer.failed),
        ),
        ("fig.probe_wait_avg", lambda f: w.duration(f.queue.overall.avg_seconds)),
        ("fig.tenant_jobs_wait_avg", lambda f: w.duration(f.queue.tenant_jobs.avg_seconds)),
        ("fig.queue_wait_p50", lambda f: w.duration(f.queue.overall.p50_seconds)),
        ("fig.queue_wait_p95", lambda f: w.duration(f.queue.overall.p95_seconds)),
        ("fig.gpu_util_avg", lambda f: w.percent(utilization(f.gpu.overall, "avg_percent"))),
        ("fig.gpu_allocated_share", lambda f: w.share(f.gpu.allocated_share)),
        ("fig.gpu_busy_share", lambda f: w.share(utilization(f.gpu.overall, "busy_share"))),
        ("fig.owner_state_known", lambda f: owner_state_text(f, w)),
        ("fig.alerts_total", lambda f: w.integer(f.alerts.total)),
        ("fig.interventions_total", lambda f: w.integer(f.interventions.total)),
        ("fig.incidents_opened", lambda f: w.integer(f.findings.incidents_opened)),
        ("fig.findings_opened", lambda f: w.integer(f.findings.opened)),
        ("fig.findings_closed", lambda f: w.integer(f.findings.closed)),
        ("fig.findings_still_open", lambda f: w.integer(f.findings.still_open)),
        ("fig.findings_events", lambda f: w.integer(f.findings.events)),
        ("fig.blind_time", lambda f: blind_text(f, w)),
    ]


def utilization(stats: UtilizationStats | None, name: str) -> float | None:
    value = getattr(stats, name) if stats is not None else None
    return None if value is None else float(value)


def owner_state_text(f: PeriodFigures, w: Words) -> str:
    known = f.owners.known
    if known is None:
        return w("word.not_observed")
    return w("value.owner_state_known", known=known, nodes=f.owners.nodes)


def blind_text(f: PeriodFigures, w: Words) -> str:
    """Blind time on every node, and each node source's part as what it was (GPU- or
    node-hours), then the fleet's blind share; 0 s only when nothing was blind."""
    b = f.blind
    parts = [
        w("value.blind_source_part", source=w(f"src.{source}"), part=blind_part_text(part, w))
        for source, part in sorted(b.by_source_part.items())
    ]
    everywhere = [w.duration(b.everywhere_seconds)] if b.everywhere_seconds or not parts else []
    if len(parts) == 1 and not everywhere:
        return parts[0]  # its own share is the fleet's
    return w.aside(w.lines([*everywhere, *parts]), w.share(b.share))


def blind_part_text(part: PartBlind, w: Words) -> str:
    """A node source blind on part of the fleet: its GPU- or node-hours and their share."""
    text = (
        w("value.blind_part_gpu", hours=w.decimal(part.hours, 1), share=part.share)
        if part.unit == "gpu"
        else w("value.blind_part_node", hours=w.decimal(part.hours, 1), share=part.share)
    )
    if not part.everywhere_seconds:
        return text
    return w(
        "value.blind_everywhere_and_part", everywhere=w.duration(part.everywhere_seconds), part=text
    )


def all_jobs_text(
    figures: AllJobFigures | None, w: Words, value: Callable[[AllJobFigures], int]
) -> str:
    """A count of every tenant's jobs: not observed, or marked when it is a lower bound."""
    if figures is None:
        return w("word.not_observed")
    text = w.integer(value(figures))
    return text if figures.complete else w.aside(text, w("word.incomplete"))
