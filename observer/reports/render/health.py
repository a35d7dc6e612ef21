"""The daily summary's GPU and node health section as blocks: the GPUs with faults by node,
the incidents with their symptoms under each, the Xid codes seen, and the platform's reaction
to fatal faults; one sentence on a healthy day, said only where the agents saw the GPUs."""

from __future__ import annotations

from observer.detectors.gpu_health import CLOCK_SLOWDOWN
from observer.domain import JsonValue
from observer.reports.compute.figures import PeriodFigures
from observer.reports.compute.health import (
    GpuCondition,
    GpuHealthFigures,
    GpuHealthRow,
    GpuIncident,
    PlacedJob,
    Reaction,
    XidCount,
    health_note,
)
from observer.reports.render.blocks import Block, Heading, Link, Table, Text
from observer.reports.render.i18n import Words
from observer.reports.render.tasks import run_anchor, short_run_id

JOBS_NAMED = 5  # jobs named in a cell; the rest are counted


def health_blocks(day: PeriodFigures, w: Words) -> list[Block]:
    h = day.health
    blocks: list[Block] = [Heading(2, w("sec.health"), anchor="health")]
    note = health_note(h)
    if note is not None:
        blocks.append(Text(w.note(note), "note"))
    if h.gpus:
        blocks += [
            Heading(3, w("sub.health_gpus")),
            Table(
                [
                    w("col.node"),
                    w("col.gpu"),
                    w("col.xids"),
                    w("col.gpu_conditions"),
                    w("col.throttled_gpu_hours"),
                ],
                [_gpu_row(row, h, w) for row in h.gpus],
            ),
            Text(w("note.health_throttled", hours=w.decimal(h.throttled_gpu_hours, 2)), "note"),
        ]
    if h.incidents:
        blocks += [
            Heading(3, w("sub.health_incidents")),
            Text(
                w(
                    "note.health_incidents",
                    incidents=len(h.incidents),
                    fatal=sum(1 for i in h.incidents if i.fatal),
                    findings=sum(len(i.symptoms) for i in h.incidents),
                ),
                "note",
            ),
            Table(
                [w("col.node"), w("col.gpu"), w("col.fatal"), w("col.symptoms")],
                [_incident_row(i, w) for i in h.incidents],
            ),
        ]
    if h.xids:
        blocks += [
            Heading(3, w("sub.health_xids")),
            Table(
                [
                    w("col.xid"),
                    w("col.meaning"),
                    w("col.class"),
                    w("col.fatal"),
                    w("col.count"),
                    w("col.nodes"),
                ],
                [
                    [
                        str(x.code),
                        w("xid_meaning", xid_meaning=str(x.code)) if x.meaning else "—",
                        _xid_class(x.xid_class, w),
                        w("word.yes") if x.fatal else w("word.no"),
                        w.integer(x.count),
                        w.names(x.nodes),
                    ]
                    for x in h.xids
                ],
            ),
        ]
    if h.reactions:
        blocks += [
            Heading(3, w("sub.health_reaction")),
            Table(
                [
                    w("col.node"),
                    w("col.fault"),
                    w("col.fault_at"),
                    w("col.out_of_service_after"),
                    w("col.kept_in_service_since"),
                    w("col.jobs_placed"),
                ],
                [_reaction_row(r, w) for r in h.reactions],
            ),
        ]
    if h.ended_attempts:
        blocks += [
            Heading(3, w("sub.health_ended_attempts")),
            Table(
                [w("col.node"), w("col.ended_at"), w("col.reason"), w("col.probe"), w("col.run")],
                [
                    [
                        w.names(a.nodes) if a.nodes else "—",
                        w.instant(a.ended_at),
                        w.quoted(" — ".join(x for x in (a.state, a.reason) if x)),
                        a.probe,
                        (Link(short_run_id(a.run_id), run_anchor(a.run_id)),),
                    ]
                    for a in h.ended_attempts
                ],
            ),
        ]
    return blocks


def _gpu_row(row: GpuHealthRow, h: GpuHealthFigures, w: Words) -> list[str]:
    classes = {str(x.code): x for x in h.xids}
    xids = [_xid_cell(code, count, classes[code], w) for code, count in row.xids.items()]
    conditions = [
        _condition(detector, held, w)
        for detector, held in row.conditions.items()
        if detector != CLOCK_SLOWDOWN  # its own column
    ]
    return [
        row.node,
        row.gpu,
        w.lines(xids) or "—",
        w.lines(conditions) or "—",
        w.decimal(row.throttled_gpu_hours, 2) if row.throttled_gpu_hours else "—",
    ]


def _incident_row(incident: GpuIncident, w: Words) -> list[str]:
    symptoms = []
    for s in incident.symptoms:
        name = w(f"health.cond.{s.detector}") + ("" if s.xid is None else f" {s.xid}")
        at = s.opened_at.isoformat()
        symptoms.append(
            w("health.symptom_open", symptom=name, at=at)
            if s.closed_at is None
            else w("health.symptom", symptom=name, at=at)
        )
    return [
        incident.node,
        incident.gpu or "—",
        w("word.yes") if incident.fatal else w("word.no"),
        w.lines(symptoms),
    ]


def _condition(detector: str, held: GpuCondition, w: Words) -> str:
    text = (
        w(f"health.measured.{detector}", **held.measured)
        if held.measured
        else w(f"health.cond.{detector}")
    )
    return w("health.open_at_end", condition=text) if held.open_at_end else text


def _xid_class(xid_class: str | None, w: Words) -> str:
    return w(f"xid_class.{xid_class}") if xid_class else w("word.unknown")


def _xid_cell(code: str, count: int, xid: XidCount, w: Words) -> str:
    params: dict[str, JsonValue] = {
        "code": code,
        "count": count,
        "xid_class": _xid_class(xid.xid_class, w),
    }
    return w("health.xid_cell_fatal", **params) if xid.fatal else w("health.xid_cell", **params)


def _reaction_row(r: Reaction, w: Words) -> list[str]:
    fault = w(f"health.cond.{r.fault}") + ("" if r.xid is None else f" {r.xid}")
    after = r.out_of_service_after_seconds
    return [
        r.node,
        fault,
        w.instant(r.fault_at),
        w("health.not_out_of_service") if after is None else w.duration(after),
        w.instant(r.kept_in_service_since),
        _jobs(r.jobs_placed, w),
    ]


def _jobs(jobs: tuple[PlacedJob, ...], w: Words) -> str:
    if not jobs:
        return "—"
    named = [
        w(
            "health.job",
            job_id=j.job_id,
            tenant=j.tenant or "—",
            started_at=j.started_at.isoformat() if j.started_at else None,
        )
        for j in jobs[:JOBS_NAMED]
    ]
    return w("health.jobs", count=len(jobs), jobs=w.names(named, max(len(jobs) - JOBS_NAMED, 0)))
