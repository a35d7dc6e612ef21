"""Unreleased resources as the scheduler counts them, compared with what the node agents see.

Rules (conditions, each opened after the grace period):
- allocated_without_job: the scheduler counts more GPUs allocated on a node than the jobs it
  reports running there hold (pods stuck Terminating, jobs stuck completing, leaked
  allocations);
- kill_task_failed: a node drained because the platform could not kill a job's processes.
Each finding says which layers agree: the scheduler's (always, it raised it) and the node's
(the agent's GPUs busy or held beyond what running jobs explain: the GPUs are really held;
idle: only the accounting leaks; no agent: unknown)."""

from __future__ import annotations

from collections.abc import Mapping

from observer.domain import JobPhase, NodeSnapshot, SchedulerSnapshot, Severity, Symptom

KILL_TASK_FAILED = "Kill task failed"


def evaluate(
    snapshot: SchedulerSnapshot, nodes: Mapping[str, NodeSnapshot], grace_seconds: float
) -> list[Symptom]:
    held: dict[str, float] = {}
    for job in snapshot.jobs:
        if job.phase is JobPhase.RUNNING and job.nodes:
            for name in job.nodes:
                held[name] = held.get(name, 0.0) + job.gpus / len(job.nodes)
    symptoms = []
    for node in snapshot.nodes:
        excess = node.gpus_allocated - held.get(node.name, 0.0)
        layers = {"scheduler": "agrees", "node": _node_layer(nodes.get(node.name))}
        if excess >= 1:
            symptoms.append(
                Symptom(
                    detector="allocated_without_job",
                    subject={"node": node.name},
                    severity=Severity.CRITICAL,
                    summary=f"{node.name}: the scheduler counts {node.gpus_allocated} GPUs "
                    f"allocated but its running jobs hold {held.get(node.name, 0.0):g}",
                    rule="GPUs allocated on the node exceed those of the jobs running there, "
                    f"for {grace_seconds:g} s",
                    evidence={
                        "gpus_total": node.gpus_total,
                        "gpus_allocated": node.gpus_allocated,
                        "gpus_of_running_jobs": held.get(node.name, 0.0),
                        "excess_gpus": excess,
                        "node_state": node.state,
                        "layers": layers,
                    },
                    hold_seconds=grace_seconds,
                )
            )
        if node.reason and KILL_TASK_FAILED.lower() in node.reason.lower():
            symptoms.append(
                Symptom(
                    detector="kill_task_failed",
                    subject={"node": node.name},
                    severity=Severity.CRITICAL,
                    summary=f"{node.name} is {node.state}: {node.reason}",
                    rule="the node was taken out of service because a job's processes could "
                    "not be killed",
                    evidence={"node_state": node.state, "reason": node.reason, "layers": layers},
                )
            )
    return symptoms


def _node_layer(node: NodeSnapshot | None) -> str:
    """What the node's agent says of its GPUs: 'holds' work, 'idle', or 'unknown'."""
    if node is None or not node.gpus:
        return "unknown"
    return "holds" if node.processes else "idle"
