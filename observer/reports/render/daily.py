"""The daily summary's content as blocks: its headline, tasks, every tenant's jobs and queue
waits here; GPUs, their health, the inference service and what happened around the platform
from their own modules."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from zoneinfo import ZoneInfo

from observer.reports.compute.daily import DailyReport
from observer.reports.compute.figures import PeriodFigures
from observer.reports.compute.jobs import AllJobFigures
from observer.reports.compute.queues import WaitStats
from observer.reports.compute.tasks import ProbeCoverage
from observer.reports.render import charts
from observer.reports.render.blocks import (
    Block,
    Chart,
    Heading,
    Link,
    Rendered,
    Table,
    Text,
)
from observer.reports.render.events import (
    alert_blocks,
    blind_blocks,
    delivery_blocks,
    finding_blocks,
    intervention_blocks,
)
from observer.reports.render.expected_wait import expected_wait_blocks
from observer.reports.render.gpu import gpu_blocks, utilisation_chart
from observer.reports.render.headline import (
    all_jobs_text,
    blind_text,
    daily_title,
    headline_rows,
    utilization,
)
from observer.reports.render.health import health_blocks
from observer.reports.render.i18n import Language, Words, forget_texts
from observer.reports.render.inference import inference_blocks
from observer.reports.render.json import daily_json, json_text
from observer.reports.render.layout import to_html, to_markdown
from observer.reports.render.page import page_blocks
from observer.reports.render.tasks import run_anchor, short_run_id, task_blocks, tasks_csv
from observer.reports.render.tenants import tenant_blocks
from observer.reports.render.usage import gpu_hours_csv, usage_blocks
from observer.reports.render.waits import wait_reason_blocks


def render_daily(report: DailyReport, language: Language) -> Rendered:
    try:
        words = Words(language, ZoneInfo(report.timezone))
        title = daily_title(report, words)
        blocks = _daily_blocks(report, words, title)
        return Rendered(
            markdown=to_markdown(blocks),
            html=to_html(title, language, blocks),
            json=json_text(daily_json(report, language)) + "\n",
            csv=tasks_csv(report.tasks, words),
            more_csv=(("gpu_hours", gpu_hours_csv(report.usage)),),
        )
    finally:
        forget_texts()


def _daily_blocks(report: DailyReport, w: Words, title: str) -> list[Block]:
    day, prev, soak = report.figures, report.previous_day, report.soak_to_date
    columns = [w("col.figure"), w("col.day"), w("col.previous_day"), w("col.soak_to_date")]

    def row(key: str, value: Callable[[PeriodFigures], str]) -> list[str]:
        return [w(key), value(day), value(prev) if prev else "—", value(soak)]

    period: list[Block] = [
        Text(w("label.timezone", timezone=w.zone(day.start, day.end)), "meta"),
        Text(w("label.period", start=w.instant(day.start), end=w.instant(day.end)), "meta"),
        *([Text(w("note.partial", at=day.end.isoformat()), "note")] if report.partial else []),
        Text(w("label.soak_started", start=w.instant(report.soak_started_at)), "meta"),
        Text(w("note.generated_for"), "note"),
    ]
    body: list[Block] = [
        Heading(2, w("sec.headline"), anchor="headline"),
        Table(columns, [row(key, value) for key, value in headline_rows(w)], "headline"),
        Heading(2, w("sec.charts"), html_only=True, anchor="charts"),
        Chart(utilisation_chart("chart.util_over_day", day, w)),
        Chart(_tenant_wait_chart(day, w)),
        Chart(_window_chart(day, w)),
    ]
    body += _task_blocks(day, prev, soak, w)
    body += _queue_blocks(day, prev, soak, w)
    body += wait_reason_blocks(day, w)
    body += expected_wait_blocks(report.expected_wait, w)
    body += tenant_blocks(report.tenants, w)
    body += gpu_blocks(day, prev, soak, w)
    body += usage_blocks(report.usage, w)
    body += health_blocks(day, w)
    body += inference_blocks(report.inference, w)
    body += alert_blocks(day, prev, soak, w)
    body += intervention_blocks(day, w)
    body += finding_blocks(day, soak, w)
    body += blind_blocks(day, prev, soak, w)
    body += delivery_blocks(day, w)
    body += task_blocks(report.tasks, w)
    return page_blocks(title, _lead(day, w), period, body, w)


def _lead(day: PeriodFigures, w: Words) -> list[tuple[str, tuple[str, ...]]]:
    """The day in five lines, each with the sections that say more."""
    t, f, q = day.tasks, day.findings, day.queue.overall
    return [
        (
            w("lead.tasks", total=t.total, failed=t.failed, unfinished=t.unfinished),
            ("tasks", "task_records"),
        ),
        (
            w("lead.findings", opened=f.opened, open=f.still_open, alerts=day.alerts.total)
            if day.alerts.total is not None
            else w("lead.findings_no_alerts", opened=f.opened, open=f.still_open),
            ("findings", "alerts", "health"),
        ),
        (
            w(
                "lead.gpu",
                used=w.percent(utilization(day.gpu.overall, "avg_percent")),
                allocated=w.share(day.gpu.allocated_share),
            ),
            ("gpu", "tenants"),
        ),
        (
            w("lead.queue", p95=w.duration(q.p95_seconds), avg=w.duration(q.avg_seconds)),
            ("queue",),
        ),
        (w("lead.blind", blind=blind_text(day, w)), ("blind",)),
    ]


def _task_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, w("sec.tasks"), anchor="tasks"),
        *_all_job_blocks(day, prev, soak, w),
        Heading(3, w("sub.failures")),
    ]
    groups = day.tasks.failure_groups
    if groups:
        blocks.append(
            Table(
                [
                    w("col.failure_cause"),
                    w("col.cause_evidence"),
                    w("col.outcome"),
                    w("col.reason"),
                    w("col.count"),
                    w("col.probes"),
                    w("col.tenants"),
                    w("col.explanation"),
                    w("col.runs_listed"),
                ],
                [
                    [
                        w(f"cause.{g.cause}"),
                        w.evidence(g.evidence) or "—",
                        w(f"outcome.{g.outcome}"),
                        w.quoted(g.reason) if g.reason else "—",
                        w.integer(len(e.run_ids)),
                        w.names(e.probes),
                        w.names(e.tenants),
                        w.note(e.explanation),
                        tuple(Link(short_run_id(r), run_anchor(r)) for r in e.run_ids),
                    ]
                    for g in groups
                    for e in g.explanations
                ],
            )
        )
        blocks.append(Text(w("note.explanations"), "note"))
    else:
        blocks.append(Text(w("note.no_items")))
    probes = sorted(day.tasks.by_probe)
    blocks += [
        Heading(3, w("sub.by_probe")),
        Table(
            [
                w("col.probe"),
                w("col.runs"),
                w("col.failed"),
                w("col.previous_day"),
                w("col.soak_to_date"),
            ],
            [
                [
                    p,
                    w.integer(day.tasks.by_probe[p]),
                    w.integer(day.tasks.failed_by_probe.get(p, 0)),
                    _count_pair(
                        prev.tasks.by_probe.get(p, 0), prev.tasks.failed_by_probe.get(p, 0), w
                    )
                    if prev
                    else "—",
                    _count_pair(
                        soak.tasks.by_probe.get(p, 0), soak.tasks.failed_by_probe.get(p, 0), w
                    ),
                ]
                for p in probes
            ],
        ),
    ]
    return blocks + _coverage_blocks(day, soak, w)


def _coverage_blocks(day: PeriodFigures, soak: PeriodFigures, w: Words) -> list[Block]:
    """Per probe that came due in the soak: the day's copies due, run, skipped and why, and
    most together; beside them, the soak's runs of its copies due."""
    blocks: list[Block] = [Heading(3, w("sub.coverage")), Text(w("note.coverage"), "note")]
    probes = sorted(day.coverage.keys() | soak.coverage.keys())
    if not probes:
        return [*blocks, Text(w("note.no_items"))]
    none = ProbeCoverage(0, 0, {}, 0)

    def skipped(c: ProbeCoverage) -> str:
        reasons = [w("cell.skipped", count=n, why=reason) for reason, n in c.skipped.items()]
        return w.lines(reasons) or "—"

    rows = []
    for p in probes:
        c, whole = day.coverage.get(p, none), soak.coverage.get(p, none)
        rows.append(
            [
                p,
                w.integer(c.due),
                w.integer(c.run),
                skipped(c),
                w.integer(c.most_together),
                w("cell.ran_of_due", runs=whole.run, due=whole.due),
            ]
        )
    columns = [
        w("col.probe"),
        w("col.due"),
        w("col.runs"),
        w("col.skipped"),
        w("col.together"),
        w("col.soak_to_date"),
    ]
    return [*blocks, Table(columns, rows)]


def _all_job_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[Block]:
    def row(key: str, value: Callable[[AllJobFigures], int]) -> list[str]:
        return [
            w(key),
            *(all_jobs_text(f.all_jobs, w, value) if f else "—" for f in (day, prev, soak)),
        ]

    blocks: list[Block] = [
        Heading(3, w("sub.all_jobs_tasks")),
        Table(
            [w("col.figure"), w("col.day"), w("col.previous_day"), w("col.soak_to_date")],
            [
                row("fig.all_jobs_total", lambda a: a.total),
                row("fig.all_jobs_observer_total", lambda a: a.by_observer.total),
                row("fig.all_jobs_failed", lambda a: a.failed),
                row("fig.all_jobs_observer_failed", lambda a: a.by_observer.failed),
                row("fig.all_jobs_cancelled", lambda a: a.cancelled),
            ],
            cell_css={w("word.not_observed"): "not_observed"},
        ),
    ]
    jobs = day.all_jobs
    if jobs is None:
        return [*blocks, Text(w("note.all_jobs_not_observed"), "note")]
    if not jobs.complete:
        listed = w.share(jobs.listed_seconds / ((day.end - day.start).total_seconds() or 1))
        notes = w.lines(jobs.notes) or "—"
        blocks.append(Text(w("note.all_jobs_incomplete", listed=listed, notes=notes), "note"))

    def pair(f: PeriodFigures | None, tenant: str) -> str:
        if f is None or f.all_jobs is None:
            return "—"
        counts = f.all_jobs.by_tenant.get(tenant)
        return _count_pair(counts.total, counts.failed, w) if counts else _count_pair(0, 0, w)

    blocks += [
        Heading(3, w("sub.all_jobs_by_tenant")),
        Table(
            [
                w("col.tenant"),
                w("col.jobs"),
                w("col.failed"),
                w("col.previous_day"),
                w("col.soak_to_date"),
            ],
            [
                [
                    tenant,
                    w.integer(counts.total),
                    w.integer(counts.failed),
                    pair(prev, tenant),
                    pair(soak, tenant),
                ]
                for tenant, counts in jobs.by_tenant.items()
            ],
        )
        if jobs.by_tenant
        else Text(w("note.no_items")),
        Heading(3, w("sub.all_jobs_failures")),
    ]
    if not jobs.failure_groups:
        return [*blocks, Text(w("note.no_items"))]
    return [
        *blocks,
        Table(
            [
                w("col.failure_cause"),
                w("col.reason"),
                w("col.count"),
                w("col.tenants"),
                w("col.observer_probes"),
            ],
            [
                [
                    w(f"cause.{g.cause}") if g.cause else "—",
                    w.quoted(g.reason) if g.reason else "—",
                    w.integer(g.count),
                    w.names([f"{t} {w.integer(n)}" for t, n in g.by_tenant.items()]),
                    w.integer(g.by_observer),
                ]
                for g in jobs.failure_groups
            ],
        ),
    ]


def _count_pair(total: int, failed: int, w: Words) -> str:
    return f"{w.integer(total)} / {w.integer(failed)}"


def _wait_table(
    w: Words,
    label: str,
    day: Mapping[str, WaitStats],
    prev: Mapping[str, WaitStats] | None,
    soak: Mapping[str, WaitStats],
) -> Table:
    keys = sorted(day.keys() | (prev or {}).keys())
    none = WaitStats(0, None, None, None, None)
    return Table(
        [
            label,
            w("col.runs"),
            w("col.avg"),
            w("col.p50"),
            w("col.p95"),
            w("col.max"),
            w.aside(w("col.previous_day"), w("col.avg")),
            w.aside(w("col.soak_to_date"), w("col.avg")),
        ],
        [
            [
                key,
                w.integer(day.get(key, none).runs),
                w.duration(day.get(key, none).avg_seconds),
                w.duration(day.get(key, none).p50_seconds),
                w.duration(day.get(key, none).p95_seconds),
                w.duration(day.get(key, none).max_seconds),
                w.duration(prev.get(key, none).avg_seconds) if prev is not None else "—",
                w.duration(soak.get(key, none).avg_seconds),
            ]
            for key in keys
        ],
    )


def _queue_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[Block]:
    q = day.queue
    pq = prev.queue if prev else None
    blocks: list[Block] = [
        Heading(2, w("sec.queue"), anchor="queue"),
        Heading(3, w("sub.by_tenant")),
        _wait_table(
            w, w("col.tenant"), q.by_tenant, pq.by_tenant if pq else None, soak.queue.by_tenant
        ),
        Heading(3, w("sub.by_window")),
        _wait_table(
            w, w("col.window"), q.by_window, pq.by_window if pq else None, soak.queue.by_window
        ),
        Heading(3, w("sub.by_probe")),
        _wait_table(
            w, w("col.probe"), q.by_probe, pq.by_probe if pq else None, soak.queue.by_probe
        ),
    ]
    if q.never_started:
        blocks.append(Text(w("note.unfinished_wait", count=q.never_started), "note"))
    blocks += [
        Heading(3, w("sub.all_jobs")),
        Table(
            [
                w("col.tenant"),
                w("col.pending_jobs_avg"),
                w("col.pending_gpus_avg"),
                w("col.running_gpus_avg"),
                w("col.longest_wait"),
            ],
            [
                [
                    t,
                    w.decimal(s.pending_jobs_avg),
                    w.decimal(s.pending_gpus_avg),
                    w.decimal(s.running_gpus_avg),
                    w.duration(s.longest_wait_seconds_max),
                ]
                for t, s in q.all_jobs_by_tenant.items()
            ],
        )
        if q.all_jobs_by_tenant
        else Text(w("word.not_observed")),
    ]
    return blocks


def _tenant_wait_chart(f: PeriodFigures, w: Words) -> str:
    tenants = sorted(f.queue.by_tenant)
    return charts.bars(
        "queue-wait-per-tenant",
        w("chart.wait_per_tenant"),
        tenants,
        [
            charts.Series(w("chart.wait_avg"), [f.queue.by_tenant[t].avg_seconds for t in tenants]),
            charts.Series(w("chart.wait_p95"), [f.queue.by_tenant[t].p95_seconds for t in tenants]),
        ],
        w.duration,
        w("chart.no_data"),
        w.labelled,
    )


def _window_chart(f: PeriodFigures, w: Words) -> str:
    windows = sorted(f.queue.by_window.keys() | f.gpu.by_window.keys())
    waits = charts.bars(
        "peak-vs-night-wait",
        f"{w('chart.peak_vs_night')} — {w('chart.wait')}",
        windows,
        [
            charts.Series(
                w("chart.wait_avg"),
                [
                    f.queue.by_window[k].avg_seconds if k in f.queue.by_window else None
                    for k in windows
                ],
            )
        ],
        w.duration,
        w("chart.no_data"),
        w.labelled,
    )
    util = charts.bars(
        "peak-vs-night-utilisation",
        f"{w('chart.peak_vs_night')} — {w('chart.util')}",
        windows,
        [
            charts.Series(
                w("chart.used"),
                [utilization(f.gpu.by_window.get(k), "avg_percent") for k in windows],
            )
        ],
        w.percent,
        w("chart.no_data"),
        w.labelled,
    )
    return waits + util
