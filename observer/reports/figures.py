"""The figures of one period, from its stored data: tasks and failures, queue waits, GPU
utilisation and allocation, alerts, manual interventions, findings and the observer's own
blind time. Pure. A figure the observer could not see is None, never 0."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from observer.domain import Finding, FindingKind, JobPhase, JsonValue, Outcome, ProbeRun, Severity
from observer.records import (
    DELIVERY_FAILED,
    InterventionSource,
    JobSlot,
    StoredDelivery,
    StoredIntervention,
    StoredQueueSample,
)
from observer.reports import interventions as detected_interventions
from observer.reports.data import (
    Allocation,
    Period,
    PeriodData,
    ReportContext,
    UtilizationHistogram,
    nearest_rank,
)

FAILED_OUTCOMES = frozenset({Outcome.FAILED, Outcome.REJECTED, Outcome.TIMED_OUT, Outcome.LOST})
# Conditions during which the observer could not see a source, by source.
BLIND_DETECTORS = {
    "nvml_unavailable": "nvml",
    "gpu_lost": "nvml",
    "agent_unreachable": "agents",
    "prometheus_unreachable": "prometheus",
    "log_pipeline_unreachable": "logs",
    "alertmanager_unreachable": "alerts",
}
BLIND_SOURCES = ("scheduler", "agents", "nvml", "prometheus", "logs", "alerts")
# A gap between stored scheduler snapshots longer than this many snapshot intervals is time
# the controller could not read the scheduler (failed reads are not stored, their gaps are).
SCHEDULER_GAP_INTERVALS = 3
FAILURE_EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class WaitStats:
    """Queue waits (submission to start, the platform's timestamps) of the runs that started."""

    runs: int
    avg_seconds: float | None
    p50_seconds: float | None
    p95_seconds: float | None
    max_seconds: float | None


def wait_stats(waits: Iterable[float]) -> WaitStats:
    values = sorted(waits)
    if not values:
        return WaitStats(0, None, None, None, None)
    n = len(values)
    return WaitStats(
        runs=n,
        avg_seconds=sum(values) / n,
        p50_seconds=values[nearest_rank(0.5, n) - 1],
        p95_seconds=values[nearest_rank(0.95, n) - 1],
        max_seconds=values[-1],
    )


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failed runs sharing an outcome and the platform's reason."""

    outcome: str
    reason: str | None
    count: int
    probes: tuple[str, ...]
    tenants: tuple[str, ...]
    example_message: str | None
    run_ids: tuple[str, ...]  # the first few


@dataclass(frozen=True, slots=True)
class TaskFigures:
    """Probe runs submitted in the period. `failed`: ended other than their expectation says
    (an expected failure that failed the expected way passed), refused, timed out or lost;
    `cancelled`: by the controller's shutdown or by someone else; `unfinished`: not ended
    when the data was read. Every tenant's jobs are counted apart: AllJobFigures."""

    total: int
    passed: int
    failed: int
    cancelled: int
    unfinished: int
    failure_groups: tuple[FailureGroup, ...]
    by_probe: Mapping[str, int]
    failed_by_probe: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class TenantJobs:
    total: int
    failed: int


@dataclass(frozen=True, slots=True)
class JobFailureGroup:
    """Failed jobs of every tenant sharing the platform's reason (None: it gave none)."""

    reason: str | None
    count: int
    by_tenant: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class AllJobFigures:
    """Every tenant's jobs that ended in the period, the observer's probes among them, as
    the platform listed them. `complete` is False when the listings left part of the period
    uncovered (`listed_seconds` short of it) or the platform said they may have missed jobs
    (`notes`): the counts are then lower bounds. `failed` is the platform's failed phase;
    `cancelled` apart."""

    total: int
    failed: int
    cancelled: int
    by_tenant: Mapping[str, TenantJobs]
    failure_groups: tuple[JobFailureGroup, ...]
    complete: bool
    listed_seconds: float
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TenantQueue:
    """Every job of one tenant as the scheduler's stored snapshots saw its queue."""

    samples: int
    pending_jobs_avg: float
    pending_gpus_avg: float
    running_gpus_avg: float
    longest_wait_seconds_max: float


@dataclass(frozen=True, slots=True)
class QueueFigures:
    overall: WaitStats
    by_tenant: Mapping[str, WaitStats]
    by_window: Mapping[str, WaitStats]  # the window the run was launched in
    by_probe: Mapping[str, WaitStats]
    never_started: int  # ended without starting: refused, blocked, failed to start
    all_jobs_by_tenant: Mapping[str, TenantQueue]


@dataclass(frozen=True, slots=True)
class UtilizationStats:
    samples: int
    avg_percent: float | None
    p50_percent: float | None
    p95_percent: float | None
    busy_share: float | None  # samples with any utilisation
    deciles: tuple[int, ...]  # samples per 10 % band


def utilization_stats(histogram: UtilizationHistogram) -> UtilizationStats:
    return UtilizationStats(
        samples=histogram.samples,
        avg_percent=histogram.mean(),
        p50_percent=histogram.percentile(0.5),
        p95_percent=histogram.percentile(0.95),
        busy_share=histogram.busy_share(),
        deciles=histogram.deciles(),
    )


@dataclass(frozen=True, slots=True)
class PoolUse:
    """Allocated (the scheduler's books) against used (the agents' readings) for a pool."""

    gpus_avg: float | None  # GPUs the scheduler had, time-weighted
    allocated_share: float | None
    used_share: float | None  # share of GPU samples that found the GPU busy
    utilization: UtilizationStats | None


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """`observed`: the agents' samples exist for the period. Per tenant: `by_tenant`, the
    utilisation of the GPUs its jobs held when sampled (`tenant_samples` of the samples
    could be attributed: not on Kubernetes, whose agents know pods only by UID), beside
    `tenant_running_gpus_avg`, the GPUs allocated to it by the scheduler's queues."""

    observed: bool
    overall: UtilizationStats | None
    by_pool: Mapping[str, PoolUse]
    by_window: Mapping[str, UtilizationStats]
    by_hour: Mapping[str, UtilizationStats]  # local hour "00".."23"
    allocated_share: float | None
    allocated_share_by_hour: Mapping[str, float]
    tenant_running_gpus_avg: Mapping[str, float]
    by_tenant: Mapping[str, UtilizationStats]
    tenant_samples: int
    nodes_sampled: int
    nodes_known: int
    unread_samples: int


@dataclass(frozen=True, slots=True)
class AlertCount:
    name: str
    severity: str | None
    count: int


@dataclass(frozen=True, slots=True)
class AlertFigures:
    """Firings that started in the period, ignored names left out. `total` None: no alert
    source is set up (reports.alertmanager_url)."""

    total: int | None
    by_name: tuple[AlertCount, ...]


@dataclass(frozen=True, slots=True)
class InterventionItem:
    at: datetime
    source: str  # "recorded" | "detected"
    action: str  # detected: drain, resume, cordon, uncordon, taints_changed, job_cancelled
    by: str  # "" when the platform does not say who
    reason: str
    subject: Mapping[str, str]
    detail: Mapping[str, JsonValue]
    audited_by: str | None  # detected: who recorded it, when a record accounts for it


@dataclass(frozen=True, slots=True)
class InterventionFigures:
    total: int
    recorded: int
    detected: int
    unaudited: int  # detected with no record naming the same subject close to it
    items: tuple[InterventionItem, ...]


@dataclass(frozen=True, slots=True)
class DeliveryItem:
    at: datetime
    report: str  # e.g. "daily-2026-11-30"
    channel: str
    attempts: int
    detail: str | None  # the channel's answer, secrets masked


@dataclass(frozen=True, slots=True)
class DeliveryFigures:
    """Deliveries of reports made in the period (the daily summary lists those of the reports
    before it): how many, and each that failed. `channels`: where reports go besides the
    directory, as configured; none: the directory is the only delivery."""

    total: int
    failed: int
    channels: tuple[str, ...]
    failures: tuple[DeliveryItem, ...]


@dataclass(frozen=True, slots=True)
class FindingItem:
    detector: str
    kind: str
    severity: str
    summary: str
    subject: Mapping[str, str]
    opened_at: datetime
    closed_at: datetime | None
    status: str  # event, opened (and still open at the end), opened_closed, closed, open
    evidence: Mapping[str, JsonValue]


@dataclass(frozen=True, slots=True)
class DetectorCounts:
    """Per detector in a period: conditions opened, closed, open at its end; events raised."""

    opened: int
    closed: int
    still_open: int
    events: int


@dataclass(frozen=True, slots=True)
class FindingFigures:
    opened: int
    closed: int
    still_open: int
    events: int
    critical: int  # opened or raised in the period with critical severity
    by_detector: Mapping[str, DetectorCounts]
    items: tuple[FindingItem, ...]


@dataclass(frozen=True, slots=True)
class BlindPeriod:
    source: str
    subject: str
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True, slots=True)
class BlindFigures:
    """Time the observer could not see a source. Per source set up: the union of its periods
    (two agents out at once count once); total: the union of all. `not_set_up`: sources not
    configured at all, never observed."""

    total_seconds: float
    share: float | None
    by_source: Mapping[str, float]
    periods: tuple[BlindPeriod, ...]
    not_set_up: tuple[str, ...]
    scheduler_gap_seconds: float


@dataclass(frozen=True, slots=True)
class PeriodFigures:
    start: datetime
    end: datetime
    tasks: TaskFigures
    all_jobs: AllJobFigures | None  # None: no listing of every tenant's jobs covered it
    queue: QueueFigures
    gpu: GpuFigures
    alerts: AlertFigures
    interventions: InterventionFigures
    findings: FindingFigures
    blind: BlindFigures
    deliveries: DeliveryFigures


def period_figures(
    data: PeriodData, context: ReportContext, intervention_match_seconds: float
) -> PeriodFigures:
    return PeriodFigures(
        start=data.period.start,
        end=data.period.end,
        tasks=task_figures(data.runs),
        all_jobs=all_job_figures(data.job_slots, data.period),
        queue=queue_figures(data.runs, data.queue_samples),
        gpu=gpu_figures(data, context),
        alerts=alert_figures(data, context),
        interventions=intervention_figures(data, intervention_match_seconds),
        findings=finding_figures(data.findings, data.period.start, data.period.end),
        blind=blind_figures(data, context),
        deliveries=delivery_figures(data.deliveries, context),
    )


# --- tasks -----------------------------------------------------------------------------


def is_failed(run: ProbeRun) -> bool:
    return run.outcome in FAILED_OUTCOMES


def task_figures(runs: Sequence[ProbeRun]) -> TaskFigures:
    failed = [r for r in runs if is_failed(r)]
    groups: dict[tuple[str, str | None], list[ProbeRun]] = {}
    for run in failed:
        assert run.outcome is not None
        groups.setdefault((run.outcome.value, run.reason), []).append(run)
    failure_groups = tuple(
        FailureGroup(
            outcome=outcome,
            reason=reason,
            count=len(members),
            probes=tuple(sorted({r.probe for r in members})),
            tenants=tuple(sorted({r.tenant for r in members})),
            example_message=next((r.message for r in members if r.message), None),
            run_ids=tuple(r.run_id for r in members[:FAILURE_EXAMPLES]),
        )
        for (outcome, reason), members in sorted(
            groups.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1] or "")
        )
    )
    return TaskFigures(
        total=len(runs),
        passed=sum(1 for r in runs if r.outcome is Outcome.PASSED),
        failed=len(failed),
        cancelled=sum(1 for r in runs if r.outcome is Outcome.CANCELLED),
        unfinished=sum(1 for r in runs if r.outcome is None),
        failure_groups=failure_groups,
        by_probe=_count(r.probe for r in runs),
        failed_by_probe=_count(r.probe for r in failed),
    )


def all_job_figures(slots: Sequence[JobSlot], period: Period) -> AllJobFigures | None:
    listed = sum(period.clip(s.start, s.listed_until) for s in slots)
    if listed == 0:
        return None
    tallies = [t for s in slots for t in s.tallies]
    failed = [t for t in tallies if t.phase is JobPhase.FAILED]
    tenants = sorted({t.tenant for t in tallies})
    reasons: dict[str | None, dict[str, int]] = {}
    for t in failed:
        by_tenant = reasons.setdefault(t.reason, {})
        by_tenant[t.tenant] = by_tenant.get(t.tenant, 0) + t.jobs
    return AllJobFigures(
        total=sum(t.jobs for t in tallies),
        failed=sum(t.jobs for t in failed),
        cancelled=sum(t.jobs for t in tallies if t.phase is JobPhase.CANCELLED),
        by_tenant={
            tenant: TenantJobs(
                sum(t.jobs for t in tallies if t.tenant == tenant),
                sum(t.jobs for t in failed if t.tenant == tenant),
            )
            for tenant in tenants
        },
        failure_groups=tuple(
            JobFailureGroup(reason, sum(counts.values()), dict(sorted(counts.items())))
            for reason, counts in sorted(
                reasons.items(), key=lambda kv: (-sum(kv[1].values()), kv[0] or "")
            )
        ),
        complete=listed >= period.seconds and all(s.complete for s in slots),
        listed_seconds=listed,
        notes=tuple(sorted({s.note for s in slots if s.note})),
    )


def _count(keys: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return {key: counts[key] for key in sorted(counts)}


# --- queues ----------------------------------------------------------------------------


def queue_figures(runs: Sequence[ProbeRun], samples: Sequence[StoredQueueSample]) -> QueueFigures:
    started = [(r, r.queue_wait_seconds) for r in runs if r.queue_wait_seconds is not None]

    def by(key: str) -> dict[str, WaitStats]:
        groups: dict[str, list[float]] = {}
        for run, wait in started:
            assert wait is not None
            groups.setdefault(getattr(run, key) or "-", []).append(wait)
        return {name: wait_stats(groups[name]) for name in sorted(groups)}

    return QueueFigures(
        overall=wait_stats(w for _, w in started if w is not None),
        by_tenant=by("tenant"),
        by_window=by("window"),
        by_probe=by("probe"),
        never_started=sum(1 for r in runs if r.outcome is not None and r.started_at is None),
        all_jobs_by_tenant=_tenant_queues(samples),
    )


def _tenant_queues(samples: Sequence[StoredQueueSample]) -> dict[str, TenantQueue]:
    # A tenant's queues (partitions) of one snapshot are added up first.
    per_snapshot: dict[str, dict[datetime, list[float]]] = {}
    for sample in samples:
        q = sample.state
        row = per_snapshot.setdefault(q.tenant, {}).setdefault(sample.at, [0.0, 0.0, 0.0, 0.0])
        row[0] += q.pending_jobs
        row[1] += q.pending_gpus
        row[2] += q.running_gpus
        row[3] = max(row[3], q.longest_wait_seconds)
    result = {}
    for tenant in sorted(per_snapshot):
        rows = list(per_snapshot[tenant].values())
        n = len(rows)
        result[tenant] = TenantQueue(
            samples=n,
            pending_jobs_avg=sum(r[0] for r in rows) / n,
            pending_gpus_avg=sum(r[1] for r in rows) / n,
            running_gpus_avg=sum(r[2] for r in rows) / n,
            longest_wait_seconds_max=max(r[3] for r in rows),
        )
    return result


# --- GPUs ------------------------------------------------------------------------------


def gpu_figures(data: PeriodData, context: ReportContext) -> GpuFigures:
    usage, alloc = data.gpu, data.allocation
    observed = usage.overall.samples > 0
    pools = sorted(usage.by_pool.keys() | alloc.total_gpu_seconds.keys())
    seconds = data.period.seconds
    by_pool = {}
    for pool in pools:
        histogram = usage.by_pool.get(pool)
        total = alloc.total_gpu_seconds.get(pool)
        by_pool[pool] = PoolUse(
            gpus_avg=total / seconds if total is not None and seconds else None,
            allocated_share=_share(alloc.allocated_gpu_seconds.get(pool), total),
            used_share=histogram.busy_share() if histogram else None,
            utilization=utilization_stats(histogram) if histogram else None,
        )
    queues = _tenant_queues(data.queue_samples)
    known = {n.name for n in data.nodes_at_start} | {c.node.name for c in data.node_changes}
    return GpuFigures(
        observed=observed,
        overall=utilization_stats(usage.overall) if observed else None,
        by_pool=by_pool,
        by_window={k: utilization_stats(v) for k, v in usage.by_window.items()},
        by_hour={k: utilization_stats(v) for k, v in usage.by_hour.items()},
        allocated_share=_share(
            sum(alloc.allocated_gpu_seconds.values()), sum(alloc.total_gpu_seconds.values())
        ),
        allocated_share_by_hour=_hourly_shares(alloc),
        tenant_running_gpus_avg={t: q.running_gpus_avg for t, q in queues.items()},
        by_tenant={k: utilization_stats(v) for k, v in usage.by_tenant.items()},
        tenant_samples=sum(h.samples for h in usage.by_tenant.values()),
        nodes_sampled=len(usage.nodes),
        nodes_known=len(known),
        unread_samples=usage.unread_samples,
    )


def _share(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole


def _hourly_shares(alloc: Allocation) -> dict[str, float]:
    return {
        hour: share
        for hour in sorted(alloc.total_by_hour)
        if (share := _share(alloc.allocated_by_hour.get(hour, 0.0), alloc.total_by_hour[hour]))
        is not None
    }


# --- alerts ----------------------------------------------------------------------------


def alert_figures(data: PeriodData, context: ReportContext) -> AlertFigures:
    if not context.sources.alertmanager:
        return AlertFigures(None, ())
    alerts = [a for a in data.alerts if a.name not in context.ignored_alerts]
    counts: dict[tuple[str, str | None], int] = {}
    for alert in alerts:
        key = (alert.name, alert.severity)
        counts[key] = counts.get(key, 0) + 1
    by_name = tuple(
        AlertCount(name, severity, count)
        for (name, severity), count in sorted(
            counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or "")
        )
    )
    return AlertFigures(len(alerts), by_name)


# --- interventions ---------------------------------------------------------------------


def intervention_figures(data: PeriodData, match_seconds: float) -> InterventionFigures:
    recorded = list(data.interventions)
    detected = detected_interventions.detect(data.nodes_at_start, data.node_changes, data.runs)
    records = detected_interventions.audit(detected, recorded, match_seconds)
    items = [_intervention_item(i, None) for i in recorded]
    items += [_intervention_item(i, r) for i, r in zip(detected, records, strict=True)]
    unaudited = sum(1 for r in records if r is None)
    items.sort(key=lambda i: (i.at, i.source, sorted(i.subject.items())))
    return InterventionFigures(
        total=len(items),
        recorded=len(recorded),
        detected=len(detected),
        unaudited=unaudited,
        items=tuple(items),
    )


def _intervention_item(
    intervention: StoredIntervention, record: StoredIntervention | None
) -> InterventionItem:
    detected = intervention.source is InterventionSource.DETECTED
    action = str(intervention.detail.get("action", "")) if detected else "recorded"
    return InterventionItem(
        at=intervention.at,
        source=intervention.source.value,
        action=action,
        by=intervention.by,
        reason=intervention.reason,
        subject=dict(intervention.subject),
        detail=dict(intervention.detail),
        audited_by=None if record is None else record.by,
    )


# --- deliveries ------------------------------------------------------------------------


def delivery_figures(
    deliveries: Sequence[StoredDelivery], context: ReportContext
) -> DeliveryFigures:
    failures = tuple(
        DeliveryItem(d.at, d.report, d.channel, d.attempts, d.detail)
        for d in deliveries
        if d.outcome == DELIVERY_FAILED
    )
    return DeliveryFigures(
        total=len(deliveries),
        failed=len(failures),
        channels=context.delivery_channels,
        failures=failures,
    )


# --- findings --------------------------------------------------------------------------


def finding_figures(findings: Sequence[Finding], start: datetime, end: datetime) -> FindingFigures:
    """Findings active in [start, end): events raised in it; conditions opened in it, closed
    in it, or open across it."""
    items = []
    counts: dict[str, list[int]] = {}
    for finding in findings:
        status = _status(finding, start, end)
        if status is None:
            continue
        row = counts.setdefault(finding.detector, [0, 0, 0, 0])
        if status == "event":
            row[3] += 1
        else:
            row[0] += status in ("opened", "opened_closed")
            row[1] += status in ("closed", "opened_closed")
            row[2] += status in ("opened", "open")
        items.append(
            FindingItem(
                detector=finding.detector,
                kind=finding.kind.value,
                severity=finding.severity.value,
                summary=finding.summary,
                subject=dict(finding.subject),
                opened_at=finding.opened_at,
                closed_at=finding.closed_at,
                status=status,
                evidence=dict(finding.evidence),
            )
        )
    by_detector = {
        d: DetectorCounts(opened=c[0], closed=c[1], still_open=c[2], events=c[3])
        for d, c in sorted(counts.items())
    }
    new = [i for i in items if i.status in ("event", "opened", "opened_closed")]
    return FindingFigures(
        opened=sum(c.opened for c in by_detector.values()),
        closed=sum(c.closed for c in by_detector.values()),
        still_open=sum(c.still_open for c in by_detector.values()),
        events=sum(c.events for c in by_detector.values()),
        critical=sum(1 for i in new if i.severity == Severity.CRITICAL.value),
        by_detector=by_detector,
        items=tuple(items),
    )


def _status(finding: Finding, start: datetime, end: datetime) -> str | None:
    opened, closed = finding.opened_at, finding.closed_at
    if finding.kind is FindingKind.EVENT:
        return "event" if start <= opened < end else None
    if opened >= end or (closed is not None and closed < start):
        return None
    opened_here = opened >= start
    closed_here = closed is not None and closed < end
    if opened_here:
        return "opened_closed" if closed_here else "opened"
    return "closed" if closed_here else "open"


# --- blind time ------------------------------------------------------------------------


def blind_figures(data: PeriodData, context: ReportContext) -> BlindFigures:
    period = data.period
    periods: list[BlindPeriod] = []
    for finding in data.findings:
        source = BLIND_DETECTORS.get(finding.detector)
        if source is None:
            continue
        lo = max(finding.opened_at, period.start)
        hi = min(finding.closed_at or period.end, period.end)
        if hi > lo:
            subject = ",".join(f"{k}={v}" for k, v in sorted(finding.subject.items()))
            periods.append(BlindPeriod(source, subject, lo, hi))
    gap = SCHEDULER_GAP_INTERVALS * context.snapshot_interval_seconds
    periods += scheduler_gaps([s.at for s in data.queue_samples], period.start, period.end, gap)
    periods.sort(key=lambda p: (p.start, p.source, p.subject))
    sources = context.sources
    agents = sources.agents or bool(data.gpu.nodes)
    set_up = {
        "scheduler": True,
        "agents": agents,
        "nvml": agents,
        "prometheus": sources.prometheus,
        "logs": sources.logs,
        "alerts": sources.alertmanager,
    }
    by_source = {
        source: _union_seconds([p for p in periods if p.source == source])
        for source in BLIND_SOURCES
        if set_up[source]
    }
    total = _union_seconds(periods)
    not_set_up = tuple(s for s in BLIND_SOURCES if not set_up[s])
    return BlindFigures(
        total_seconds=total,
        share=total / period.seconds if period.seconds else None,
        by_source=by_source,
        periods=tuple(periods),
        not_set_up=not_set_up,
        scheduler_gap_seconds=gap,
    )


def scheduler_gaps(
    instants: Sequence[datetime], start: datetime, end: datetime, limit_seconds: float
) -> list[BlindPeriod]:
    """Stretches of [start, end) longer than `limit_seconds` with no stored snapshot, whole
    (the scheduler was last seen at the stretch's start and seen again at its end)."""
    points = [start, *sorted({at for at in instants if start <= at < end}), end]
    limit = timedelta(seconds=limit_seconds)
    return [
        BlindPeriod("scheduler", "snapshots", a, b)
        for a, b in itertools.pairwise(points)
        if b - a > limit
    ]


def _union_seconds(periods: Sequence[BlindPeriod]) -> float:
    total = 0.0
    reach: datetime | None = None
    for p in sorted(periods, key=lambda p: p.start):
        if reach is None or p.start >= reach:
            total += p.seconds
            reach = p.end
        elif p.end > reach:
            total += (p.end - reach).total_seconds()
            reach = p.end
    return total
