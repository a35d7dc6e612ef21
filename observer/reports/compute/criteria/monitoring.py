"""The monitoring criteria: every GPU sampled and every run attributed (monitoring_linked),
the canaries' log lines all delivered (no_log_loss), monitoring never late beyond its bound
while a controller ran (monitoring_lag_bound), and the alerts the soak raised reaching
Alertmanager (alerting_chain). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from observer.domain import (
    Comparison,
    Finding,
    FindingKind,
    JsonValue,
    Outcome,
    Severity,
    compare_seconds,
)
from observer.records import StoredAlert, controller_not_running, overlap_seconds
from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    Status,
    VerdictRules,
    found_by,
    result,
)
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.events import BLIND_DETECTORS, NODE_NAMES
from observer.reports.compute.notes import Note, named


def monitoring_linked(soak: PeriodData, context: ReportContext) -> CriterionResult:
    name = "monitoring_linked"
    sampled = soak.gpu.nodes
    if not sampled:
        return result(name, Status.NOT_OBSERVED, [Note("ev.no_gpu_samples")])
    known = {n.name for n in soak.nodes_at_start if n.gpus_total > 0} | {
        c.node.name for c in soak.node_changes if c.node.gpus_total > 0
    }
    missing = sorted(known - sampled)
    busy_lag = [
        f
        for f in soak.findings
        if f.detector == "monitoring_lag" and f.subject.get("check") == "gpu_busy_lag"
    ]
    attributed = sum(1 for r in soak.runs if r.tenant and r.window)
    busy_runs = sum(
        1 for r in soak.runs if r.probe in context.busy_probes and r.outcome is Outcome.PASSED
    )
    evidence = [
        Note(
            "ev.coverage",
            {
                "sampled": len(known & sampled),
                "known": len(known),
                "missing": named(missing, NODE_NAMES),
            },
        ),
        Note("ev.runs_attributed", {"attributed": attributed, "runs": len(soak.runs)}),
        Note(
            "ev.gpus_attributed",
            {
                "attributed": sum(h.samples for h in soak.gpu.by_tenant.values()),
                "samples": soak.gpu.overall.samples,
            },
        ),
        Note("ev.busy_lag", {"runs": busy_runs, "findings": len(busy_lag)}),
    ]
    failed = bool(missing or busy_lag)
    return result(
        name,
        Status.FAIL if failed else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        busy_lag,
        soak.period,
        context.calendar,
    )


def _lines(value: object) -> int:
    return value if isinstance(value, int) else 0


def no_log_loss(soak: PeriodData, context: ReportContext) -> CriterionResult:
    name = "no_log_loss"
    canaries = [
        r for r in soak.runs if r.probe in context.canary_probes and r.outcome is Outcome.PASSED
    ]
    if not canaries:
        return result(
            name,
            Status.NOT_OBSERVED,
            [Note("ev.no_probe_runs", {"probe": sorted(context.canary_probes)})],
        )
    lost = found_by(soak.findings, ["log_loss"])
    missing = [f for f in lost if f.severity is Severity.CRITICAL]
    late = found_by(soak.findings, ["log_delivery_latency"])
    evidence = [
        Note(
            "ev.logs",
            {
                "canaries": len(canaries),
                "lost": len(missing),
                "lost_lines": sum(_lines(f.evidence.get("missing_lines")) for f in missing),
                "damaged": len(lost) - len(missing),
                "late": len(late),
            },
        )
    ]
    where = (soak.period, context.calendar)
    if missing:
        return result(name, Status.FAIL, evidence, FailureClass.MUST_FIX, missing, *where)
    if lost:
        return result(name, Status.FAIL, evidence, FailureClass.LIMITED_LAUNCH, lost, *where)
    if late:
        return result(name, Status.FAIL, evidence, FailureClass.LATER_OPTIMISATION, late, *where)
    return result(name, Status.PASS, evidence)


def monitoring_lag_bound(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    name = "monitoring_lag_bound"
    lag = found_by(soak.findings, ["monitoring_lag", "prometheus_unreachable"])
    end = soak.period.end
    # No lag is measured while no controller ran: that time is blind, not late.
    down = controller_not_running(soak.controller_runs, end, context.controller_gone_after_seconds)

    def lasted(f: Finding) -> float:
        closed = f.closed_at or end
        return (closed - f.opened_at).total_seconds() - overlap_seconds(f.opened_at, closed, down)

    # Over the bound as both durations are written: "lasted 1 h, bound 1 h" is within it.
    conditions = [f for f in lag if f.kind is FindingKind.CONDITION]
    over = [
        f
        for f in conditions
        if compare_seconds(lasted(f), rules.monitoring_lag_max_seconds) is Comparison.MORE
    ]
    params: dict[str, JsonValue] = {
        "conditions": len(conditions),
        "over": len(over),
        "longest_seconds": max((lasted(f) for f in conditions), default=0.0),
        "limit_seconds": rules.monitoring_lag_max_seconds,
    }
    form = "ev.lag.over" if over else "ev.lag.within" if conditions else "ev.lag.none"
    evidence = [Note(form, params)]
    return result(
        name,
        Status.FAIL if over else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        over,
        soak.period,
        context.calendar,
    )


# The chart's alert rules (helm/observer/files/alerts.yaml) are all named so.
OBSERVER_ALERTS = "Observer"
# Its rules on the observer's findings wait at most 15 minutes (`for`) before they fire;
# twice that leaves Prometheus's scrapes and evaluation and the alert poller their time.
ALERT_DUE_SECONDS = 1800.0


def alerting_chain(soak: PeriodData, context: ReportContext) -> CriterionResult:
    """Whether the alerts of the soak reached Alertmanager, which routes them to its
    receivers (the observer does not see which receiver got each). Passes when alerts were
    seen there and each condition of the observer's that lasted ALERT_DUE_SECONDS while
    Alertmanager was read (its own blindness aside: those alert through its health rules)
    had an alert of the chart's rules firing while it was open, carrying its detector where
    the rule names one; fails on a condition without one; not observed without Alertmanager,
    or when nothing fired and nothing was due."""
    name = "alerting_chain"
    if not context.sources.alertmanager:
        return result(name, Status.NOT_OBSERVED, [Note("ev.alerting.not_set_up")])
    alerts = [a for a in soak.alerts if a.name not in context.ignored_alerts]
    mine = [a for a in alerts if a.name.startswith(OBSERVER_ALERTS)]
    end = soak.period.end
    unread = [
        (s.down_from, s.up_at)
        for s in controller_not_running(
            soak.controller_runs, end, context.controller_gone_after_seconds
        )
    ] + [
        (f.opened_at, f.closed_at or end)
        for f in soak.findings
        if BLIND_DETECTORS.get(f.detector) == "alerts"
    ]
    due = [
        f
        for f in soak.findings
        if f.kind is FindingKind.CONDITION
        and f.detector not in BLIND_DETECTORS
        and _read_seconds(f.opened_at, f.closed_at or end, unread) >= ALERT_DUE_SECONDS
    ]
    missed = [f for f in due if not any(_raised(a, f, end) for a in mine)]
    params: dict[str, JsonValue] = {
        "alerts": len(alerts),
        "observer_alerts": len(mine),
        "due": len(due),
        "missed": len(missed),
        "due_seconds": ALERT_DUE_SECONDS,
    }
    if not alerts and not due:
        return result(name, Status.NOT_OBSERVED, [Note("ev.alerting.unexercised", params)])
    form = "ev.alerting.missed" if missed else "ev.alerting.reached" if due else "ev.alerting.seen"
    evidence = [Note(form, params), Note("ev.alerting.receivers")]
    if missed:
        return result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.LIMITED_LAUNCH,
            missed,
            soak.period,
            context.calendar,
        )
    return result(name, Status.PASS, evidence)


def _read_seconds(
    start: datetime, end: datetime, unread: Sequence[tuple[datetime, datetime]]
) -> float:
    """How much of [start, end) Alertmanager was read: outside the stretches it was not
    (which may overlap: a little of the span is then counted unread twice)."""
    lost = sum(max(0.0, (min(end, b) - max(start, a)).total_seconds()) for a, b in unread)
    return (end - start).total_seconds() - lost


def _raised(alert: StoredAlert, finding: Finding, end: datetime) -> bool:
    """The alert fired while the finding was open, and names its detector if it names one."""
    detector = alert.labels.get("detector")
    if detector is not None and detector != finding.detector:
        return False
    return alert.starts_at <= (finding.closed_at or end) and alert.last_seen_at >= finding.opened_at
