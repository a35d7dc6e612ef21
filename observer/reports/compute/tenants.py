"""The daily summary's tenant, queue and quota record: per tenant its weight, its quota at the
day's start and each change of it that day (who, when, before and after, in the platform's
words), its over-quota attempts with the platform's answer and how long its quota then took
to free, the GPUs it received against its entitlement in each window that ended that day
(the fairness rule's own assessment), and the utilisation of the GPUs its jobs held. Pure."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from observer.detectors import fairness, quota_reclaim
from observer.domain import ProbeRun, SchedulerNode
from observer.probes.catalog import QUOTA_PROBE, RECLAIM_PROBE
from observer.probes.windows import occurrences
from observer.records import (
    QUOTA_CHANGED,
    StoredIntervention,
    StoredNodeChange,
    StoredQueueSample,
)
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.figures import PeriodFigures
from observer.reports.compute.gpu import UtilizationStats
from observer.reports.compute.queues import WaitStats

_Logged = TypeVar("_Logged", StoredQueueSample, StoredNodeChange)


@dataclass(frozen=True, slots=True)
class QuotaChangeItem:
    """One limit change the platform recorded; `before`: the previous value of each limit it
    sets, for the same subject, in the soak (None: none recorded since the soak began);
    `manager`: the program `by` made it with, where the platform names both."""

    at: datetime
    by: str
    subject: Mapping[str, str]
    before: str | None
    after: str
    manager: str | None = None


@dataclass(frozen=True, slots=True)
class OverQuotaAttempt:
    """One over-quota probe, the platform's answer, and the within-quota probe after it:
    `reclaimed_seconds` from the over-quota run's end to its start (None: it did not start;
    its outcome says how it ended, None while it still waits)."""

    run_id: str
    tenant: str
    submitted_at: datetime | None
    gpus: int
    nodes: int
    outcome: str | None
    reason: str | None
    message: str | None
    reclaim_run_id: str | None
    reclaimed_seconds: float | None
    reclaim_outcome: str | None
    reclaim_reason: str | None


@dataclass(frozen=True, slots=True)
class WindowShare:
    """GPUs one tenant received against its entitlement in one window occurrence, means over
    the queue samples in which its own jobs were held past the wait rule (None: none was)."""

    window: str
    start: datetime
    end: datetime
    received_gpus: float | None
    entitled_gpus: float | None


@dataclass(frozen=True, slots=True)
class TenantRecord:
    tenant: str
    weight: float | None  # None: a tenant the settings do not name
    quota_gpus: int | None  # as configured
    # per limit holder (a quota, a queue) of the tenant's own, its last change before the day
    quota_at_start: tuple[QuotaChangeItem, ...]
    changes: tuple[QuotaChangeItem, ...]
    attempts: tuple[OverQuotaAttempt, ...]
    windows: tuple[WindowShare, ...]
    running_gpus_avg: float | None  # the scheduler's queues
    utilization: UtilizationStats | None  # of the GPUs its jobs held, as sampled
    all_jobs_waits: WaitStats | None  # every job of its that started, from the listings
    sm_active: UtilizationStats | None = None  # GPM's, of the same GPUs; None: none reported


@dataclass(frozen=True, slots=True)
class TenantFigures:
    tenants: tuple[TenantRecord, ...]
    other_changes: tuple[QuotaChangeItem, ...]  # limits of no one tenant (a QOS)


def tenant_figures(
    day: PeriodData, soak: PeriodData, context: ReportContext, figures: PeriodFigures
) -> TenantFigures:
    """`soak` runs from the soak's start to the day's end; `figures` are the day's."""
    start = day.period.start
    history = [i for i in soak.interventions if i.detail.get("action") == QUOTA_CHANGED]
    items = _with_before(history)
    todays = [c for c in items if start <= c.at < day.period.end]
    reclaims = {r.reclaims_run_id: r for r in soak.runs if r.probe == RECLAIM_PROBE}
    attempts = [
        _attempt(run, reclaims.get(run.run_id)) for run in day.runs if run.probe == QUOTA_PROBE
    ]
    windows = _window_shares(day, soak, context)
    names = sorted(
        context.tenants.keys()
        | {c.subject["tenant"] for c in todays if "tenant" in c.subject}
        | {a.tenant for a in attempts}
    )
    records = []
    for name in names:
        terms = context.tenants.get(name)
        before = {
            tuple(sorted(c.subject.items())): c
            for c in items
            if c.at < start and c.subject.get("tenant") == name and "user" not in c.subject
        }
        waits = figures.all_jobs.waits_by_tenant if figures.all_jobs else {}
        records.append(
            TenantRecord(
                tenant=name,
                weight=terms.weight if terms else None,
                quota_gpus=terms.quota_gpus if terms else None,
                quota_at_start=tuple(before[key] for key in sorted(before)),
                changes=tuple(c for c in todays if c.subject.get("tenant") == name),
                attempts=tuple(a for a in attempts if a.tenant == name),
                windows=tuple(s for tenant, s in windows if tenant == name),
                running_gpus_avg=figures.gpu.tenant_running_gpus_avg.get(name),
                utilization=figures.gpu.by_tenant.get(name),
                all_jobs_waits=waits.get(name),
                sm_active=figures.gpu.sm_by_tenant.get(name),
            )
        )
    return TenantFigures(
        tenants=tuple(records),
        other_changes=tuple(c for c in todays if "tenant" not in c.subject),
    )


def _with_before(changes: Sequence[StoredIntervention]) -> list[QuotaChangeItem]:
    """Each change with the previous value of each limit it sets, for the same subject, in
    the platform's words ("GrpTRES=gres/gpu=3" before "GrpTRES=gres/gpu=2"): a change is
    `limit=value` words separated by spaces (QuotaChange), the limit named before the first
    "=" (a Slurm QOS list's `QOS+=` and `QOS-=` as `QOS`)."""
    last: dict[tuple[tuple[tuple[str, str], ...], str], str] = {}
    items = []
    for change in changes:
        key = tuple(sorted(change.subject.items()))
        after = str(change.detail.get("change", change.reason))
        limits = [(part.split("=", 1)[0].rstrip("+-"), part) for part in after.split()]
        before = [last[key, name] for name, _ in limits if (key, name) in last]
        manager = change.detail.get("manager")
        items.append(
            QuotaChangeItem(
                change.at,
                change.by,
                change.subject,
                " ".join(before) or None,
                after,
                str(manager) if manager else None,
            )
        )
        last.update(((key, name), part) for name, part in limits)
    return items


def _attempt(run: ProbeRun, reclaim: ProbeRun | None) -> OverQuotaAttempt:
    reclaimed = None
    if reclaim is not None and run.finished_at is not None:
        reclaimed = quota_reclaim.reclaimed_seconds(reclaim, run.finished_at)
    return OverQuotaAttempt(
        run_id=run.run_id,
        tenant=run.tenant,
        submitted_at=run.submitted_at,
        gpus=run.gpus,
        nodes=run.nodes,
        outcome=run.outcome.value if run.outcome else None,
        reason=run.reason,
        message=run.message,
        reclaim_run_id=reclaim.run_id if reclaim else None,
        reclaimed_seconds=reclaimed,
        reclaim_outcome=reclaim.outcome.value if reclaim and reclaim.outcome else None,
        reclaim_reason=reclaim.reason if reclaim else None,
    )


def _window_shares(
    day: PeriodData, soak: PeriodData, context: ReportContext
) -> list[tuple[str, WindowShare]]:
    """Each window occurrence that ended in the day (and began in the soak), assessed as the
    fairness rule assesses it."""
    if context.fairness is None:
        return []
    found = []
    for window in context.calendar.windows:
        for occurrence in occurrences(
            context.calendar, window.name, soak.period.start, day.period.end
        ):
            if occurrence.end < day.period.start:
                continue
            inside = _during(soak.queue_samples, occurrence.start, occurrence.end)
            runs = [
                r
                for r in soak.runs
                if r.probe in context.fairness_probes
                and r.window == occurrence.window
                and r.submitted_at is not None
                and occurrence.start <= r.submitted_at < occurrence.end
            ]
            capacity = fairness.capacity_over(
                _nodes_at(soak.nodes_at_start, soak.node_changes, occurrence.start),
                _during(soak.node_changes, occurrence.start, occurrence.end),
            )
            assessment = fairness.assess_window(
                occurrence,
                runs,
                inside,
                {t: terms.weight for t, terms in context.tenants.items()},
                capacity,
                context.fairness,
                quotas={
                    t: terms.quota_gpus
                    for t, terms in context.tenants.items()
                    if terms.quota_gpus is not None
                },
            )
            found += [
                (
                    t.tenant,
                    WindowShare(
                        occurrence.window,
                        occurrence.start,
                        occurrence.end,
                        t.received_gpus,
                        t.entitled_gpus,
                    ),
                )
                for t in assessment.tenants
            ]
    return sorted(found, key=lambda pair: (pair[0], pair[1].start, pair[1].window))


def _during(log: Sequence[_Logged], start: datetime, end: datetime) -> Sequence[_Logged]:
    """The entries of a time-ordered log taken in [start, end): each window's stretch of
    the soak's log, not a scan of the whole soak per window."""
    return log[bisect_left(log, start, key=_at) : bisect_left(log, end, key=_at)]


def _at(entry: StoredQueueSample | StoredNodeChange) -> datetime:
    return entry.at


def _nodes_at(
    at_start: Sequence[SchedulerNode], changes: Sequence[StoredNodeChange], when: datetime
) -> list[SchedulerNode]:
    nodes = {node.name: node for node in at_start}
    for change in changes:
        if change.at >= when:
            break
        if change.removed:
            nodes.pop(change.node.name, None)
        else:
            nodes[change.node.name] = change.node
    return list(nodes.values())
