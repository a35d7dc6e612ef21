"""Did the platform react to a failed GPU? A node whose agent reported a fatal GPU fault - an
Xid NVIDIA's catalogue calls fatal (79: fallen off the bus, 95: uncontained ECC, ...), a GPU
lost to NVML, a row remap failure - and that the scheduler still keeps in service (not
drained, down or cordoned) `grace_seconds` after the fault is unhealthy_gpu_in_service, with
the jobs the scheduler placed there since. No exporter shows this, and it decides whether
operations can run the platform. Pure: the faults remembered per node and a scheduler
snapshot in, symptoms out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from observer.detectors.gpu_health import GPU_XID, ROW_REMAP_FAILED
from observer.detectors.scheduler_terms import in_service
from observer.domain import JsonValue, NodeSnapshot, SchedulerSnapshot, Severity, Symptom

UNHEALTHY_GPU_IN_SERVICE = "unhealthy_gpu_in_service"
DETECTORS = frozenset({UNHEALTHY_GPU_IN_SERVICE})
GPU_LOST = "gpu_lost"
# Conditions the agent keeps open while a GPU is unusable for good.
FATAL_CONDITIONS = frozenset({GPU_LOST, ROW_REMAP_FAILED})
# A fault is remembered this long at most (the agent keeps an Xid event for an hour): a node
# never taken out of service stays a finding for a day after its last fatal fault.
FAULT_MEMORY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Placed:
    job_id: str
    tenant: str
    run_id: str | None
    started_at: datetime


@dataclass(frozen=True, slots=True)
class Fault:
    """A fatal GPU fault one node's agent reported (the finding that said so), and the jobs
    the scheduler was seen to start on the node since."""

    node: str
    at: datetime
    detector: str
    subject: Mapping[str, str]
    summary: str
    placed: tuple[Placed, ...] = ()


def faults(snapshot: NodeSnapshot) -> list[Fault]:
    """The fatal faults in one agent snapshot: Xid events marked fatal, open fatal conditions."""
    return [
        Fault(snapshot.node, f.opened_at, f.detector, dict(f.subject), f.summary)
        for f in snapshot.findings
        if (f.detector == GPU_XID and f.evidence.get("fatal") is True)
        or (f.detector in FATAL_CONDITIONS and f.is_open)
    ]


def remember(
    known: Mapping[str, Fault],
    seen: Iterable[Fault],
    scheduler: SchedulerSnapshot | None,
    now: datetime,
) -> dict[str, Fault]:
    """The first fatal fault per node since the platform last took it out of service, with
    the jobs started there since: a node the scheduler shows out of service (it reacted)
    forgets its faults, and every fault is forgotten after FAULT_MEMORY."""
    out_of_service = (
        set() if scheduler is None else {n.name for n in scheduler.nodes if not in_service(n)}
    )
    kept = {
        node: fault
        for node, fault in known.items()
        if node not in out_of_service and now - fault.at <= FAULT_MEMORY
    }
    for fault in sorted(seen, key=lambda f: f.at):
        if fault.node not in out_of_service and now - fault.at <= FAULT_MEMORY:
            kept.setdefault(fault.node, fault)
    if scheduler is None:
        return kept
    return {node: _with_jobs(fault, scheduler) for node, fault in kept.items()}


def _with_jobs(fault: Fault, scheduler: SchedulerSnapshot) -> Fault:
    placed = {p.job_id: p for p in fault.placed}
    for job in scheduler.jobs:
        started = job.started_at
        if fault.node in job.nodes and started is not None and started > fault.at:
            placed.setdefault(job.job_id, Placed(job.job_id, job.tenant, job.run_id, started))
    if len(placed) == len(fault.placed):
        return fault
    ordered = tuple(sorted(placed.values(), key=lambda p: (p.started_at, p.job_id)))
    return replace(fault, placed=ordered)


def evaluate(
    known: Mapping[str, Fault], scheduler: SchedulerSnapshot, grace_seconds: float
) -> list[Symptom]:
    nodes = {n.name: n for n in scheduler.nodes}
    symptoms = []
    for name, fault in sorted(known.items()):
        node = nodes.get(name)
        since = (scheduler.at - fault.at).total_seconds()
        if node is None or not in_service(node) or since < grace_seconds:
            continue
        jobs: list[JsonValue] = [
            {
                "job_id": p.job_id,
                "tenant": p.tenant,
                "run_id": p.run_id,
                "started_at": p.started_at.isoformat(),
            }
            for p in fault.placed
        ]
        symptoms.append(
            Symptom(
                detector=UNHEALTHY_GPU_IN_SERVICE,
                subject={"node": name},
                severity=Severity.CRITICAL,
                summary=f"{name} is still {node.state} {since:.0f} s after a fatal GPU fault "
                f"({fault.detector}); the scheduler placed {len(jobs)} job(s) there since",
                rule="a node whose agent reported a fatal GPU fault is drained, down or cordoned "
                f"within {grace_seconds:g} s",
                evidence={
                    "fault": {
                        "detector": fault.detector,
                        "at": fault.at.isoformat(),
                        "subject": dict(fault.subject),
                        "summary": fault.summary,
                    },
                    "node_state": node.state,
                    "node_reason": node.reason,
                    "grace_seconds": grace_seconds,
                    "fault_age_seconds": since,
                    "jobs_placed_since": jobs,
                },
            )
        )
    return symptoms
