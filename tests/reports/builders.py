"""Hand-made report inputs: runs, findings and samples at known instants of one day."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from observer.domain import (
    Expectation,
    Finding,
    FindingKind,
    JsonValue,
    Outcome,
    ProbeRun,
    QueueState,
    RunState,
    SchedulerNode,
    Severity,
)
from observer.probes.windows import Calendar, Window, parse_days
from observer.records import (
    InferencePhase,
    InferenceSample,
    PhaseKind,
    StoredAlert,
    StoredGpuSample,
    StoredQueueSample,
)
from observer.reports.compute.criteria.result import VerdictRules
from observer.reports.compute.data import (
    GpuUsage,
    Period,
    ReportContext,
    Sources,
    UtilizationHistogram,
)
from tests.support.times import on_day

TZ = ZoneInfo("Asia/Shanghai")
DAY_START = datetime(2026, 12, 1, 0, 0, tzinfo=TZ)
at = on_day(DAY_START)
DAY = Period(DAY_START, DAY_START + timedelta(days=1))
CALENDAR = Calendar(
    TZ,
    [
        Window("weekday-peak", parse_days("mon-fri"), time(9), time(18)),
        Window("night", parse_days("*"), time(22), time(6)),
    ],
)


def context(
    *,
    agents: bool = True,
    prometheus: bool = True,
    alertmanager: bool = True,
    logs: bool = True,
    snapshot_interval_seconds: float = 30.0,
) -> ReportContext:
    return ReportContext(
        calendar=CALENDAR,
        sources=Sources(agents, prometheus, alertmanager, logs),
        snapshot_interval_seconds=snapshot_interval_seconds,
        soak_started_at=DAY_START,
        ignored_alerts=frozenset({"Watchdog"}),
    )


_ids = iter(range(1, 1_000_000))


def run(
    probe: str = "short",
    tenant: str = "research",
    *,
    submitted: datetime | None = None,
    wait_seconds: float | None = 0.0,
    outcome: Outcome | None = Outcome.PASSED,
    reason: str | None = None,
    message: str | None = None,
    window: str | None = "weekday-peak",
    expectation: Expectation = Expectation.SUCCEED,
    exit_code: int | None = None,
    pending: dict[str, float] | None = None,
    finished: datetime | None = None,
) -> ProbeRun:
    submitted = submitted or at(10)
    started = None if wait_seconds is None else submitted + timedelta(seconds=wait_seconds)
    return ProbeRun(
        run_id=f"run-{next(_ids):04d}",
        probe=probe,
        tenant=tenant,
        queue=None,
        window=window,
        expectation=expectation,
        gpus=1,
        nodes=1,
        state=RunState.DONE if outcome else RunState.RUNNING,
        job_id="job",
        submitted_at=submitted,
        started_at=started,
        finished_at=finished
        or ((started or submitted) + timedelta(minutes=1) if outcome else None),
        outcome=outcome,
        exit_code=exit_code,
        reason=reason,
        message=message,
        pending_reasons=pending or {},
    )


def reclaim(
    quota: ProbeRun,
    wait_seconds: float | None = 40.0,
    *,
    outcome: Outcome | None = Outcome.PASSED,
    reason: str | None = None,
) -> ProbeRun:
    """The within-quota probe the controller submits once `quota` (the over-quota probe)
    ended as it should; it starts `wait_seconds` after (None: it did not)."""
    within = run(
        "quota-reclaim",
        quota.tenant,
        submitted=quota.finished_at,
        wait_seconds=wait_seconds,
        window=quota.window,
        outcome=outcome,
        reason=reason,
    )
    return replace(within, reclaims_run_id=quota.run_id)


def serving(
    start: datetime,
    end: datetime,
    every: timedelta = timedelta(hours=1),
    latencies_ms: tuple[float, ...] = (20.0, 24.0),
    requests: int = 2,
) -> list[InferenceSample]:
    """Looks at the inference service `svc` of two ready replicas, one every `every` from
    `start` to `end`, each answering `latencies_ms` of its `requests`."""
    looks, when = [], start
    while when < end:
        errors = requests - len(latencies_ms)
        looks.append(InferenceSample(when, "svc", 2, 2, 0, requests, errors, latencies_ms))
        when += every
    return looks


def started(at_: datetime, ready_seconds: float = 120.0) -> InferencePhase:
    """The inference service `svc` deployed at `at_`, its two replicas ready `ready_seconds`
    later."""
    ready = at_ + timedelta(seconds=ready_seconds)
    return InferencePhase("svc", PhaseKind.START, at_, ready, 0, 2, 0.0, None, 0.0)


def finding(
    detector: str,
    opened: datetime,
    closed: datetime | None,
    *,
    kind: FindingKind = FindingKind.CONDITION,
    severity: Severity = Severity.WARNING,
    evidence: dict[str, JsonValue] | None = None,
    **subject: str,
) -> Finding:
    return Finding(
        detector=detector,
        kind=kind,
        subject=subject or {"node": "n1"},
        severity=severity,
        summary=f"{detector} on {subject}",
        opened_at=opened,
        closed_at=closed,
        evidence=evidence or {"rule": "a rule", "seen": [1, 2]},
    )


def alert(name: str, starts: datetime, last_seen: datetime, **labels: str) -> StoredAlert:
    """An alert Alertmanager held from `starts`, last seen firing at `last_seen`."""
    return StoredAlert(
        fingerprint=f"{name}-{starts.isoformat()}",
        name=name,
        severity=labels.get("severity"),
        starts_at=starts,
        ends_at=None,
        last_seen_at=last_seen,
        labels={"alertname": name, **labels},
    )


def alerted(findings: Iterable[Finding], end: datetime) -> list[StoredAlert]:
    """The chart's rule on the observer's findings firing in Alertmanager for each of
    `findings` while it was open (until `end` when still open): an alerting chain that works."""
    return [
        alert(
            "ObserverWarningFindingOpen",
            f.opened_at,
            f.closed_at or end,
            detector=f.detector,
            severity=f.severity.value,
        )
        for f in findings
    ]


def gpu(
    node: str, when: datetime, percent: int | None, index: int = 0, tenant: str | None = None
) -> StoredGpuSample:
    return StoredGpuSample(
        node=node,
        gpu_uuid=f"GPU-{node}-{index}",
        gpu_index=index,
        at=when,
        utilization_gpu_percent=percent,
        tenant=tenant,
    )


def sampled(*nodes: str) -> GpuUsage:
    """A period's GPU samples, reduced: one sample per node, at 50 %."""
    return GpuUsage(overall=UtilizationHistogram.of([50] * len(nodes)), nodes=frozenset(nodes))


def owner_state_unknown(node: str, opened: datetime, closed: datetime | None) -> Finding:
    """The agent of `node` could not tell whether its GPU processes' owners still ran."""
    return finding("owner_state_unknown", opened, closed, node=node)


def queue(
    when: datetime, tenant: str, pending: int = 0, running_gpus: int = 0
) -> StoredQueueSample:
    return StoredQueueSample(
        when, QueueState(tenant, None, pending, pending, running_gpus // 1, running_gpus, 0.0)
    )


def node(
    name: str,
    pool: str,
    total: int,
    allocated: int,
    state: str = "mixed",
    reason: str | None = None,
) -> SchedulerNode:
    return SchedulerNode(name, pool, total, allocated, state, reason)


def utc(when: datetime) -> datetime:
    return when.astimezone(UTC)


# The verdict's rules the report tests judge soaks by.
RULES = VerdictRules(
    monitoring_lag_max_seconds=600,
    unexplained_wait_max_share=0.05,
    unexplained_failure_max_share=0.1,
    blind_max_share=0.05,
    layer_blind_max_share=0.1,
    intervention_match_seconds=3600,
    fairness_persistence_k=3,
    fairness_persistence_m=5,
    later_utilisation_share_of_allocated=0.75,
    later_quota_hold_seconds=3600,
    quota_reclaim_seconds=300,
)
