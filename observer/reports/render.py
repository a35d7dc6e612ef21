"""Reports as Markdown, one self-contained HTML page (inline CSS and SVG charts) and JSON.

Markdown and HTML are written from one list of blocks, so they say the same things; charts
appear in HTML only. JSON keys are English and stable whatever the language: the headline
keys (tasks_total, tasks_failed, all_jobs_total, all_jobs_failed (null: not observed),
all_jobs_complete, queue_wait_seconds_avg, gpu_utilization_avg (percent),
alerts_total, manual_interventions_total, findings...) at the top, the report's dataclass
field names below them. Nothing depends on when a report is rendered."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from html import escape
from typing import Any
from zoneinfo import ZoneInfo

from observer.reports import charts
from observer.reports.daily import DailyReport
from observer.reports.figures import (
    BLIND_SOURCES,
    AllJobFigures,
    FindingItem,
    PeriodFigures,
    UtilizationStats,
    WaitStats,
)
from observer.reports.i18n import Language, Note, Words
from observer.reports.verdict import CriterionResult, Status, Verdict

SCHEMA_VERSION = 1
_HOURS = tuple(f"{h:02d}" for h in range(24))


@dataclass(frozen=True, slots=True)
class Rendered:
    markdown: str
    html: str
    json: str


# --- blocks ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    text: str
    html_only: bool = False  # a heading over charts only


@dataclass(frozen=True, slots=True)
class _Text:
    text: str
    css: str = ""


@dataclass(frozen=True, slots=True)
class _Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    css: str = ""
    cell_css: Mapping[str, str] = dataclasses.field(default_factory=dict)  # text -> class


@dataclass(frozen=True, slots=True)
class _List:
    items: Sequence[str]
    ordered: bool = False


@dataclass(frozen=True, slots=True)
class _Evidence:
    title: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Chart:
    svg: str


_Block = _Heading | _Text | _Table | _List | _Evidence | _Chart


def _markdown(blocks: Sequence[_Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, _Heading):
            if not block.html_only:
                out.append("#" * block.level + " " + block.text)
        elif isinstance(block, _Text):
            out.append(block.text)
        elif isinstance(block, _Table):
            out.append(
                "\n".join(
                    [
                        "| " + " | ".join(_md_cell(h) for h in block.headers) + " |",
                        "|" + "|".join("---" for _ in block.headers) + "|",
                        *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows),
                    ]
                )
            )
        elif isinstance(block, _List):
            out.append(
                "\n".join(
                    f"{i + 1}. {item}" if block.ordered else f"- {item}"
                    for i, item in enumerate(block.items)
                )
            )
        elif isinstance(block, _Evidence):
            out.append(
                f"<details><summary>{escape(block.title)}</summary>\n\n```json\n"
                f"{_json_text(block.data)}\n```\n\n</details>"
            )
    return "\n\n".join(out) + "\n"


def _md_cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


_CSS = """
body{font-family:"Noto Sans CJK SC","Noto Sans SC","Noto Sans","Helvetica Neue",Arial,
sans-serif;margin:24px auto;max-width:1120px;color:#1d2329;line-height:1.45;padding:0 16px}
h1{font-size:26px;margin-bottom:4px}h2{font-size:20px;margin-top:32px;border-bottom:2px solid
#e3e7eb;padding-bottom:4px}h3{font-size:16px;margin-top:20px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #d5dbe1;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.headline td:first-child{font-weight:600}table.headline td{min-width:120px}
.meta{color:#58636e;margin:2px 0}.note{color:#58636e;font-size:13px}
.chart{display:block;margin:12px 0 20px;max-width:100%;height:auto}
.pass{color:#1d7a3e;font-weight:700}.fail{color:#b3261e;font-weight:700}
.not_observed{color:#6b7380;font-weight:700}
.rec{font-size:24px;font-weight:800;padding:10px 16px;border-radius:6px;display:inline-block}
.rec.go{background:#dff3e4;color:#1d7a3e}.rec.limited_go{background:#fff1d6;color:#8a5a00}
.rec.no_go{background:#fbe0de;color:#b3261e}
details{margin:4px 0 10px}pre{background:#f6f8fa;padding:8px;font-size:12px;overflow:auto}
"""


def _html(title: str, language: Language, blocks: Sequence[_Block]) -> str:
    body: list[str] = []
    for block in blocks:
        if isinstance(block, _Heading):
            body.append(f"<h{block.level}>{escape(block.text)}</h{block.level}>")
        elif isinstance(block, _Text):
            css = f' class="{block.css}"' if block.css else ""
            body.append(f"<p{css}>{escape(block.text)}</p>")
        elif isinstance(block, _Table):
            css = f' class="{block.css}"' if block.css else ""
            head = "".join(f"<th>{escape(h)}</th>" for h in block.headers)
            rows = "".join(
                "<tr>" + "".join(_html_cell(c, block.cell_css.get(c)) for c in row) + "</tr>"
                for row in block.rows
            )
            body.append(f"<table{css}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, _List):
            tag = "ol" if block.ordered else "ul"
            items = "".join(f"<li>{escape(item)}</li>" for item in block.items)
            body.append(f"<{tag}>{items}</{tag}>")
        elif isinstance(block, _Evidence):
            body.append(
                f"<details><summary>{escape(block.title)}</summary>"
                f"<pre>{escape(_json_text(block.data))}</pre></details>"
            )
        else:
            body.append(block.svg)
    return (
        f'<!DOCTYPE html>\n<html lang="{language}"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _html_cell(text: str, css: str | None) -> str:
    if css is None and _NUMBER.match(text):
        css = "num"
    return f'<td class="{css}">{escape(text)}</td>' if css else f"<td>{escape(text)}</td>"


# A figure: a number with its unit or percentage, right-aligned; not a day or a time.
_NUMBER = re.compile(r"^-?[\d.,]+(%|\s?[^\d\s]{1,3})?(\s[\d.,]+\s?[^\d\s]{1,3})?(\s\([\d.,]+%\))?$")


# --- daily -----------------------------------------------------------------------------


def render_daily(report: DailyReport, language: Language) -> Rendered:
    words = Words(language, ZoneInfo(report.timezone))
    title = words("title.daily", day=words.day(report.day))
    blocks = _daily_blocks(report, words, title)
    return Rendered(
        markdown=_markdown(blocks),
        html=_html(title, language, blocks),
        json=_json_text(daily_json(report, language)) + "\n",
    )


def _daily_blocks(report: DailyReport, w: Words, title: str) -> list[_Block]:
    day, prev, soak = report.figures, report.previous_day, report.soak_to_date
    columns = [w("col.figure"), w("col.day"), w("col.previous_day"), w("col.soak_to_date")]

    def row(key: str, value: Callable[[PeriodFigures], str]) -> list[str]:
        return [w(key), value(day), value(prev) if prev else "—", value(soak)]

    blocks: list[_Block] = [
        _Heading(1, title),
        _Text(w("label.timezone", timezone=report.timezone), "meta"),
        _Text(w("label.period", start=w.instant(day.start), end=w.instant(day.end)), "meta"),
        _Text(w("label.soak_started", start=w.instant(report.soak_started_at)), "meta"),
        _Text(w("note.generated_for"), "note"),
        _Heading(2, w("sec.headline")),
        _Table(columns, [row(key, value) for key, value in _headline_rows(w)], "headline"),
        _Heading(2, w("sec.charts"), html_only=True),
        _Chart(_utilisation_chart(day, w, "chart.util_over_day")),
        _Chart(_tenant_wait_chart(day, w)),
        _Chart(_window_chart(day, w)),
    ]
    blocks += _task_blocks(day, prev, soak, w)
    blocks += _queue_blocks(day, prev, soak, w)
    blocks += _gpu_blocks(day, prev, soak, w)
    blocks += _alert_blocks(day, prev, soak, w)
    blocks += _intervention_blocks(day, w)
    blocks += _finding_blocks(day, soak, w)
    blocks += _blind_blocks(day, prev, soak, w)
    blocks += _delivery_blocks(day, w)
    return blocks


def _headline_rows(w: Words) -> list[tuple[str, Callable[[PeriodFigures], str]]]:
    return [
        ("fig.tasks_total", lambda f: w.integer(f.tasks.total)),
        ("fig.tasks_failed", lambda f: w.integer(f.tasks.failed)),
        ("fig.tasks_cancelled", lambda f: w.integer(f.tasks.cancelled)),
        ("fig.tasks_unfinished", lambda f: w.integer(f.tasks.unfinished)),
        ("fig.all_jobs_total", lambda f: _all_jobs(f.all_jobs, w, lambda a: a.total)),
        ("fig.all_jobs_failed", lambda f: _all_jobs(f.all_jobs, w, lambda a: a.failed)),
        ("fig.queue_wait_avg", lambda f: w.duration(f.queue.overall.avg_seconds)),
        ("fig.queue_wait_p50", lambda f: w.duration(f.queue.overall.p50_seconds)),
        ("fig.queue_wait_p95", lambda f: w.duration(f.queue.overall.p95_seconds)),
        ("fig.gpu_util_avg", lambda f: w.percent(_util(f.gpu.overall, "avg_percent"))),
        ("fig.gpu_allocated_share", lambda f: w.share(f.gpu.allocated_share)),
        ("fig.gpu_busy_share", lambda f: w.share(_util(f.gpu.overall, "busy_share"))),
        ("fig.alerts_total", lambda f: w.integer(f.alerts.total)),
        ("fig.interventions_total", lambda f: w.integer(f.interventions.total)),
        ("fig.findings_opened", lambda f: w.integer(f.findings.opened)),
        ("fig.findings_closed", lambda f: w.integer(f.findings.closed)),
        ("fig.findings_still_open", lambda f: w.integer(f.findings.still_open)),
        ("fig.findings_events", lambda f: w.integer(f.findings.events)),
        ("fig.blind_time", lambda f: _blind_text(f, w)),
    ]


def _util(stats: UtilizationStats | None, name: str) -> float | None:
    value = getattr(stats, name) if stats is not None else None
    return None if value is None else float(value)


def _blind_text(f: PeriodFigures, w: Words) -> str:
    return f"{w.duration(f.blind.total_seconds)} ({w.share(f.blind.share)})"


def _all_jobs(
    figures: AllJobFigures | None, w: Words, value: Callable[[AllJobFigures], int]
) -> str:
    """A count of every tenant's jobs: not observed, or marked when it is a lower bound."""
    if figures is None:
        return w("word.not_observed")
    text = w.integer(value(figures))
    return text if figures.complete else f"{text} ({w('word.incomplete')})"


def _task_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[_Block]:
    blocks: list[_Block] = [
        _Heading(2, w("sec.tasks")),
        *_all_job_blocks(day, prev, soak, w),
        _Heading(3, w("sub.failures")),
    ]
    groups = day.tasks.failure_groups
    if groups:
        blocks.append(
            _Table(
                [
                    w("col.outcome"),
                    w("col.reason"),
                    w("col.count"),
                    w("col.probes"),
                    w("col.tenants"),
                    w("col.example"),
                ],
                [
                    [
                        g.outcome,
                        g.reason or "—",
                        w.integer(g.count),
                        ", ".join(g.probes),
                        ", ".join(g.tenants),
                        g.example_message or "—",
                    ]
                    for g in groups
                ],
            )
        )
    else:
        blocks.append(_Text(w("note.no_items")))
    probes = sorted(day.tasks.by_probe)
    blocks += [
        _Heading(3, w("sub.by_probe")),
        _Table(
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
    return blocks


def _all_job_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[_Block]:
    def row(key: str, value: Callable[[AllJobFigures], int]) -> list[str]:
        return [
            w(key),
            *(_all_jobs(f.all_jobs, w, value) if f else "—" for f in (day, prev, soak)),
        ]

    blocks: list[_Block] = [
        _Heading(3, w("sub.all_jobs_tasks")),
        _Table(
            [w("col.figure"), w("col.day"), w("col.previous_day"), w("col.soak_to_date")],
            [
                row("fig.all_jobs_total", lambda a: a.total),
                row("fig.all_jobs_failed", lambda a: a.failed),
                row("fig.all_jobs_cancelled", lambda a: a.cancelled),
            ],
            cell_css={w("word.not_observed"): "not_observed"},
        ),
    ]
    jobs = day.all_jobs
    if jobs is None:
        return [*blocks, _Text(w("note.all_jobs_not_observed"), "note")]
    if not jobs.complete:
        listed = w.share(jobs.listed_seconds / ((day.end - day.start).total_seconds() or 1))
        notes = "; ".join(jobs.notes) or "—"
        blocks.append(_Text(w("note.all_jobs_incomplete", listed=listed, notes=notes), "note"))

    def pair(f: PeriodFigures | None, tenant: str) -> str:
        if f is None or f.all_jobs is None:
            return "—"
        counts = f.all_jobs.by_tenant.get(tenant)
        return _count_pair(counts.total, counts.failed, w) if counts else _count_pair(0, 0, w)

    blocks += [
        _Heading(3, w("sub.all_jobs_by_tenant")),
        _Table(
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
        else _Text(w("note.no_items")),
        _Heading(3, w("sub.all_jobs_failures")),
    ]
    if not jobs.failure_groups:
        return [*blocks, _Text(w("note.no_items"))]
    return [
        *blocks,
        _Table(
            [w("col.reason"), w("col.count"), w("col.tenants")],
            [
                [
                    g.reason or "—",
                    w.integer(g.count),
                    ", ".join(f"{t} {w.integer(n)}" for t, n in g.by_tenant.items()),
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
) -> _Table:
    keys = sorted(day.keys() | (prev or {}).keys())
    none = WaitStats(0, None, None, None, None)
    return _Table(
        [
            label,
            w("col.runs"),
            w("col.avg"),
            w("col.p50"),
            w("col.p95"),
            w("col.max"),
            f"{w('col.previous_day')} ({w('col.avg')})",
            f"{w('col.soak_to_date')} ({w('col.avg')})",
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
) -> list[_Block]:
    q = day.queue
    pq = prev.queue if prev else None
    blocks: list[_Block] = [
        _Heading(2, w("sec.queue")),
        _Heading(3, w("sub.by_tenant")),
        _wait_table(
            w, w("col.tenant"), q.by_tenant, pq.by_tenant if pq else None, soak.queue.by_tenant
        ),
        _Heading(3, w("sub.by_window")),
        _wait_table(
            w, w("col.window"), q.by_window, pq.by_window if pq else None, soak.queue.by_window
        ),
        _Heading(3, w("sub.by_probe")),
        _wait_table(
            w, w("col.probe"), q.by_probe, pq.by_probe if pq else None, soak.queue.by_probe
        ),
    ]
    if q.never_started:
        blocks.append(_Text(w("note.unfinished_wait", count=q.never_started), "note"))
    blocks += [
        _Heading(3, w("sub.all_jobs")),
        _Table(
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
        else _Text(w("word.not_observed")),
    ]
    return blocks


def _gpu_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[_Block]:
    g = day.gpu
    blocks: list[_Block] = [_Heading(2, w("sec.gpu"))]
    if not g.observed:
        blocks.append(_Text(w("note.no_gpu_samples"), "note"))
    pools = sorted(g.by_pool.keys() | soak.gpu.by_pool.keys())
    blocks += [
        _Heading(3, w("sub.by_pool")),
        _Table(
            [
                w("col.pool"),
                w("col.gpus"),
                w("col.allocated"),
                w("col.used"),
                w("col.utilization"),
                f"{w('col.previous_day')} ({w('col.utilization')})",
                f"{w('col.soak_to_date')} ({w('col.utilization')})",
            ],
            [
                [
                    pool,
                    w.decimal(g.by_pool[pool].gpus_avg) if pool in g.by_pool else "—",
                    w.share(g.by_pool[pool].allocated_share) if pool in g.by_pool else "—",
                    w.share(g.by_pool[pool].used_share) if pool in g.by_pool else "—",
                    w.percent(_pool_util(day, pool)),
                    w.percent(_pool_util(prev, pool)) if prev else "—",
                    w.percent(_pool_util(soak, pool)),
                ]
                for pool in pools
            ],
        ),
    ]
    windows = sorted(g.by_window.keys() | soak.gpu.by_window.keys())
    if g.observed:
        blocks += [
            _Heading(3, w("sub.by_window")),
            _Table(
                [
                    w("col.window"),
                    w("col.samples"),
                    w("col.avg"),
                    w("col.p50"),
                    w("col.p95"),
                    w("col.distribution"),
                    f"{w('col.previous_day')} ({w('col.avg')})",
                    f"{w('col.soak_to_date')} ({w('col.avg')})",
                ],
                [
                    _util_row(
                        key,
                        g.by_window.get(key),
                        prev.gpu.by_window.get(key) if prev else None,
                        soak.gpu.by_window.get(key),
                        w,
                    )
                    for key in windows
                ]
                + [
                    _util_row(
                        "*", g.overall, prev.gpu.overall if prev else None, soak.gpu.overall, w
                    )
                ],
            ),
        ]
    blocks += [
        _Heading(3, w("sub.by_tenant")),
        _Text(
            w("note.tenant_util", attributed=g.tenant_samples, samples=g.overall.samples)
            if g.tenant_samples and g.overall
            else w("note.tenant_util_not_observed"),
            "note",
        ),
        _tenant_gpu_table(day, prev, soak, w),
        _Text(
            w(
                "note.gpu_coverage",
                sampled=g.nodes_sampled,
                known=g.nodes_known,
                unread=g.unread_samples,
            ),
            "note",
        ),
    ]
    return blocks


def _tenant_gpu_table(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> _Table:
    """Allocated (the scheduler's queues) against used (the agents' samples) per tenant."""
    g = day.gpu
    tenants = sorted(
        g.tenant_running_gpus_avg.keys()
        | soak.gpu.tenant_running_gpus_avg.keys()
        | g.by_tenant.keys()
        | soak.gpu.by_tenant.keys()
    )
    return _Table(
        [
            w("col.tenant"),
            w("col.allocated_gpus_avg"),
            w("col.samples"),
            w("col.utilization"),
            w("col.busy_share"),
            f"{w('col.previous_day')} ({w('col.allocated')} / {w('col.utilization')})",
            f"{w('col.soak_to_date')} ({w('col.allocated')} / {w('col.utilization')})",
        ],
        [
            [
                t,
                w.decimal(g.tenant_running_gpus_avg.get(t)),
                w.integer(g.by_tenant[t].samples if t in g.by_tenant else 0),
                w.percent(_util(g.by_tenant.get(t), "avg_percent")),
                w.share(_util(g.by_tenant.get(t), "busy_share")),
                _tenant_pair(prev, t, w) if prev else "—",
                _tenant_pair(soak, t, w),
            ]
            for t in tenants
        ],
    )


def _tenant_pair(figures: PeriodFigures, tenant: str, w: Words) -> str:
    allocated = w.decimal(figures.gpu.tenant_running_gpus_avg.get(tenant))
    used = w.percent(_util(figures.gpu.by_tenant.get(tenant), "avg_percent"))
    return f"{allocated} / {used}"


def _pool_util(figures: PeriodFigures | None, pool: str) -> float | None:
    if figures is None or pool not in figures.gpu.by_pool:
        return None
    return _util(figures.gpu.by_pool[pool].utilization, "avg_percent")


def _util_row(
    key: str,
    day: UtilizationStats | None,
    prev: UtilizationStats | None,
    soak: UtilizationStats | None,
    w: Words,
) -> list[str]:
    return [
        key,
        w.integer(day.samples if day else 0),
        w.percent(_util(day, "avg_percent")),
        w.percent(_util(day, "p50_percent")),
        w.percent(_util(day, "p95_percent")),
        " ".join(str(n) for n in day.deciles) if day else "—",
        w.percent(_util(prev, "avg_percent")),
        w.percent(_util(soak, "avg_percent")),
    ]


def _alert_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[_Block]:
    blocks: list[_Block] = [_Heading(2, w("sec.alerts"))]
    if day.alerts.total is None:
        return [*blocks, _Text(w("note.alerts_not_set_up"), "note")]
    blind = day.blind.by_source.get("alerts")
    if blind:
        blocks.append(_Text(w("note.alerts_blind", blind_seconds=blind), "note"))

    def counts(f: PeriodFigures | None) -> dict[tuple[str, str | None], int]:
        return {} if f is None else {(a.name, a.severity): a.count for a in f.alerts.by_name}

    today, before, overall = counts(day), counts(prev), counts(soak)
    keys = sorted(today.keys() | before.keys(), key=lambda k: (-today.get(k, 0), k[0], k[1] or ""))
    if not keys:
        return [*blocks, _Text(w("note.no_items"))]
    return [
        *blocks,
        _Table(
            [
                w("col.name"),
                w("col.severity"),
                w("col.day"),
                w("col.previous_day"),
                w("col.soak_to_date"),
            ],
            [
                [
                    name,
                    severity or "—",
                    w.integer(today.get((name, severity), 0)),
                    w.integer(before.get((name, severity), 0)) if prev else "—",
                    w.integer(overall.get((name, severity), 0)),
                ]
                for name, severity in keys
            ],
        ),
    ]


def _intervention_blocks(day: PeriodFigures, w: Words) -> list[_Block]:
    items = day.interventions.items
    blocks: list[_Block] = [_Heading(2, w("sec.interventions"))]
    if not items:
        return [*blocks, _Text(w("note.no_items"))]
    return [
        *blocks,
        _Table(
            [
                w("col.at"),
                w("col.source"),
                w("col.action"),
                w("col.by"),
                w("col.subject"),
                w("col.reason"),
                w("col.audited"),
            ],
            [
                [
                    w.instant(i.at),
                    w(f"source.{i.source}"),
                    w(f"action.{i.action}"),
                    i.by or w("word.unknown"),
                    _subject(i.subject),
                    i.reason or "—",
                    i.audited_by or ("—" if i.source == "recorded" else w("word.no")),
                ]
                for i in items
            ],
        ),
    ]


def _subject(subject: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(subject.items()))


def _finding_blocks(day: PeriodFigures, soak: PeriodFigures, w: Words) -> list[_Block]:
    f = day.findings
    detectors = sorted(f.by_detector)
    blocks: list[_Block] = [_Heading(2, w("sec.findings")), _Heading(3, w("sub.by_detector"))]
    if not detectors:
        return [*blocks, _Text(w("note.no_items"))]
    blocks.append(
        _Table(
            [
                w("col.detector"),
                w("col.opened"),
                w("col.closed"),
                w("col.still_open"),
                w("col.events"),
                f"{w('col.soak_to_date')} ({w('col.opened')} + {w('col.events')})",
            ],
            [
                [
                    d,
                    w.integer(f.by_detector[d].opened),
                    w.integer(f.by_detector[d].closed),
                    w.integer(f.by_detector[d].still_open),
                    w.integer(f.by_detector[d].events),
                    w.integer(
                        soak.findings.by_detector[d].opened + soak.findings.by_detector[d].events
                    )
                    if d in soak.findings.by_detector
                    else "0",
                ]
                for d in detectors
            ],
        )
    )
    blocks.append(_Heading(3, w("sub.evidence")))
    blocks += _finding_items(f.items, w)
    return blocks


def _finding_items(items: Sequence[FindingItem], w: Words) -> list[_Block]:
    blocks: list[_Block] = [
        _Table(
            [
                w("col.opened"),
                w("col.closed"),
                w("col.detector"),
                w("col.severity"),
                w("col.status"),
                w("col.subject"),
                w("col.summary"),
            ],
            [
                [
                    w.instant(i.opened_at),
                    w.instant(i.closed_at) if i.closed_at else "—",
                    i.detector,
                    i.severity,
                    w(f"status.{i.status}"),
                    _subject(i.subject),
                    i.summary,
                ]
                for i in items
            ],
        )
    ]
    blocks += [
        _Evidence(
            f"{i.detector} · {_subject(i.subject)} · {w.instant(i.opened_at)}",
            {"summary": i.summary, "evidence": _plain(i.evidence)},
        )
        for i in items
    ]
    return blocks


def _blind_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[_Block]:
    b = day.blind
    blocks: list[_Block] = [
        _Heading(2, w("sec.blind")),
        _Table(
            [w("col.source"), w("col.day"), w("col.previous_day"), w("col.soak_to_date")],
            [
                [
                    w(f"src.{s}"),
                    w.duration(b.by_source[s]),
                    w.duration(prev.blind.by_source.get(s)) if prev else "—",
                    w.duration(soak.blind.by_source.get(s)),
                ]
                for s in BLIND_SOURCES
                if s in b.by_source
            ]
            + [
                [
                    "*",
                    _blind_text(day, w),
                    _blind_text(prev, w) if prev else "—",
                    _blind_text(soak, w),
                ]
            ],
        ),
    ]
    if b.periods:
        blocks.append(
            _Table(
                [w("col.source"), w("col.subject"), w("col.from"), w("col.to"), w("col.duration")],
                [
                    [
                        w(f"src.{p.source}"),
                        p.subject,
                        w.instant(p.start),
                        w.instant(p.end),
                        w.duration(p.seconds),
                    ]
                    for p in b.periods
                ],
            )
        )
    notes = [w("note.scheduler_gaps", limit_seconds=b.scheduler_gap_seconds)]
    if b.not_set_up:
        notes.append(
            w("note.blind_not_set_up", sources=", ".join(w(f"src.{s}") for s in b.not_set_up))
        )
    return blocks + [_Text(n, "note") for n in notes]


def _delivery_blocks(day: PeriodFigures, w: Words) -> list[_Block]:
    d = day.deliveries
    blocks: list[_Block] = [_Heading(2, w("sec.deliveries"))]
    if d.failures:
        blocks += [
            _Text(w("note.deliveries_failed", failed=d.failed, total=d.total)),
            _Table(
                [
                    w("col.at"),
                    w("col.report"),
                    w("col.channel"),
                    w("col.attempts"),
                    w("col.detail"),
                ],
                [
                    [w.instant(f.at), f.report, f.channel, w.integer(f.attempts), f.detail or "—"]
                    for f in d.failures
                ],
            ),
        ]
    elif d.total:
        blocks.append(_Text(w("note.deliveries_all", total=d.total)))
    else:
        blocks.append(_Text(w("note.deliveries_none")))
    if not d.channels:
        blocks.append(_Text(w("note.deliveries_no_channels"), "note"))
    return blocks


# --- charts ----------------------------------------------------------------------------


def _utilisation_chart(f: PeriodFigures, w: Words, title_key: str) -> str:
    util = [_util(f.gpu.by_hour.get(h), "avg_percent") for h in _HOURS]
    allocated = [
        None if (s := f.gpu.allocated_share_by_hour.get(h)) is None else 100.0 * s for h in _HOURS
    ]
    return charts.lines(
        "utilisation",
        w(title_key),
        _HOURS,
        [charts.Series(w("chart.used"), util), charts.Series(w("chart.allocated"), allocated)],
        w.percent,
        w("chart.no_data"),
        y_max=100.0,
    )


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
    )
    util = charts.bars(
        "peak-vs-night-utilisation",
        f"{w('chart.peak_vs_night')} — {w('chart.util')}",
        windows,
        [
            charts.Series(
                w("chart.used"), [_util(f.gpu.by_window.get(k), "avg_percent") for k in windows]
            )
        ],
        w.percent,
        w("chart.no_data"),
    )
    return waits + util


# --- verdict ---------------------------------------------------------------------------


def render_verdict(verdict: Verdict, language: Language) -> Rendered:
    words = Words(language, ZoneInfo(verdict.timezone))
    title = words("title.verdict")
    blocks = _verdict_blocks(verdict, words, title)
    return Rendered(
        markdown=_markdown(blocks),
        html=_html(title, language, blocks),
        json=_json_text(verdict_json(verdict, language)) + "\n",
    )


def _verdict_blocks(v: Verdict, w: Words, title: str) -> list[_Block]:
    rec = v.recommendation.value
    blocks: list[_Block] = [
        _Heading(1, title),
        _Text(
            w(
                "label.soak",
                start=w.instant(v.soak_started_at),
                end=w.instant(v.soak_ended_at),
                days=len(v.days),
            ),
            "meta",
        ),
        _Text(w("label.timezone", timezone=v.timezone), "meta"),
        _Heading(2, w("sec.recommendation")),
        _Text(w(f"rec.{rec}"), f"rec {rec}"),
        _Text(w(f"rec.{rec}.text")),
    ]
    if v.scope:
        blocks += [_Heading(3, w("sec.scope")), _List([w.note(n) for n in v.scope])]
    blocks += [
        _Heading(2, w("sec.criteria")),
        _Table(
            [w("col.criterion"), w("col.status"), w("col.class"), w("col.reason")],
            [
                [
                    w(f"crit.{c.criterion}"),
                    w(f"verdict.status.{c.status.value}"),
                    w(f"class.{c.failure_class.value}") if c.failure_class else "—",
                    w.note(c.class_reason) if c.class_reason else "—",
                ]
                for c in v.criteria
            ],
            cell_css={w(f"verdict.status.{s.value}"): s.value for s in Status},
        ),
    ]
    for c in v.criteria:
        blocks += _criterion_blocks(c, w)
    blocks += [
        _Heading(2, w("sec.reverification")),
        _List([w.note(n) for n in v.reverification], ordered=True),
        _Heading(2, w("sec.days")),
        _Chart(_days_chart(v, w)),
        _Chart(_utilisation_chart(v.figures, w, "chart.util_by_hour")),
        _Table(
            [
                w("col.date"),
                w("fig.tasks_total"),
                w("fig.tasks_failed"),
                w("fig.queue_wait_avg"),
                w("fig.gpu_util_avg"),
                w("col.findings_new"),
                w("col.blind"),
            ],
            [
                [
                    d.day.isoformat(),
                    w.integer(d.tasks_total),
                    w.integer(d.tasks_failed),
                    w.duration(d.queue_wait_seconds_avg),
                    w.percent(d.gpu_utilization_avg),
                    w.integer(d.findings_new),
                    w.duration(d.blind_seconds),
                ]
                for d in v.days
            ],
        ),
        _Heading(2, w("sec.headline")),
        _Table(
            [w("col.figure"), w("col.soak_to_date")],
            [[w(key), value(v.figures)] for key, value in _headline_rows(w)],
            "headline",
        ),
    ]
    return blocks


def _criterion_blocks(c: CriterionResult, w: Words) -> list[_Block]:
    status = w(f"verdict.status.{c.status.value}")
    blocks: list[_Block] = [
        _Heading(3, f"{w(f'crit.{c.criterion}')} — {status}"),
        _List([w.note(n) for n in c.evidence]),
    ]
    if c.findings:
        blocks += _finding_items(c.findings, w)
    return blocks


def _days_chart(v: Verdict, w: Words) -> str:
    return charts.bars(
        "tasks-per-day",
        w("chart.tasks_per_day"),
        [d.day.isoformat() for d in v.days],
        [
            charts.Series(w("chart.tasks"), [float(d.tasks_total) for d in v.days]),
            charts.Series(w("chart.failed"), [float(d.tasks_failed) for d in v.days]),
        ],
        lambda x: w.integer(None if x is None else round(x)),
        w("chart.no_data"),
    )


# --- JSON ------------------------------------------------------------------------------


def headline(f: PeriodFigures) -> dict[str, Any]:
    """The stable top-level figures of a period."""
    util = f.gpu.overall
    return {
        "tasks_total": f.tasks.total,
        "tasks_failed": f.tasks.failed,
        "tasks_cancelled": f.tasks.cancelled,
        "tasks_unfinished": f.tasks.unfinished,
        "all_jobs_total": f.all_jobs.total if f.all_jobs else None,
        "all_jobs_failed": f.all_jobs.failed if f.all_jobs else None,
        "all_jobs_complete": f.all_jobs.complete if f.all_jobs else None,
        "queue_wait_seconds_avg": _num(f.queue.overall.avg_seconds),
        "queue_wait_seconds_p50": _num(f.queue.overall.p50_seconds),
        "queue_wait_seconds_p95": _num(f.queue.overall.p95_seconds),
        "gpu_utilization_avg": _num(util.avg_percent if util else None),
        "gpu_utilization_p50": _num(util.p50_percent if util else None),
        "gpu_utilization_p95": _num(util.p95_percent if util else None),
        "gpu_allocated_share": _num(f.gpu.allocated_share),
        "alerts_total": f.alerts.total,
        "manual_interventions_total": f.interventions.total,
        "findings_opened": f.findings.opened,
        "findings_closed": f.findings.closed,
        "findings_still_open": f.findings.still_open,
        "findings_events": f.findings.events,
        "blind_seconds": _num(f.blind.total_seconds),
        "report_deliveries_failed": f.deliveries.failed,
    }


def _period_json(f: PeriodFigures) -> dict[str, Any]:
    return {
        "period": {"start": _iso(f.start), "end": _iso(f.end)},
        **headline(f),
        "tasks": _plain(f.tasks),
        "all_jobs": _plain(f.all_jobs),
        "queue_wait": _plain(f.queue),
        "gpu": _plain(f.gpu),
        "alerts": _plain(f.alerts),
        "manual_interventions": _plain(f.interventions),
        "findings": _plain(f.findings),
        "blind_time": _plain(f.blind),
        "report_deliveries": _plain(f.deliveries),
    }


def daily_json(report: DailyReport, language: Language) -> dict[str, Any]:
    words = Words(language, ZoneInfo(report.timezone))
    day = _period_json(report.figures)

    def beside(f: PeriodFigures) -> dict[str, Any]:
        # Beside the day: its figures without the item lists (in the day's own report).
        data = _period_json(f)
        data["findings"] = {k: v for k, v in data["findings"].items() if k != "items"}
        data["manual_interventions"] = {
            k: v for k, v in data["manual_interventions"].items() if k != "items"
        }
        data["blind_time"] = {k: v for k, v in data["blind_time"].items() if k != "periods"}
        data["report_deliveries"] = {
            k: v for k, v in data["report_deliveries"].items() if k != "failures"
        }
        return data

    return {
        "report": "daily",
        "schema_version": SCHEMA_VERSION,
        "language": language,
        "title": words("title.daily", day=words.day(report.day)),
        "date": report.day.isoformat(),
        "timezone": report.timezone,
        "soak_started_at": _iso(report.soak_started_at),
        **day,
        "previous_day": None if report.previous_day is None else beside(report.previous_day),
        "soak_to_date": beside(report.soak_to_date),
    }


def verdict_json(verdict: Verdict, language: Language) -> dict[str, Any]:
    words = Words(language, ZoneInfo(verdict.timezone))

    def note(n: Note) -> dict[str, Any]:
        return {"key": n.key, "params": _plain(n.params), "text": words.note(n)}

    return {
        "report": "verdict",
        "schema_version": SCHEMA_VERSION,
        "language": language,
        "title": words("title.verdict"),
        "timezone": verdict.timezone,
        "soak_started_at": _iso(verdict.soak_started_at),
        "soak_ended_at": _iso(verdict.soak_ended_at),
        "recommendation": verdict.recommendation.value,
        "recommendation_text": words(f"rec.{verdict.recommendation.value}.text"),
        "scope": [note(n) for n in verdict.scope],
        "criteria": [
            {
                "criterion": c.criterion,
                "title": words(f"crit.{c.criterion}"),
                "status": c.status.value,
                "failure_class": c.failure_class.value if c.failure_class else None,
                "class_reason": note(c.class_reason) if c.class_reason else None,
                "evidence": [note(n) for n in c.evidence],
                "findings": _plain(c.findings),
            }
            for c in verdict.criteria
        ],
        "reverification": [note(n) for n in verdict.reverification],
        "days": _plain(verdict.days),
        **_period_json(verdict.figures),
    }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _num(value: float | None) -> float | None:
    # Rounded so that sums taken in another order (another database) print the same.
    return None if value is None else round(value, 3)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping):
        # Sorted: PostgreSQL's JSONB gives evidence back in its own key order.
        return {str(k): _plain(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple | frozenset | set):
        items = [_plain(v) for v in value]
        return sorted(items) if isinstance(value, frozenset | set) else items
    if isinstance(value, float):
        return _num(value)
    return value


def _json_text(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)
