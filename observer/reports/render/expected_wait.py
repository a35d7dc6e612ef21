"""Expected wait, as blocks: whether the platform tells waiting jobs when they will start, said
as a finding of the soak when it told none of them, and per tenant and size the error of its
estimate and of the observer's own beside it, in signed minutes (late: positive)."""

from __future__ import annotations

from observer.reports.compute.expected_wait import ExpectedWait, ExpectedWaitRow
from observer.reports.render.blocks import Block, Heading, Table, Text
from observer.reports.render.i18n import Words


def expected_wait_blocks(figures: ExpectedWait, w: Words) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, w("sec.expected_wait"), anchor="expected_wait"),
        Text(w("note.expected_wait"), "note"),
    ]
    if not figures.waited:
        blocks.append(Text(w("expected_wait.not_observed")))
    elif not figures.platform_estimate:
        jobs = sum(r.jobs for r in figures.rows if r.source == "platform")
        blocks.append(Text(w("expected_wait.none_from_platform", jobs=jobs)))
    if not figures.rows:
        return blocks
    columns = [
        w("col.tenant"),
        w("col.size_gpus"),
        w("col.estimate_source"),
        w("col.jobs_started"),
        w("col.estimate_error_p50_minutes"),
        w("col.estimate_error_p90_minutes"),
        w("col.without_estimate"),
    ]
    return [*blocks, Table(columns, [_row(r, w) for r in figures.rows])]


def _row(row: ExpectedWaitRow, w: Words) -> list[str]:
    return [
        row.tenant,
        w.integer(row.gpus),
        w(f"estimate_source.{row.source}"),
        w.integer(row.jobs),
        _minutes(row.error_p50_seconds, w),
        _minutes(row.error_p90_seconds, w),
        w.share(row.without_estimate_share),
    ]


def _minutes(seconds: float | None, w: Words) -> str:
    if seconds is None:
        return "—"
    text = w.decimal(seconds / 60, 1)
    return f"+{text}" if seconds > 0 else text
