"""Which agent findings are fatal GPU faults, and what the platform's reaction is: a node
drained, down or cordoned forgets its fault; one still in service past the grace is
unhealthy_gpu_in_service with the jobs started there since."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from observer.detectors import gpu_in_service
from observer.domain import Finding, FindingKind, SchedulerNode, SchedulerSnapshot, Severity
from tests.detectors.test_probe_release import NODE, agent, at, job

GRACE = 600.0


def xid(code: int, fatal: bool, seconds: float = 0) -> Finding:
    return Finding(
        detector="gpu_xid",
        kind=FindingKind.EVENT,
        subject={"node": NODE, "pci_bus_id": "0000:3b:00.0", "xid": str(code)},
        severity=Severity.CRITICAL if fatal else Severity.WARNING,
        summary=f"Xid {code}",
        opened_at=at(seconds),
        closed_at=at(seconds),
        evidence={"xid": code, "fatal": fatal},
    )


def lost(seconds: float, closed: bool = False) -> Finding:
    return Finding(
        detector="gpu_lost",
        kind=FindingKind.CONDITION,
        subject={"node": NODE, "gpu": "2"},
        severity=Severity.CRITICAL,
        summary="GPU 2 lost",
        opened_at=at(seconds),
        closed_at=at(seconds + 1) if closed else None,
        evidence={},
    )


def scheduler(
    seconds: float, state: str = "mixed", started: float | None = None
) -> SchedulerSnapshot:
    jobs = () if started is None else (replace(job("slurm-9"), started_at=at(started)),)
    return SchedulerSnapshot(at(seconds), (), (SchedulerNode(NODE, "a", 8, 1, state),), jobs)


def test_fatal_xids_and_open_fatal_conditions_are_faults_application_xids_are_not():
    snapshot = agent(10, findings=[xid(79, True), xid(13, False), lost(5), lost(1, closed=True)])

    faults = gpu_in_service.faults(snapshot)

    assert [(f.detector, f.at) for f in faults] == [("gpu_xid", at(0)), ("gpu_lost", at(5))]


def test_a_node_still_in_service_past_the_grace_names_the_jobs_started_there_since():
    [fault] = gpu_in_service.faults(agent(10, findings=[xid(79, True)]))
    known = gpu_in_service.remember({}, [fault], scheduler(300, started=200), at(300))
    known = gpu_in_service.remember(known, [fault], scheduler(GRACE + 10), at(GRACE + 10))

    assert gpu_in_service.evaluate(known, scheduler(GRACE - 1), GRACE) == []
    [symptom] = gpu_in_service.evaluate(known, scheduler(GRACE + 10), GRACE)

    assert symptom.subject == {"node": NODE}
    assert [j["job_id"] for j in symptom.evidence["jobs_placed_since"]] == ["slurm-9"]


def test_a_node_the_platform_drained_forgets_its_fault():
    [fault] = gpu_in_service.faults(agent(10, findings=[xid(79, True)]))
    known = gpu_in_service.remember({}, [fault], scheduler(60), at(60))

    drained = gpu_in_service.remember(known, [fault], scheduler(120, "drained"), at(120))

    assert drained == {}
    assert gpu_in_service.evaluate(drained, scheduler(GRACE + 10), GRACE) == []


def test_a_fault_is_forgotten_after_a_day():
    [fault] = gpu_in_service.faults(agent(10, findings=[xid(79, True)]))
    later = at(0) + gpu_in_service.FAULT_MEMORY + timedelta(seconds=1)

    assert gpu_in_service.remember({NODE: fault}, [], None, later) == {}
