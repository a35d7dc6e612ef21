"""Reads what a report needs from the Store: the only I/O of report building. Days are the
platform's (controller.timezone), half-open, from local midnight to local midnight."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, time, timedelta
from typing import TypeVar
from zoneinfo import ZoneInfo

from observer.domain import Behaviour
from observer.errors import ReportError
from observer.probes.windows import Calendar, Window, parse_days, parts_in
from observer.records import (
    GpuMeasure,
    StoredNodeChange,
    StoredQueueSample,
    TenantTaskCounts,
    job_slot,
)
from observer.reports.compute.criteria.result import ScoreLayer, VerdictRules
from observer.reports.compute.daily import DailyInputs
from observer.reports.compute.data import (
    GpuUsage,
    Period,
    PeriodData,
    ReportContext,
    Sources,
    TenantTerms,
    allocation,
    counts_are_exact,
    gpu_usage,
    gpu_usage_of_counts,
)
from observer.reports.compute.run_surroundings import run_spans
from observer.reports.compute.verdict import VerdictInputs
from observer.reports.deliver import configured_channels
from observer.settings import Settings
from observer.storage.gpu_samples import hour_of
from observer.storage.store import Store


def calendar_of(settings: Settings) -> Calendar:
    cfg = settings.controller
    return Calendar(
        ZoneInfo(cfg.timezone),
        [Window(w.name, parse_days(w.days), w.start, w.end) for w in cfg.windows],
    )


def day_period(day: date, timezone: ZoneInfo) -> Period:
    """The local day [midnight, next midnight), 23 or 25 hours long across a DST change."""
    return Period(
        datetime.combine(day, time(0), tzinfo=timezone),
        datetime.combine(day + timedelta(days=1), time(0), tzinfo=timezone),
    )


def soak_started_at(store: Store, settings: Settings) -> datetime | None:
    """The configured start, else the first stored probe run's submission."""
    if settings.reports.soak_started_at is not None:
        return settings.reports.soak_started_at
    return store.first_submitted_at()


def report_context(settings: Settings, started_at: datetime) -> ReportContext:
    cfg = settings.controller
    catalog = cfg.probe_catalog()

    def behaving(behaviour: Behaviour) -> frozenset[str]:
        return frozenset(n for n, s in catalog.items() if s.workload.behaviour is behaviour)

    return ReportContext(
        calendar=calendar_of(settings),
        sources=Sources(
            agents=cfg.agents_configured,
            prometheus=cfg.prometheus_url is not None,
            alertmanager=settings.reports.alertmanager_url is not None,
            logs=cfg.logs.reader != "none",
        ),
        snapshot_interval_seconds=cfg.snapshot_interval_seconds,
        alive_interval_seconds=cfg.alive_interval_seconds,
        soak_started_at=started_at,
        ignored_alerts=frozenset(settings.reports.ignored_alerts),
        delivery_channels=configured_channels(settings.reports.delivery),
        canary_probes=behaving(Behaviour.LOG_CANARY),
        busy_probes=behaving(Behaviour.GPU_BUSY),
        planned_copies={e.probe: catalog[e.probe].copies for e in cfg.plan},
        tenants={t.name: TenantTerms(t.weight, t.quota_gpus) for t in cfg.tenants},
        fairness=settings.detectors.fairness,
        gpu_sample_seconds=gpu_sample_seconds(
            cfg.gpu_sample_interval_seconds, cfg.observe_interval_seconds
        ),
        gpu_hour_price=dict(settings.reports.gpu_hour_price),
        currency=settings.reports.currency,
    )


def gpu_sample_seconds(interval: float, observe_every: float) -> float:
    """The time a stored GPU sample stands for: the agents are read every `observe_every`
    seconds, and a GPU's sample is kept at the first read `interval` after its last."""
    return max(math.ceil(interval / observe_every), 1) * observe_every


def load_period(
    store: Store,
    context: ReportContext,
    period: Period,
    gpu: GpuUsage | None = None,
    within: PeriodData | None = None,
) -> PeriodData:
    """Everything stored about `period`; `gpu` when its samples are already reduced;
    `within`, a loaded period that holds this one, whose node log and queue samples (the
    bulk of a large fleet's) are cut rather than read again."""
    start, end = period.start, period.end
    nodes = store.node_states(start)
    changes: Sequence[StoredNodeChange]
    queues: Sequence[StoredQueueSample]
    if within is None:
        changes = store.node_changes(start, end)
        queues = store.queue_samples(start, end)
    else:
        changes = _cut(within.node_changes, period)
        queues = _cut(within.queue_samples, period)
    if gpu is None:
        gpu = _gpu(store, context, period)
    return PeriodData(
        period=period,
        runs=store.runs(since=start, until=end),
        findings=[f for f in store.findings(since=start) if f.opened_at < end],
        queue_samples=queues,
        nodes_at_start=nodes,
        node_changes=changes,
        gpu=gpu,
        allocation=allocation(period, nodes, changes, context.calendar),
        alerts=store.alerts(start, end),
        interventions=store.interventions(start, end),
        deliveries=store.deliveries(since=start, until=end),
        job_slots=store.job_slots(job_slot(start), end),
        pending_times=store.pending_times(job_slot(start), end),
        controller_runs=store.controller_runs(until=end),
        probe_skips=store.probe_skips(start, end),
        usage=store.gpu_usage_counts(start, end),
    )


_Entry = TypeVar("_Entry", StoredNodeChange, StoredQueueSample)


def _cut(log: Sequence[_Entry], period: Period) -> Sequence[_Entry]:
    """The part of a log in time order that falls in `period`."""
    return log[bisect_left(log, period.start, key=_at) : bisect_left(log, period.end, key=_at)]


def _at(entry: StoredNodeChange | StoredQueueSample) -> datetime:
    return entry.at


def _gpu(store: Store, context: ReportContext, period: Period) -> GpuUsage:
    pools = {
        **store.first_pools(period.start, period.end),
        **{n.name: n.pool for n in store.node_states(period.end)},
    }
    calendar = context.calendar
    if counts_are_exact(calendar):
        utilization, sm_active = (
            gpu_usage_of_counts(
                store.gpu_sample_counts(period.start, period.end, measure),
                pools,
                calendar,
                window_task_counts(store, calendar, period, measure),
            )
            for measure in (GpuMeasure.UTILIZATION, GpuMeasure.SM_ACTIVE)
        )
    else:
        samples = store.gpu_samples(None, period.start, period.end)
        utilization = gpu_usage(samples, pools, calendar)
        sm_active = gpu_usage(samples, pools, calendar, GpuMeasure.SM_ACTIVE)
    return replace(utilization, sm_active=sm_active)


def window_task_counts(
    store: Store,
    calendar: Calendar,
    period: Period,
    measure: GpuMeasure = GpuMeasure.UTILIZATION,
) -> dict[str, TenantTaskCounts]:
    """Each window's samples in `period` by tenant and task. A window may begin inside a UTC
    hour (09:30, or a zone half an hour off UTC), so each of its parts is counted on its own:
    whole hours from the counts, the minutes at its ends from the samples."""
    return {
        w.name: tuple(
            counted
            for part in parts_in(calendar, w.name, period.start, period.end)
            for counted in store.gpu_task_counts(part.start, part.end, measure)
        )
        for w in calendar.windows
    }


def hours_read_raw(
    calendar: Calendar, marks: Sequence[datetime], since: datetime, until: datetime
) -> frozenset[datetime]:
    """The UTC hours of [since, until) whose raw samples a report reads: the store counts
    whole hours, so a period that begins or ends inside an hour (a local day in a zone offset
    by a part of an hour, a window's part, the soak's start or end: `marks`) reads that hour's
    samples. Every hour when the counts are not exact."""
    if not counts_are_exact(calendar):
        hours = math.ceil((until - hour_of(since)) / timedelta(hours=1))
        return frozenset(hour_of(since) + timedelta(hours=n) for n in range(hours))
    tz = calendar.timezone
    first = since.astimezone(tz).date() - timedelta(days=1)
    days = (until.astimezone(tz).date() - first).days + 2
    midnights = [day_period(first + timedelta(days=n), tz).start for n in range(days)]
    window_ends = (
        at
        for w in calendar.windows
        for part in parts_in(calendar, w.name, midnights[0], midnights[-1])
        for at in (part.start, part.end)
    )
    return frozenset(
        hour_of(at)
        for at in (*marks, *midnights, *window_ends)
        if since <= at < until and at != hour_of(at)
    )


def gpu_by_day(store: Store, context: ReportContext, soak: Period) -> dict[date, GpuUsage]:
    """The soak's GPU samples reduced one local day at a time: a day of a large fleet is
    read at once, never the whole soak."""
    tz = context.calendar.timezone
    day = soak.start.astimezone(tz).date()
    usage = {}
    while (bounds := day_period(day, tz)).start < soak.end:
        clipped = Period(max(bounds.start, soak.start), min(bounds.end, soak.end))
        usage[day] = _gpu(store, context, clipped)
        day += timedelta(days=1)
    return usage


def _sum(usages: Mapping[date, GpuUsage], last: date = date.max) -> GpuUsage:
    total = GpuUsage()
    for day, usage in sorted(usages.items()):
        if day <= last:
            total = total.plus(usage)
    return total


def load_daily(
    store: Store, settings: Settings, day: date, now: datetime, *, partial: bool = False
) -> DailyInputs:
    """The inputs of `day`'s summary. Refused for a day not over at `now` or before the
    soak: a summary of a whole day only, so that it never changes once built; `partial`:
    the day so far, up to `now` (marked so, never filed as the day's summary)."""
    started = soak_started_at(store, settings)
    if started is None:
        raise ReportError("nothing stored yet: no probe run and no reports.soak_started_at")
    context = report_context(settings, started)
    tz = context.calendar.timezone
    bounds = day_period(day, tz)
    if partial and bounds.start < now < bounds.end:
        bounds = Period(bounds.start, now)
    if bounds.end > now:
        raise ReportError(f"{day.isoformat()} is not over yet in {tz.key}")
    if bounds.end <= started:
        raise ReportError(f"{day.isoformat()} is before the soak started ({started.isoformat()})")
    soak = Period(started, bounds.end)
    usage = gpu_by_day(store, context, soak)
    soak_data = load_period(store, context, soak, _sum(usage, day))
    this = Period(max(bounds.start, started), bounds.end)
    previous = None
    if bounds.start > started:
        before = day_period(day - timedelta(days=1), tz)
        before = Period(max(before.start, started), before.end)
        previous = load_period(
            store, context, before, usage.get(day - timedelta(days=1)), soak_data
        )
    data = with_run_gpu(
        store,
        replace(
            load_period(store, context, this, usage.get(day), soak_data),
            inference_samples=store.inference_samples(this.start, this.end),
            inference_phases=store.inference_phases(this.start, this.end),
            job_estimates=store.job_estimates(this.start, this.end),
        ),
    )
    return DailyInputs(
        context=context,
        day=day,
        data=data,
        previous=previous,
        soak=soak_data,
        intervention_match_seconds=settings.reports.verdict_intervention_match_seconds,
        layer_blind_max_share=settings.reports.verdict_layer_blind_max_share,
        partial=bounds.end < day_period(day, tz).end,
    )


def with_run_gpu(store: Store, data: PeriodData) -> PeriodData:
    """`data` with its runs' own GPU figures, reduced by the store in one read."""
    return replace(data, run_gpu=store.run_gpu_figures(run_spans(data.runs, data.period.end)))


def load_tasks(
    store: Store, settings: Settings, period: Period
) -> tuple[PeriodData, ReportContext]:
    """What the per-task record of `period` reads (`observer runs`): its runs, what their
    nodes went through, their tenants' queues, the alerts and the runs' own GPUs."""
    context = report_context(settings, soak_started_at(store, settings) or period.start)
    data = PeriodData(
        period=period,
        runs=store.runs(since=period.start, until=period.end),
        findings=[f for f in store.findings(since=period.start) if f.opened_at < period.end],
        node_changes=store.node_changes(period.start, period.end),
        queue_samples=store.queue_samples(period.start, period.end),
        alerts=store.alerts(period.start, period.end),
    )
    return with_run_gpu(store, data), context


def soak_ended_at(settings: Settings, now: datetime) -> datetime:
    """The configured end, else the start of today in the platform's timezone."""
    if settings.reports.soak_ended_at is not None:
        return settings.reports.soak_ended_at
    tz = ZoneInfo(settings.controller.timezone)
    return day_period(now.astimezone(tz).date(), tz).start


def load_verdict(
    store: Store, settings: Settings, now: datetime, *, provisional: bool = False
) -> VerdictInputs:
    """The inputs of the verdict over the soak: up to its end (whole days unless
    reports.soak_ended_at says otherwise), or `provisional`: up to `now`."""
    started = soak_started_at(store, settings)
    if started is None:
        raise ReportError("nothing stored yet: no probe run and no reports.soak_started_at")
    ended = now if provisional else min(soak_ended_at(settings, now), now)
    if ended <= started:
        raise ReportError(
            f"the soak has no whole day yet: it started {started.isoformat()}, the verdict "
            f"covers up to {ended.isoformat()}"
        )
    context = report_context(settings, started)
    soak = Period(started, ended)
    usage = gpu_by_day(store, context, soak)
    soak_data = replace(
        load_period(store, context, soak, _sum(usage)),
        # One service looked at every few seconds: a week of it is read at once.
        inference_samples=store.inference_samples(soak.start, soak.end),
        inference_phases=store.inference_phases(soak.start, soak.end),
    )
    return VerdictInputs(
        context=context,
        soak=soak_data,
        gpu_by_day=usage,
        rules=verdict_rules(settings),
        provisional=provisional,
    )


def verdict_rules(settings: Settings) -> VerdictRules:
    """The verdict's rules from the settings: its bounds, the fairness rule's persistence and
    the criteria's scoring layers where the settings move one."""
    fair = settings.detectors.fairness
    rules = settings.reports
    return VerdictRules(
        monitoring_lag_max_seconds=rules.verdict_monitoring_lag_max_seconds,
        unexplained_wait_max_share=rules.verdict_unexplained_wait_max_share,
        unexplained_failure_max_share=rules.verdict_unexplained_failure_max_share,
        blind_max_share=rules.verdict_blind_max_share,
        layer_blind_max_share=rules.verdict_layer_blind_max_share,
        intervention_match_seconds=rules.verdict_intervention_match_seconds,
        fairness_persistence_k=fair.persistence_k,
        fairness_persistence_m=fair.persistence_m,
        later_utilisation_share_of_allocated=rules.later_utilisation_share_of_allocated,
        later_quota_hold_seconds=rules.later_quota_hold_seconds,
        quota_reclaim_seconds=settings.controller.quota_reclaim_seconds,
        score_layers={
            criterion: ScoreLayer(layer)
            for criterion, layer in rules.verdict_criteria_layers.items()
        },
    )
