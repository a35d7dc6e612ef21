"""The demo's score: a finding counts for a fault only on the fault's detector and subject,
and a fault that was never injected fails the demo."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from observer.demo.faults import FAULTS, Injection, score
from observer.domain import Finding, FindingKind, Severity

T0 = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)


def _fault(kind: str) -> Injection:
    return Injection(next(f for f in FAULTS if f.kind == kind))


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
    assert result.unmet["unfair_scheduler"] == [("persistent_unfairness", {"tenant": "research"})]
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
    assert result.found["leaked_probe_process"] == [right, memory]
    assert result.unexpected == [other]
    assert result.missed == []


def test_every_check_the_stall_expects_must_be_found():
    stall = _fault("prometheus_stall")
    stall.start, stall.end = T0, T0 + timedelta(minutes=20)
    heartbeat = _finding("monitoring_lag", {"pipeline": "prometheus", "check": "heartbeat"})
    result = score([stall], [heartbeat])
    assert result.missed == [stall]
    assert [s["check"] for _, s in result.unmet["prometheus_stall"]] == ["freshness", "scrape"]
