"""The daily summary's inference-service section: availability and latency per window, and
each change the service carried through."""

from __future__ import annotations

from observer.reports.compute.inference import OUTSIDE_WINDOWS, WHOLE_DAY, InferenceFigures
from observer.reports.render.blocks import Block, Heading, Table, Text
from observer.reports.render.i18n import Words


def inference_blocks(figures: InferenceFigures | None, w: Words) -> list[Block]:
    if figures is None:
        return []

    def window(name: str) -> str:
        if name == WHOLE_DAY:
            return w("inference.whole_day")
        return w("inference.outside_windows") if name == OUTSIDE_WINDOWS else name

    def ms(value: float | None) -> str:
        return w("inference.ms", ms=w.decimal(value)) if value is not None else w.decimal(None)

    blocks: list[Block] = [
        Heading(2, w("sec.inference"), anchor="inference"),
        Text(w("inference.services", services=w.names(figures.services))),
        Heading(3, w("sub.inference_windows")),
        Table(
            [
                w("col.window"),
                w("col.availability"),
                w("col.requests"),
                w("col.errors"),
                w("col.p50"),
                w("col.p95"),
                w("col.p99"),
            ],
            [
                [
                    window(row.window),
                    w.share(row.availability),
                    w.integer(row.requests),
                    w.integer(row.errors),
                    ms(row.p50_ms),
                    ms(row.p95_ms),
                    ms(row.p99_ms),
                ]
                for row in figures.windows
            ],
            "inference-windows",
        ),
        Text(w("note.inference_availability"), "note"),
        Heading(3, w("sub.inference_phases")),
    ]
    if not figures.phases:
        blocks.append(Text(w("note.no_items")))
        return blocks
    blocks.append(
        Table(
            [
                w("col.phase"),
                w("col.window"),
                w("col.started"),
                w("col.replicas"),
                w("col.time_to_ready"),
                w("col.waited_for_node"),
                w("col.unavailable"),
            ],
            [
                [
                    w(f"inference.phase.{row.kind.value}"),
                    w.names([window(name) for name in row.windows]),
                    w.instant(row.phase.started_at),
                    w(
                        "inference.replicas",
                        before=row.phase.replicas_from,
                        after=row.phase.replicas_to,
                    ),
                    w.duration(row.ready_seconds),
                    w.aside(
                        w.duration(row.phase.pending_seconds), w.quoted(row.phase.pending_reason)
                    )
                    if row.phase.pending_reason
                    else w.duration(row.phase.pending_seconds),
                    w.duration(row.phase.unavailable_seconds),
                ]
                for row in figures.phases
            ],
            "inference-phases",
        )
    )
    return blocks
