"""The figures of one period, from its stored data: tasks and failures, each probe's
coverage, every tenant's jobs, queue waits, GPU utilisation and allocation, the GPUs' health,
and (from events) alerts, interventions, findings, deliveries and blind time. Pure. A figure
the observer could not see is None, never 0."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from observer.domain import Expectation, Finding, JobPhase, Outcome, ProbeRun
from observer.probes.outcome import OBSERVER_REASONS
from observer.records import (
    JobOrigin,
    JobSlot,
    ProbeSkip,
    SkipReason,
    StoredNodeChange,
    StoredQueueSample,
)
from observer.reports.compute.causes import Cause, Classified, classify
from observer.reports.compute.data import (
    Allocation,
    Period,
    PeriodData,
    ReportContext,
    UtilizationHistogram,
    nearest_rank,
)
from observer.reports.compute.events import (
    AlertFigures,
    BlindFigures,
    DeliveryFigures,
    FindingFigures,
    InterventionFigures,
    OwnerStateFigures,
    alert_figures,
    blind_figures,
    delivery_figures,
    finding_figures,
    intervention_figures,
    owner_state_figures,
)
from observer.reports.compute.health import GpuHealthFigures, gpu_health_figures
from observer.reports.compute.notes import Note

FAILED_OUTCOMES = frozenset({Outcome.FAILED, Outcome.REJECTED, Outcome.TIMED_OUT, Outcome.LOST})


@dataclass(frozen=True, slots=True)
class WaitStats:
    """Queue waits (submission to start, the platform's timestamps) of the runs that started."""

    runs: int
    avg_seconds: float | None
    p50_seconds: float | None
    p95_seconds: float | None
    max_seconds: float | None


def counted_wait_stats(counts: Mapping[int, int]) -> WaitStats:
    """WaitStats of waits given as {whole seconds: jobs}, exactly as if listed one by one."""
    n = sum(counts.values())
    if not n:
        return WaitStats(0, None, None, None, None)
    ordered = sorted(counts.items())

    def ranked(q: float) -> float:
        rank, seen = nearest_rank(q, n), 0
        for seconds, jobs in ordered:
            seen += jobs
            if seen >= rank:
                return float(seconds)
        return float(ordered[-1][0])

    return WaitStats(
        runs=n,
        avg_seconds=sum(seconds * jobs for seconds, jobs in ordered) / n,
        p50_seconds=ranked(0.5),
        p95_seconds=ranked(0.95),
        max_seconds=float(ordered[-1][0]),
    )


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
class Explained:
    """Failed runs of one group that share one explanation."""

    explanation: Note
    run_ids: tuple[str, ...]
    probes: tuple[str, ...]
    tenants: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failed runs sharing a cause (causes.Cause), an outcome and the platform's reason, with
    every distinct explanation among them."""

    cause: str
    outcome: str
    reason: str | None
    count: int
    probes: tuple[str, ...]
    tenants: tuple[str, ...]
    explanations: tuple[Explained, ...]
    evidence: tuple[Note, ...]  # what decided the cause, each distinct line once


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One probe run as the per-task appendix shows it; `explanation` for a run that did not
    pass."""

    run: ProbeRun
    explanation: Note | None
    cause: Classified | None


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
class ProbeCoverage:
    """One probe's copies that came due in the period (`due`): each was submitted (`run`)
    or skipped (`skipped`, by SkipReason value); `most_together`: the most runs of it one
    tenant had in flight at once (submitted and not yet ended), which a burst needs to be
    one."""

    due: int
    run: int
    skipped: Mapping[str, int]
    most_together: int


@dataclass(frozen=True, slots=True)
class TenantJobs:
    total: int
    failed: int


@dataclass(frozen=True, slots=True)
class JobFailureGroup:
    """Failed jobs of every tenant sharing a cause (causes.Cause; None: tallied before causes
    were kept) and the platform's reason (None: it gave none)."""

    cause: str | None
    reason: str | None
    count: int
    by_tenant: Mapping[str, int]
    by_observer: int = 0  # of `count`, the observer's own probes (expected failures too)


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
    # Of `total` and `failed`, the observer's own probes: their outcomes are judged under the
    # probe runs, against what each expects (a fail-exit probe is meant to fail).
    by_observer: TenantJobs = TenantJobs(0, 0)
    # The queue waits of every tenant's jobs that started (the observer's among them), from
    # the platform's submission and start times; slots listed before waits were kept add none.
    waits_by_tenant: Mapping[str, WaitStats] = field(default_factory=dict)


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
    `tenant_running_gpus_avg`, the GPUs allocated to it by the scheduler's queues; and of
    the same samples, `by_task` (a probe's name, "job" for the tenants' own, "" not known)
    and `by_window_tenant` (window -> tenant)."""

    observed: bool
    overall: UtilizationStats | None
    by_pool: Mapping[str, PoolUse]
    by_window: Mapping[str, UtilizationStats]
    by_hour: Mapping[str, UtilizationStats]  # local hour "00".."23"
    allocated_share: float | None
    allocated_share_by_hour: Mapping[str, float]
    tenant_running_gpus_avg: Mapping[str, float]
    by_tenant: Mapping[str, UtilizationStats]
    by_task: Mapping[str, UtilizationStats]
    by_window_tenant: Mapping[str, Mapping[str, UtilizationStats]]
    tenant_samples: int
    nodes_sampled: int
    nodes_known: int
    unread_samples: int


@dataclass(frozen=True, slots=True)
class PeriodFigures:
    start: datetime
    end: datetime
    tasks: TaskFigures
    coverage: Mapping[str, ProbeCoverage]  # by probe
    all_jobs: AllJobFigures | None  # None: no listing of every tenant's jobs covered it
    queue: QueueFigures
    gpu: GpuFigures
    health: GpuHealthFigures
    owners: OwnerStateFigures
    alerts: AlertFigures
    interventions: InterventionFigures
    findings: FindingFigures
    blind: BlindFigures
    deliveries: DeliveryFigures


def period_figures(
    data: PeriodData,
    context: ReportContext,
    intervention_match_seconds: float,
    layer_blind_max_share: float,
) -> PeriodFigures:
    """`layer_blind_max_share`: a node whose owner state was unknown longer than this share
    of the period did not know it (reports.verdict_layer_blind_max_share)."""
    return PeriodFigures(
        start=data.period.start,
        end=data.period.end,
        tasks=task_figures(data.runs, data.findings, data.node_changes),
        coverage=coverage_figures(data.runs, data.probe_skips),
        all_jobs=all_job_figures(data.job_slots, data.period),
        queue=queue_figures(data.runs, data.queue_samples),
        gpu=gpu_figures(data, context),
        health=gpu_health_figures(data),
        owners=owner_state_figures(data, layer_blind_max_share),
        alerts=alert_figures(data, context),
        interventions=intervention_figures(data, intervention_match_seconds),
        findings=finding_figures(data.findings, data.period.start, data.period.end),
        blind=blind_figures(data, context),
        deliveries=delivery_figures(data.deliveries, context),
    )


# --- tasks -----------------------------------------------------------------------------


def is_failed(run: ProbeRun) -> bool:
    return run.outcome in FAILED_OUTCOMES


def explain(run: ProbeRun) -> Note | None:
    """Why a run that did not pass ended as it did, in whose words: the platform's reason and
    message where it gave them, else the observer's reasoning from what it recorded (a run it
    gave up on: how long it waited and on what). None for a pass or an unfinished run."""
    if run.outcome is None or run.outcome is Outcome.PASSED:
        return None
    if run.outcome is Outcome.TIMED_OUT:
        deadline = _between(run.submitted_at, run.finished_at)
        if run.started_at is not None:
            return Note(
                "why.timed_out_running",
                {"deadline_seconds": deadline, "run_seconds": run.run_seconds},
            )
        if run.pending_reasons:
            held, seconds = max(run.pending_reasons.items(), key=lambda kv: (kv[1], kv[0]))
            return Note(
                "why.timed_out_pending",
                {"deadline_seconds": deadline, "reason_words": held, "reason_seconds": seconds},
            )
        return Note("why.timed_out_silent", {"deadline_seconds": deadline})
    if run.outcome is Outcome.NO_GPU:
        return Note("why.no_gpu", {"nodes": ", ".join(run.node_names) or "—", **_words(run)})
    if run.reason in OBSERVER_REASONS:
        return Note("why.observer", {"reason": run.reason, "message_words": run.message or "—"})
    if run.outcome is Outcome.FAILED and run.expectation is not Expectation.SUCCEED:
        return Note("why.unexpected", {"expectation": run.expectation.value, **_words(run)})
    if run.reason is None and run.message is None and run.exit_code is None:
        return Note("why.none")
    return Note("why.platform", _words(run))


def _words(run: ProbeRun) -> dict[str, str]:
    """The platform's words on a run as one phrase: reason, message, exit code."""
    said = [w for w in (run.reason, run.message) if w]
    if run.exit_code is not None:
        said.append(f"exit {run.exit_code}")
    return {"words": " — ".join(said) or "—"}


def _between(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start).total_seconds()


def task_records(
    runs: Sequence[ProbeRun],
    findings: Sequence[Finding],
    node_changes: Sequence[StoredNodeChange],
) -> tuple[TaskRecord, ...]:
    """Every run, in the order they were submitted, with its explanation and cause."""
    return tuple(
        TaskRecord(r, explain(r), classify(r, findings, node_changes))
        for r in sorted(runs, key=_submission_order)
    )


def _submission_order(run: ProbeRun) -> tuple[float, str]:
    return (run.submitted_at.timestamp() if run.submitted_at else float("inf"), run.run_id)


def task_figures(
    runs: Sequence[ProbeRun],
    findings: Sequence[Finding],
    node_changes: Sequence[StoredNodeChange],
) -> TaskFigures:
    """`findings` and `node_changes`: the period's, from which each failure's cause is read."""
    failed = [r for r in runs if is_failed(r)]
    groups: dict[tuple[str, str, str | None], list[ProbeRun]] = {}
    evidence: dict[tuple[str, str, str | None], list[Note]] = {}
    for run in failed:
        assert run.outcome is not None
        classified = classify(run, findings, node_changes)
        cause = classified.cause if classified else Cause.UNEXPLAINED
        key = (cause.value, run.outcome.value, run.reason)
        groups.setdefault(key, []).append(run)
        lines = evidence.setdefault(key, [])
        # Notes hold their parameters in a dict: kept distinct by equality, not by hash.
        lines += [n for n in (classified.evidence if classified else ()) if n not in lines]
    order = [c.value for c in Cause]
    failure_groups = tuple(
        FailureGroup(
            cause=cause,
            outcome=outcome,
            reason=reason,
            count=len(members),
            probes=tuple(sorted({r.probe for r in members})),
            tenants=tuple(sorted({r.tenant for r in members})),
            explanations=_explained(members),
            evidence=tuple(evidence[(cause, outcome, reason)]),
        )
        for (cause, outcome, reason), members in sorted(
            groups.items(),
            key=lambda kv: (order.index(kv[0][0]), -len(kv[1]), kv[0][1], kv[0][2] or ""),
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


def _explained(runs: Sequence[ProbeRun]) -> tuple[Explained, ...]:
    notes: dict[str, Note] = {}
    members: dict[str, list[ProbeRun]] = {}
    for run in sorted(runs, key=_submission_order):
        note = explain(run)
        assert note is not None
        same = f"{note.key} {sorted(note.params.items())}"  # Notes hold a mapping: not hashable
        notes.setdefault(same, note)
        members.setdefault(same, []).append(run)
    order = sorted(members, key=lambda same: (-len(members[same]), members[same][0].run_id))
    return tuple(
        Explained(
            notes[same],
            tuple(r.run_id for r in members[same]),
            tuple(sorted({r.probe for r in members[same]})),
            tuple(sorted({r.tenant for r in members[same]})),
        )
        for same in order
    )


def coverage_figures(
    runs: Sequence[ProbeRun], skips: Sequence[ProbeSkip]
) -> dict[str, ProbeCoverage]:
    """Per probe that came due: its runs and skips (`runs` and `skips` of one period)."""
    ran: dict[str, list[ProbeRun]] = {}
    for run in runs:
        ran.setdefault(run.probe, []).append(run)
    skipped: dict[str, Counter[str]] = {}
    for skip in skips:
        skipped.setdefault(skip.probe, Counter())[skip.reason.value] += 1
    coverage = {}
    for probe in sorted(ran.keys() | skipped.keys()):
        mine = ran.get(probe, [])
        reasons = skipped.get(probe, Counter())
        coverage[probe] = ProbeCoverage(
            due=len(mine) + reasons.total(),
            run=len(mine),
            skipped={r.value: reasons[r.value] for r in SkipReason if reasons[r.value]},
            most_together=_most_together(mine),
        )
    return coverage


def _most_together(runs: Sequence[ProbeRun]) -> int:
    edges: dict[str, list[tuple[datetime, int]]] = {}  # by tenant: (instant, 0 in / 1 out)
    for run in runs:
        if run.submitted_at is not None:
            mine = edges.setdefault(run.tenant, [])
            mine.append((run.submitted_at, 0))
            if run.finished_at is not None:
                mine.append((run.finished_at, 1))
    most = 0
    for mine in edges.values():
        # At one instant submissions come before ends: copies submitted together were
        # together, even one ended at once (refused; an isolation run reads, runs nothing).
        held = 0
        for _, out in sorted(mine):
            held += -1 if out else 1
            most = max(most, held)
    return most


def all_job_figures(slots: Sequence[JobSlot], period: Period) -> AllJobFigures | None:
    listed = sum(period.clip(s.start, s.listed_until) for s in slots)
    if listed == 0:
        return None
    tallies = [t for s in slots for t in s.tallies]
    failed = [t for t in tallies if t.phase is JobPhase.FAILED]
    tenants = sorted({t.tenant for t in tallies})
    groups: dict[tuple[str | None, str | None], dict[str, int]] = {}
    ours: Counter[tuple[str | None, str | None]] = Counter()
    for t in failed:
        by_tenant = groups.setdefault((t.cause, t.reason), {})
        by_tenant[t.tenant] = by_tenant.get(t.tenant, 0) + t.jobs
        if t.origin is JobOrigin.OBSERVER:
            ours[(t.cause, t.reason)] += t.jobs
    order = [*(c.value for c in Cause), None]  # tallied before causes were kept: last
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
            JobFailureGroup(
                cause,
                reason,
                sum(counts.values()),
                dict(sorted(counts.items())),
                ours[(cause, reason)],
            )
            for (cause, reason), counts in sorted(
                groups.items(),
                key=lambda kv: (order.index(kv[0][0]), -sum(kv[1].values()), kv[0][1] or ""),
            )
        ),
        complete=listed >= period.seconds and all(s.complete for s in slots),
        listed_seconds=listed,
        notes=tuple(sorted({s.note for s in slots if s.note})),
        by_observer=TenantJobs(
            sum(t.jobs for t in tallies if t.origin is JobOrigin.OBSERVER),
            sum(t.jobs for t in failed if t.origin is JobOrigin.OBSERVER),
        ),
        waits_by_tenant=_tenant_waits(slots),
    )


def _tenant_waits(slots: Sequence[JobSlot]) -> dict[str, WaitStats]:
    counts: dict[str, Counter[int]] = {}
    for slot in slots:
        for wait in slot.waits:
            counts.setdefault(wait.tenant, Counter())[wait.wait_seconds] += wait.jobs
    return {tenant: counted_wait_stats(counts[tenant]) for tenant in sorted(counts)}


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
        by_task={k: utilization_stats(v) for k, v in usage.by_task.items()},
        by_window_tenant={
            window: {k: utilization_stats(v) for k, v in tenants.items()}
            for window, tenants in usage.by_window_tenant.items()
        },
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
