"""A scenario's score: a finding counts for a fault only on the fault's detector and subject,
a fault that was never injected fails the run, a confounder explains nothing, and each
detector is scored for recall, precision and delay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from observer.demo import faults
from observer.demo.faults import Injection, score
from observer.domain import Finding, FindingKind, Severity

T0 = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)


AT = datetime(2026, 11, 23, 10, 0)
DECLARED = {
    "unfair_scheduler": faults.UnfairScheduler(
        kind="unfair_scheduler", favoured="prod", at=AT, until=AT + timedelta(hours=2)
    ),
    "log_loss": faults.LogLoss(kind="log_loss", at=AT),
    "leaked_probe_process": faults.LeakedProbeProcess(
        kind="leaked_probe_process", at=AT, until=AT + timedelta(minutes=45)
    ),
    "prometheus_stall": faults.PrometheusStall(
        kind="prometheus_stall", at=AT, until=AT + timedelta(minutes=20)
    ),
    "prometheus_blip": faults.PrometheusBlip(kind="prometheus_blip", at=AT),
    "scheduler_unreachable": faults.SchedulerUnreachable(
        kind="scheduler_unreachable", at=AT, until=AT + timedelta(minutes=30)
    ),
}


def _fault(kind: str) -> Injection:
    return Injection(DECLARED[kind])


def _finding(detector: str, subject: dict[str, str], minutes: float = 10) -> Finding:
    return Finding(
        detector=detector,
        kind=FindingKind.CONDITION,
        subject=subject,
        severity=Severity.WARNING,
        summary="",
        opened_at=T0 + timedelta(minutes=minutes),
        closed_at=None,
    )


def _unfair() -> Injection:
    injection = _fault("unfair_scheduler")
    injection.start, injection.end = T0, T0 + timedelta(hours=1)
    return injection


def test_a_finding_on_the_disadvantaged_tenant_finds_the_unfair_scheduler():
    result = score([_unfair()], [_finding("persistent_unfairness", {"tenant": "research"})])
    assert result.missed == [] and result.unexpected == []


def test_a_finding_on_the_wrong_subject_does_not_count():
    favoured = _finding("persistent_unfairness", {"tenant": "prod"})
    result = score([_unfair()], [favoured])
    assert [i.fault.kind for i in result.missed] == ["unfair_scheduler"]
    assert [(e.detector, dict(e.not_)) for e, _ in result.unmet[0]] == [
        ("persistent_unfairness", {"tenant": "prod"})
    ]
    assert result.unexpected == [favoured]


def test_a_fault_not_injected_fails():
    never = _fault("log_loss")
    result = score([_unfair(), never], [_finding("persistent_unfairness", {"tenant": "research"})])
    assert result.missed == [never]
    assert not never.injected


def test_the_subject_an_injection_names_must_match():
    leak = _fault("leaked_probe_process")
    leak.start, leak.end = T0, T0 + timedelta(minutes=45)
    leak.hit = [{"node": "node-000", "run_id": "r1"}]
    right = _finding("probe_unreleased", {"run_id": "r1", "node": "node-000", "tenant": "a"})
    other = _finding("probe_unreleased", {"run_id": "r2", "node": "node-000", "tenant": "a"})
    memory = _finding("unreleased_memory", {"node": "node-000", "gpu_uuid": "g", "pid": "1"})
    result = score([leak], [right, other, memory])
    assert result.found[0] == [right, memory]
    assert result.unexpected == [other]
    assert result.missed == []


def test_every_check_the_stall_expects_must_be_found():
    stall = _fault("prometheus_stall")
    stall.start, stall.end = T0, T0 + timedelta(minutes=20)
    heartbeat = _finding("monitoring_lag", {"pipeline": "prometheus", "check": "heartbeat"})
    result = score([stall], [heartbeat])
    assert result.missed == [stall]
    assert [s["check"] for _, s in result.unmet[0]] == ["freshness", "scrape"]


def test_a_finding_while_a_confounder_is_on_is_unexpected_and_names_it():
    blip = _fault("prometheus_blip")
    blip.start, blip.end = T0, T0 + timedelta(seconds=20)
    lag = _finding("monitoring_lag", {"pipeline": "prometheus", "check": "scrape"}, minutes=1)
    result = score([blip], [lag])
    assert result.unexpected == [lag] and result.missed == []
    assert result.confounders_on(lag) == ["prometheus_blip"]
    assert not result.passed


def test_the_accounting_blind_under_a_scheduler_outage_is_explained_never_required():
    outage = _fault("scheduler_unreachable")
    outage.start, outage.end = T0, T0 + timedelta(minutes=30)
    blind = _finding("accounting_unreachable", {"accounting": "simulated"}, minutes=5)
    after = _finding("accounting_unreachable", {"accounting": "simulated"}, minutes=45)

    during = score([outage], [blind])
    later = score([outage], [after])
    quiet = score([outage], [])

    assert during.unexpected == [] and during.passed
    assert later.unexpected == [after] and not later.passed
    assert quiet.passed


def test_each_detector_is_scored_for_recall_precision_and_delay():
    stall = _fault("prometheus_stall")
    stall.start, stall.end = T0, T0 + timedelta(minutes=20)
    checks = ("heartbeat", "freshness", "scrape")
    found = [
        _finding("monitoring_lag", {"pipeline": "prometheus", "check": c}, minutes=2 + n)
        for n, c in enumerate(checks)
    ]
    stray = _finding("monitoring_lag", {"pipeline": "prometheus", "check": "scrape"}, minutes=90)
    table = score([stall], [*found, stray]).by_detector()
    assert table["monitoring_lag"] == {
        "expected": 3,
        "met": 3,
        "findings": 4,
        "explained": 3,
        "recall": 1.0,
        "precision": 0.75,
        "median_delay_seconds": 120.0,
    }
