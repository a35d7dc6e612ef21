"""The controlled experiment: after each of our own probes ends, the GPUs it ran on must be back
to idle (no process of its job, memory back to the agent's learned baseline) within the grace
period, as the agents see them.

A run is judged on a node only by an agent snapshot taken after the grace ran out and still
fresh; a node without one is neither opened nor closed (`covers`) and its check waits.
Matching: a process whose owner is one the scheduler named for the run's job (Slurm's and
the simulator's job id, the UIDs of a Kubernetes Job's pods; the job id itself when the
scheduler was never seen listing the job) is the job's. Memory above baseline that no named
owner explains (no process, or processes whose owner the agent cannot tell) is the job's
only while the scheduler shows no job at all on the node: then nothing else there can
explain it."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from observer.detectors.layers import (
    HELD,
    RELEASED,
    UNKNOWN,
    allocation_holds,
    fresh_snapshot,
    job_processes,
    layers,
    memory_above_baseline,
    open_node_findings,
)
from observer.domain import (
    GpuReading,
    JsonValue,
    NodeSnapshot,
    OwnerKind,
    ProbeRun,
    SchedulerSnapshot,
    Severity,
    Subject,
    Symptom,
)

DETECTOR = "probe_unreleased"
BY_JOB_ID = "a process owned by the run's job"
BY_ELIMINATION = "memory above baseline with no owner the agent can name, no job on the node"


@dataclass(frozen=True, slots=True)
class Check:
    symptoms: list[Symptom]
    judged: frozenset[tuple[str, str]]  # (run id, node) seen by a fresh snapshot after grace
    clean: frozenset[tuple[str, str]]  # of those, the ones back to idle


def evaluate(
    pending: Sequence[tuple[ProbeRun, str]],
    scheduler: SchedulerSnapshot | None,
    nodes: Mapping[str, NodeSnapshot],
    now: datetime,
    *,
    owners: Mapping[str, Collection[str]],
    grace_seconds: float,
    snapshot_max_age_seconds: float,
    memory_tolerance_bytes: int,
) -> Check:
    """Judge each (ended run, node it ran on) whose grace has run out. `owners`: by job id,
    the owner ids the scheduler last named for the job (JobStatus.owner_ids)."""
    symptoms: list[Symptom] = []
    judged: set[tuple[str, str]] = set()
    clean: set[tuple[str, str]] = set()
    for run, node in pending:
        ended, job_id = run.finished_at, run.job_id
        if ended is None or job_id is None:
            continue
        due = ended + timedelta(seconds=grace_seconds)
        agent = fresh_snapshot(nodes.get(node), now, snapshot_max_age_seconds)
        if agent is None or agent.at < due:
            continue
        judged.add((run.run_id, node))
        symptom = _judge(
            run,
            job_id,
            owners.get(job_id, (job_id,)),
            ended,
            node,
            agent,
            scheduler,
            grace_seconds,
            memory_tolerance_bytes,
        )
        if symptom is None:
            clean.add((run.run_id, node))
        else:
            symptoms.append(symptom)
    return Check(symptoms, frozenset(judged), frozenset(clean))


def covers(check: Check, detector: str, subject: Subject) -> bool:
    return detector != DETECTOR or (subject["run_id"], subject["node"]) in check.judged


def _judge(
    run: ProbeRun,
    job_id: str,
    owner_ids: Collection[str],
    ended: datetime,
    node: str,
    agent: NodeSnapshot,
    scheduler: SchedulerSnapshot | None,
    grace_seconds: float,
    tolerance: int,
) -> Symptom | None:
    job_gpus = {p.gpu_index for p in job_processes(owner_ids, agent)}
    matched_by = BY_JOB_ID
    no_job_on_node = (
        scheduler is not None
        and scheduler.at >= ended
        and not any(node in j.nodes for j in scheduler.jobs)
    )
    if not job_gpus and no_job_on_node:
        job_gpus = {gpu.index for gpu in agent.gpus if _unexplained(gpu, agent, tolerance)}
        matched_by = BY_ELIMINATION
    if not job_gpus:
        return None
    gpus = [_gpu_evidence(gpu, agent) for gpu in agent.gpus if gpu.index in job_gpus]
    uuids = [str(g["uuid"]) for g in gpus if g["uuid"]]
    return Symptom(
        detector=DETECTOR,
        subject={"run_id": run.run_id, "node": node, "tenant": run.tenant},
        severity=Severity.CRITICAL,
        summary=f"probe {run.probe} ({run.tenant}, job {job_id}) ended; "
        f"{len(gpus)} GPU(s) on {node} are not back to idle {grace_seconds:g} s later",
        rule="after one of our probes ends, the GPUs it ran on hold no process of its job and "
        f"no memory above the driver baseline within {grace_seconds:g} s",
        evidence={
            "run_id": run.run_id,
            "probe": run.probe,
            "tenant": run.tenant,
            "job_id": job_id,
            "owner_ids": sorted(owner_ids),
            "node": node,
            "ended_at": ended.isoformat(),
            "grace_seconds": grace_seconds,
            "agent_snapshot_at": agent.at.isoformat(),
            "matched_by": matched_by,
            "gpus": gpus,
            "scheduler": _scheduler_evidence(scheduler, job_id, node, ended),
            "layers": layers(
                scheduler=_scheduler_sees(scheduler, job_id, ended),
                allocation=allocation_holds(agent, owner_ids),
                nvml=HELD,
            ),
            "node_findings": open_node_findings(agent, uuids),
        },
        since=ended,
    )


def _unexplained(gpu: GpuReading, agent: NodeSnapshot, tolerance: int) -> bool:
    """Memory above baseline on a GPU where no process has an owner the agent can name."""
    above = memory_above_baseline(gpu)
    processes = [p for p in agent.processes if p.gpu_index == gpu.index]
    named = any(p.owner.kind is not OwnerKind.NONE for p in processes)
    return above is not None and above > tolerance and not named


def _gpu_evidence(gpu: GpuReading, agent: NodeSnapshot) -> dict[str, JsonValue]:
    return {
        "index": gpu.index,
        "uuid": gpu.identity.uuid if gpu.identity else None,
        "memory_above_baseline_bytes": memory_above_baseline(gpu),
        "baseline_memory_bytes": gpu.baseline_memory_bytes,
        "processes": [
            {
                "pid": p.pid,
                "executable": p.executable,
                "uid": p.uid,
                "user": p.user,
                "command": p.command,
                "owner": p.owner.label,
                "used_memory_bytes": p.used_memory_bytes,
            }
            for p in agent.processes
            if p.gpu_index == gpu.index
        ],
    }


def _scheduler_sees(scheduler: SchedulerSnapshot | None, job_id: str, ended: datetime) -> str:
    """'held' while the scheduler still lists the job (ending or running), 'released' when a
    snapshot taken after its end no longer does."""
    if scheduler is None or scheduler.at < ended:
        return UNKNOWN
    return HELD if any(j.job_id == job_id for j in scheduler.jobs) else RELEASED


def _scheduler_evidence(
    scheduler: SchedulerSnapshot | None, job_id: str, node: str, ended: datetime
) -> dict[str, JsonValue]:
    if scheduler is None:
        return {"snapshot_at": None}
    job = next((j for j in scheduler.jobs if j.job_id == job_id), None)
    allocated = next((n.gpus_allocated for n in scheduler.nodes if n.name == node), None)
    return {
        "snapshot_at": scheduler.at.isoformat(),
        "job_ending_since": job.ending_since.isoformat() if job and job.ending_since else None,
        "job_listed": job is not None,
        "node_gpus_allocated": allocated,
        "jobs_on_node": sorted(j.job_id for j in scheduler.jobs if node in j.nodes),
        "after_the_end": scheduler.at >= ended,
    }
