"""The daily summary's tenant, queue and quota record as blocks: one row per tenant, then
the day's quota changes, its over-quota attempts with the release after each, and the GPUs
each tenant received against its entitlement per window."""

from __future__ import annotations

from collections.abc import Mapping

from observer.domain import Expectation
from observer.reports.compute.tenants import OverQuotaAttempt, QuotaChangeItem, TenantFigures
from observer.reports.render.blocks import Block, Heading, Link, Table, Text
from observer.reports.render.i18n import Words
from observer.reports.render.tasks import run_anchor, short_run_id


def tenant_blocks(figures: TenantFigures, w: Words) -> list[Block]:
    blocks: list[Block] = [Heading(2, w("sec.tenants"), anchor="tenants")]
    records = figures.tenants
    if not records:
        return [*blocks, Text(w("note.no_items"))]
    blocks.append(
        Table(
            [
                w("col.tenant"),
                w("col.weight"),
                w("col.quota_configured"),
                w("col.quota_at_start"),
                w("col.quota_changes"),
                w("col.over_quota_attempts"),
                w("col.reclaimed_longest"),
                w("col.all_jobs_wait_avg"),
                w("col.all_jobs_wait_p95"),
                w("col.running_gpus_avg"),
                w("col.utilisation_avg"),
                w("col.sm_active_avg"),
            ],
            [
                [
                    r.tenant,
                    w.decimal(r.weight, 2),
                    w.integer(r.quota_gpus) if r.quota_gpus is not None else w("word.none"),
                    _quota_at_start(r.quota_at_start, w),
                    w.integer(len(r.changes)),
                    w.integer(len(r.attempts)),
                    _longest(r.attempts, w),
                    w.duration(r.all_jobs_waits.avg_seconds if r.all_jobs_waits else None),
                    w.duration(r.all_jobs_waits.p95_seconds if r.all_jobs_waits else None),
                    w.decimal(r.running_gpus_avg),
                    w.percent(r.utilization.avg_percent if r.utilization else None),
                    w.percent(r.sm_active.avg_percent if r.sm_active else None),
                ]
                for r in records
            ],
        )
    )
    blocks.append(Text(w("note.tenant_utilisation"), "note"))
    changes = [c for r in records for c in r.changes] + list(figures.other_changes)
    blocks += [Heading(3, w("sub.quota_changes"))]
    if changes:
        blocks.append(
            Table(
                [w("col.at"), w("col.subject"), w("col.by"), w("col.before"), w("col.after")],
                [
                    [
                        w.instant(c.at),
                        _subject(c.subject),
                        _by(c, w),
                        c.before or w("word.not_recorded"),
                        c.after,
                    ]
                    for c in sorted(changes, key=lambda c: (c.at, sorted(c.subject.items())))
                ],
            )
        )
    else:
        blocks.append(Text(w("note.no_items")))
    attempts = [a for r in records for a in r.attempts]
    blocks += [Heading(3, w("sub.over_quota"))]
    if attempts:
        blocks += [
            Table(
                [
                    w("col.submitted"),
                    w("col.tenant"),
                    w("col.asked"),
                    w("col.outcome"),
                    w("col.platform_words"),
                    w("col.reclaimed_after"),
                    w("col.run"),
                ],
                [
                    [
                        w.instant(a.submitted_at),
                        a.tenant,
                        w("cell.asked", gpus=a.gpus, nodes=a.nodes),
                        # An over-quota probe is expected to be refused (or held).
                        w.outcome(a.outcome, Expectation.BLOCKED)
                        if a.outcome
                        else w("word.unfinished"),
                        _words(a.reason, a.message, w),
                        _reclaimed(a, w),
                        (Link(short_run_id(a.run_id), run_anchor(a.run_id)),),
                    ]
                    for a in attempts
                ],
            ),
            Text(w("note.reclaim"), "note"),
        ]
    else:
        blocks.append(Text(w("note.no_items")))
    shares = [(r.tenant, s) for r in records for s in r.windows]
    blocks += [Heading(3, w("sub.received_entitled"))]
    if not shares:
        return [*blocks, Text(w("note.no_items"))]
    return [
        *blocks,
        Table(
            [
                w("col.window"),
                w("col.from"),
                w("col.tenant"),
                w("col.received_gpus"),
                w("col.entitled_gpus"),
                w("col.received_share"),
            ],
            [
                [
                    s.window,
                    w.instant(s.start),
                    tenant,
                    w.decimal(s.received_gpus),
                    w.decimal(s.entitled_gpus),
                    w.share(
                        s.received_gpus / s.entitled_gpus
                        if s.received_gpus is not None and s.entitled_gpus
                        else None
                    ),
                ]
                for tenant, s in sorted(shares, key=lambda p: (p[1].start, p[1].window, p[0]))
            ],
        ),
        Text(w("note.received_entitled"), "note"),
    ]


def _quota_at_start(changes: tuple[QuotaChangeItem, ...], w: Words) -> str:
    if not changes:
        return w("word.not_recorded")
    return w("subject.separator").join(
        w("cell.quota_since", change=c.after, at=c.at.isoformat(), by=_by(c, w)) for c in changes
    )


def _by(change: QuotaChangeItem, w: Words) -> str:
    if not change.by:
        return w("word.unknown")
    if change.manager is None:
        return change.by
    return w("cell.changed_by_with", actor=change.by, manager=change.manager)


def _longest(attempts: tuple[OverQuotaAttempt, ...], w: Words) -> str:
    if any(a.reclaim_run_id and a.reclaimed_seconds is None for a in attempts):
        return w("cell.not_reclaimed")
    times = [a.reclaimed_seconds for a in attempts if a.reclaimed_seconds is not None]
    return w.duration(max(times)) if times else "—"


def _reclaimed(a: OverQuotaAttempt, w: Words) -> str:
    if a.reclaim_run_id is None:
        return "—"
    if a.reclaimed_seconds is not None:
        return w.duration(a.reclaimed_seconds)
    if a.reclaim_outcome is None:
        return w("cell.reclaim_waiting", reason=a.reclaim_reason or "—")
    return w("cell.reclaim_never", outcome=a.reclaim_outcome, reason=a.reclaim_reason or "—")


def _words(reason: str | None, message: str | None, w: Words) -> str:
    """The platform's own words, quoted as such."""
    said = ": ".join(p for p in (reason, message) if p)
    return w.quoted(said) if said else "—"


def _subject(subject: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(subject.items()))
