"""The daily summary's sections on what happened around the platform, as blocks: alerts,
manual interventions, findings with their evidence, blind time with the observer's own
restarts, and report deliveries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from observer.reports.compute.events import (
    BLIND_SOURCES,
    NOT_SET_UP,
    SCHEDULER_GAP,
    BlindPeriod,
    FindingFigures,
    FindingItem,
)
from observer.reports.compute.figures import PeriodFigures
from observer.reports.render.blocks import Block, Evidence, Heading, Table, Text
from observer.reports.render.headline import blind_part_text, blind_text
from observer.reports.render.i18n import Words
from observer.reports.render.json import plain


def alert_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[Block]:
    blocks: list[Block] = [Heading(2, w("sec.alerts"), anchor="alerts")]
    if day.alerts.total is None:
        return [*blocks, Text(w("note.alerts_not_set_up"), "note")]
    blind = day.blind.by_source.get("alerts")
    if blind:
        blocks.append(Text(w("note.alerts_blind", blind_seconds=blind), "note"))

    def counts(f: PeriodFigures | None) -> dict[tuple[str, str | None], int]:
        return {} if f is None else {(a.name, a.severity): a.count for a in f.alerts.by_name}

    today, before, overall = counts(day), counts(prev), counts(soak)
    keys = sorted(today.keys() | before.keys(), key=lambda k: (-today.get(k, 0), k[0], k[1] or ""))
    if not keys:
        return [*blocks, Text(w("note.no_items"))]
    return [
        *blocks,
        Table(
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
                    w.severity(severity) if severity else "—",
                    w.integer(today.get((name, severity), 0)),
                    w.integer(before.get((name, severity), 0)) if prev else "—",
                    w.integer(overall.get((name, severity), 0)),
                ]
                for name, severity in keys
            ],
        ),
    ]


def intervention_blocks(day: PeriodFigures, w: Words) -> list[Block]:
    items = day.interventions.items
    blocks: list[Block] = [Heading(2, w("sec.interventions"), anchor="interventions")]
    if not items:
        return [*blocks, Text(w("note.no_items"))]
    return [
        *blocks,
        Table(
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


def finding_blocks(day: PeriodFigures, soak: PeriodFigures, w: Words) -> list[Block]:
    f = day.findings
    detectors = sorted(f.by_detector)
    blocks: list[Block] = [
        Heading(2, w("sec.findings"), anchor="findings"),
        Heading(3, w("sub.by_detector")),
    ]
    if not detectors:
        return [*blocks, Text(w("note.no_items"))]
    blocks.append(
        Table(
            [
                w("col.detector"),
                w("col.opened"),
                w("col.closed"),
                w("col.still_open"),
                w("col.events"),
                w.aside(w("col.soak_to_date"), f"{w('col.opened')} + {w('col.events')}"),
            ],
            [
                [
                    w.detector(d),
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
    blocks += _incident_blocks(f, w)
    blocks.append(Heading(3, w("sub.evidence")))
    blocks += finding_items(f.items, w)
    return blocks


def _incident_blocks(f: FindingFigures, w: Words) -> list[Block]:
    shown = [i for i in f.incidents if len(i.findings) > 1]
    blocks: list[Block] = [
        Heading(3, w("sub.incidents")),
        Text(w("note.incidents", incidents=len(f.incidents), findings=len(f.items)), "note"),
    ]
    if not shown:
        return blocks
    blocks.append(
        Table(
            [
                w("col.opened"),
                w("col.closed"),
                w("col.subject"),
                w("col.severity"),
                w("col.findings"),
                w("col.detectors"),
            ],
            [
                [
                    w.instant(i.opened_at),
                    w.instant(i.closed_at) if i.closed_at else "—",
                    _subject(i.subject),
                    w(f"severity.{i.severity}"),
                    w.integer(len(i.findings)),
                    w.names([w.detector(d) for d in i.detectors]),
                ]
                for i in shown
            ],
        )
    )
    return blocks


def _blind_cause(period: BlindPeriod, w: Words) -> str:
    if period.source == "controller":
        return w(f"restart.{period.cause}")
    if period.cause == SCHEDULER_GAP:
        return w("cause.snapshot_gap")
    if period.cause == NOT_SET_UP:
        return w("word.not_set_up")
    return w.detector(period.cause)


def finding_items(items: Sequence[FindingItem], w: Words) -> list[Block]:
    blocks: list[Block] = [
        Table(
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
                    w.detector(i.detector),
                    w(f"severity.{i.severity}"),
                    w(f"status.{i.status}"),
                    _subject(i.subject),
                    w.finding(i.sentence, i.summary),
                ]
                for i in items
            ],
        )
    ]
    blocks += [
        Evidence(
            f"{w.detector(i.detector)} · {_subject(i.subject)} · {w.instant(i.opened_at)}",
            {
                # The stored summary is English: another language reads the finding's sentence.
                "summary": i.summary if w.language == "en" else w.finding(i.sentence, i.summary),
                "evidence": plain(i.evidence, w.timezone),
            },
        )
        for i in items
    ]
    return blocks


def blind_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[Block]:
    b = day.blind

    def seconds(f: PeriodFigures | None, source: str, agent: str | None = None) -> str:
        if f is None:
            return "—"
        if source in f.blind.not_set_up:
            return w("word.not_set_up")
        if agent is None:
            part = f.blind.by_source_part.get(source)
            return (
                w.duration(f.blind.by_source.get(source))
                if part is None
                else blind_part_text(part, w)
            )
        return w.duration(f.blind.by_agent.get(agent, 0.0))

    # Every source, each blind agent under the agents: not set up is never read as healthy.
    rows = []
    for s in BLIND_SOURCES:
        rows.append([w(f"src.{s}"), seconds(day, s), seconds(prev, s), seconds(soak, s)])
        if s == "agents":
            rows += [
                [
                    f"{w('src.agents')} · {a}",
                    seconds(day, s, a),
                    seconds(prev, s, a),
                    seconds(soak, s, a),
                ]
                for a in sorted(b.by_agent)
            ]
    blocks: list[Block] = [
        Heading(2, w("sec.blind"), anchor="blind"),
        Table(
            [w("col.source"), w("col.day"), w("col.previous_day"), w("col.soak_to_date")],
            [
                *rows,
                [
                    "*",
                    blind_text(day, w),
                    blind_text(prev, w) if prev else "—",
                    blind_text(soak, w),
                ],
            ],
        ),
    ]
    if b.periods:
        blocks.append(
            Table(
                [
                    w("col.source"),
                    w("col.subject"),
                    w("col.cause"),
                    w("col.from"),
                    w("col.to"),
                    w("col.duration"),
                ],
                [
                    [
                        w(f"src.{p.source}"),
                        p.subject,
                        _blind_cause(p, w),
                        w.instant(p.start),
                        w.instant(p.end),
                        w.duration(p.seconds),
                    ]
                    for p in b.periods
                ],
            )
        )
    if b.restarts:
        blocks += [
            Heading(3, w("sub.restarts")),
            Table(
                [w("col.down_from"), w("col.up_at"), w("col.duration"), w("col.cause")],
                [
                    [
                        w.instant(r.down_from),
                        w.instant(r.up_at),
                        w.duration((r.up_at - r.down_from).total_seconds()),
                        w(f"restart.{r.cause.value}"),
                    ]
                    for r in b.restarts
                ],
            ),
        ]
    notes = [w("note.scheduler_gaps", limit_seconds=b.scheduler_gap_seconds)]
    if b.not_set_up:
        notes.append(
            w("note.blind_not_set_up", sources=w.names([w(f"src.{s}") for s in b.not_set_up]))
        )
    return blocks + [Text(n, "note") for n in notes]


def delivery_blocks(day: PeriodFigures, w: Words) -> list[Block]:
    d = day.deliveries
    blocks: list[Block] = [Heading(2, w("sec.deliveries"), anchor="deliveries")]
    if d.failures:
        blocks += [
            Text(w("note.deliveries_failed", failed=d.failed, total=d.total)),
            Table(
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
        blocks.append(Text(w("note.deliveries_all", total=d.total)))
    else:
        blocks.append(Text(w("note.deliveries_none")))
    if not d.channels:
        blocks.append(Text(w("note.deliveries_no_channels"), "note"))
    return blocks
