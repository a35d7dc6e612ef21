"""Unreleased resources as the scheduler counts them, compared with what the node agents see.

Rules (conditions):
- allocated_without_job: the scheduler counts more GPUs allocated on a node than the jobs it
  shows there hold (leaked allocations, quota never given back);
- stuck_terminating: a job the platform is ending (a pod Terminating, a Slurm job COMPLETING)
  still holds its GPUs beyond the grace period. Its GPUs are explained by the job, so they
  are not allocated_without_job too: one problem, one finding;
- kill_task_failed: a node drained because the platform could not kill a job's processes.
Each finding compares the three layers (`layers`): the scheduler, the node's allocation (the
kubelet's or slurmd's assignments, through the agent) and NVML (the agent's processes and
memory): which see the GPUs held, which see them released, and which could not look (no fresh
agent snapshot, no allocation read, owners it cannot match: 'unknown', never 'released'). A
job's processes are those whose owner is one the scheduler names for the job
(`JobStatus.owner_ids`: Slurm's job id, the UIDs of a Kubernetes Job's pods)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from observer.detectors.layers import (
    HELD,
    RELEASED,
    UNKNOWN,
    allocation_holds,
    any_node_holds,
    assigned_gpus,
    fresh_snapshot,
    job_processes,
    layers,
    memory_above_baseline,
    open_node_findings,
)
from observer.domain import (
    JobStatus,
    NodeSnapshot,
    OwnerKind,
    SchedulerSnapshot,
    Severity,
    Symptom,
)

KILL_TASK_FAILED = "Kill task failed"
ALLOCATED_WITHOUT_JOB = "allocated_without_job"
STUCK_TERMINATING = "stuck_terminating"
KILL_TASK_FAILED_DETECTOR = "kill_task_failed"
DETECTORS = frozenset({ALLOCATED_WITHOUT_JOB, STUCK_TERMINATING, KILL_TASK_FAILED_DETECTOR})


def evaluate(
    snapshot: SchedulerSnapshot,
    nodes: Mapping[str, NodeSnapshot],
    now: datetime,
    *,
    grace_seconds: float,
    stuck_grace_seconds: float,
    snapshot_max_age_seconds: float,
    memory_tolerance_bytes: int,
) -> list[Symptom]:
    def fresh(name: str) -> NodeSnapshot | None:
        return fresh_snapshot(nodes.get(name), now, snapshot_max_age_seconds)

    held: dict[str, float] = {}
    symptoms = []
    for job in snapshot.jobs:
        if job.nodes and (not job.phase.finished or job.ending_since is not None):
            for name in job.nodes:
                held[name] = held.get(name, 0.0) + job.gpus / len(job.nodes)
        if job.ending_since is not None:
            agents = [(name, fresh(name)) for name in job.nodes]
            symptoms.append(_stuck(job, job.ending_since, agents, stuck_grace_seconds))
    for node in snapshot.nodes:
        agent = fresh(node.name)
        excess = node.gpus_allocated - held.get(node.name, 0.0)
        if excess >= 1:
            seen = _node_sees_excess(agent, held.get(node.name, 0.0), memory_tolerance_bytes)
            symptoms.append(
                Symptom(
                    detector=ALLOCATED_WITHOUT_JOB,
                    subject={"node": node.name},
                    severity=Severity.CRITICAL,
                    summary=f"{node.name}: the scheduler counts {node.gpus_allocated} GPUs "
                    f"allocated but its jobs hold {held.get(node.name, 0.0):g}",
                    rule="GPUs allocated on the node exceed those of the jobs the scheduler "
                    f"shows there (running or ending), for {grace_seconds:g} s",
                    evidence={
                        "gpus_total": node.gpus_total,
                        "gpus_allocated": node.gpus_allocated,
                        "gpus_of_jobs": held.get(node.name, 0.0),
                        "excess_gpus": excess,
                        "node_state": node.state,
                        "layers": layers(
                            scheduler=HELD,
                            allocation=_allocation_sees_excess(agent, held.get(node.name, 0.0)),
                            nvml=seen,
                        ),
                        "node_findings": open_node_findings(agent),
                    },
                    hold_seconds=grace_seconds,
                )
            )
        if node.reason and KILL_TASK_FAILED.lower() in node.reason.lower():
            symptoms.append(
                Symptom(
                    detector=KILL_TASK_FAILED_DETECTOR,
                    subject={"node": node.name},
                    severity=Severity.CRITICAL,
                    summary=f"{node.name} is {node.state}: {node.reason}",
                    rule="the node was taken out of service because a job's processes could "
                    "not be killed",
                    evidence={
                        "node_state": node.state,
                        "reason": node.reason,
                        "layers": layers(
                            scheduler=HELD,
                            allocation=allocation_holds(agent, None),
                            nvml=_node_sees_any(agent),
                        ),
                        "node_findings": open_node_findings(agent),
                    },
                )
            )
    return symptoms


def _stuck(
    job: JobStatus,
    ending_since: datetime,
    agents: Sequence[tuple[str, NodeSnapshot | None]],
    grace_seconds: float,
) -> Symptom:
    where = ",".join(job.nodes)
    return Symptom(
        detector=STUCK_TERMINATING,
        subject={"job_id": job.job_id, "tenant": job.tenant, "node": where},
        severity=Severity.CRITICAL,
        # Times are in the evidence: a summary is read beside local-time columns.
        summary=f"{job.job_id} of {job.tenant} still holds {job.gpus} GPUs on {where} "
        f"{grace_seconds:g} s after the platform began ending it",
        rule="a job the platform is ending (pod Terminating, Slurm job COMPLETING) still "
        f"holds its GPUs {grace_seconds:g} s after it began ending",
        evidence={
            "job_id": job.job_id,
            "run_id": job.run_id,
            "tenant": job.tenant,
            "gpus": job.gpus,
            "nodes": list(job.nodes),
            "phase": job.phase.value,
            "reason": job.reason,
            "message": job.message,
            "ending_since": ending_since.isoformat(),
            "grace_seconds": grace_seconds,
            "layers": layers(
                scheduler=HELD,
                allocation=any_node_holds(
                    [allocation_holds(agent, job.owner_ids) for _, agent in agents]
                ),
                nvml=_nodes_see_job(job.owner_ids, agents),
            ),
            "node_findings": [f for _, agent in agents for f in open_node_findings(agent)],
        },
        hold_seconds=grace_seconds,
        since=ending_since,
    )


def _node_sees_excess(agent: NodeSnapshot | None, explained: float, tolerance: int) -> str:
    """'held' when the agent sees more GPUs in use than the node's jobs explain."""
    if agent is None or not agent.gpus:
        return UNKNOWN
    busy = unknown = 0
    for gpu in agent.gpus:
        above = memory_above_baseline(gpu)
        if any(p.gpu_index == gpu.index for p in agent.processes) or (above or 0) > tolerance:
            busy += 1
        elif above is None:
            unknown += 1
    if busy > explained:
        return HELD
    return UNKNOWN if unknown else RELEASED


def _allocation_sees_excess(agent: NodeSnapshot | None, explained: float) -> str:
    """'held' when the kubelet or slurmd assigns more GPUs than the node's jobs explain."""
    assigned = assigned_gpus(agent)
    if assigned is None:
        return UNKNOWN
    return HELD if assigned > explained else RELEASED


def _node_sees_any(agent: NodeSnapshot | None) -> str:
    if agent is None or not agent.gpus:
        return UNKNOWN
    return HELD if agent.processes else RELEASED


def _nodes_see_job(
    owner_ids: Collection[str], agents: Sequence[tuple[str, NodeSnapshot | None]]
) -> str:
    """'held' when an agent shows the job's processes; 'released' only when the scheduler
    named the job's owners and every node's agent answered and shows none of theirs, nor any
    process whose owner it cannot name."""
    if not owner_ids:
        return UNKNOWN
    words = set()
    for _, agent in agents:
        if agent is None:
            words.add(UNKNOWN)
        elif job_processes(owner_ids, agent):
            return HELD
        elif any(p.owner.kind is OwnerKind.NONE for p in agent.processes):
            words.add(UNKNOWN)
        else:
            words.add(RELEASED)
    return UNKNOWN if UNKNOWN in words or not words else RELEASED
