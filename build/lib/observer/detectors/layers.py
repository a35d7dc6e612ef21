"""What each of the three layers shows about a job's resources - the scheduler, the node's
allocation (what the kubelet or slurmd says it gave whom, from the agent) and NVML (the
processes and memory the agent sees) - shared by the detectors that compare the layers
(unreleased, probe_release) and the controller's monitoring-lag feed: the layers' words, a
fresh agent snapshot, a job's processes on a node, memory above the driver's baseline, the
agent's open findings."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from observer.domain import AttributedProcess, GpuReading, JsonValue, NodeSnapshot, OwnerKind

HELD, RELEASED, UNKNOWN = "held", "released", "unknown"


def layers(**seen: str) -> dict[str, JsonValue]:
    """Each layer's word (held / released / unknown), and which agree that the resources are
    held and which disagree."""
    return {
        **seen,
        "agree": [layer for layer, word in seen.items() if word == HELD],
        "disagree": [layer for layer, word in seen.items() if word == RELEASED],
    }


def fresh_snapshot(
    snapshot: NodeSnapshot | None, now: datetime, max_age_seconds: float
) -> NodeSnapshot | None:
    """The agent's snapshot if it still speaks for the node now; a stale one is silence."""
    if snapshot is None or (now - snapshot.at).total_seconds() > max_age_seconds:
        return None
    return snapshot


def allocation_holds(agent: NodeSnapshot | None, owner_ids: Collection[str] | None) -> str:
    """The node allocation layer's word on a job's GPUs (`owner_ids`; None: anyone's): 'held'
    while the kubelet or slurmd still assigns one to it, 'released' when it answered and assigns
    none, 'unknown' when it was not read or assigns GPUs to an owner it cannot name."""
    allocation = agent.allocation if agent is not None else None
    if allocation is None or not allocation.up:
        return UNKNOWN
    if owner_ids is None:
        return HELD if allocation.assignments else RELEASED
    if any(a.owner.id in owner_ids for a in allocation.assignments if a.owner.id):
        return HELD
    return UNKNOWN if any(not a.owner.id for a in allocation.assignments) else RELEASED


def any_node_holds(words: Collection[str]) -> str:
    """One word for a job on several nodes: held on any is held, released only on all."""
    if HELD in words:
        return HELD
    return RELEASED if words and all(w == RELEASED for w in words) else UNKNOWN


def assigned_gpus(agent: NodeSnapshot | None) -> int | None:
    """How many GPUs the node's allocation layer assigns to anyone; None when it was not read."""
    allocation = agent.allocation if agent is not None else None
    if allocation is None or not allocation.up:
        return None
    return len({a.gpu_uuid for a in allocation.assignments})


def memory_above_baseline(gpu: GpuReading) -> int | None:
    """Memory used beyond the driver's learned baseline; None when either is unknown."""
    if gpu.sample is None or gpu.sample.memory_used_bytes is None:
        return None
    if gpu.baseline_memory_bytes is None:
        return None
    return max(0, gpu.sample.memory_used_bytes - gpu.baseline_memory_bytes)


def job_processes(owner_ids: Collection[str], snapshot: NodeSnapshot) -> list[AttributedProcess]:
    """The processes the agent attributes to one of a job's owners."""
    return [
        p
        for p in snapshot.processes
        if p.owner.kind is not OwnerKind.NONE and p.owner.id in owner_ids
    ]


def open_node_findings(
    snapshot: NodeSnapshot | None, gpu_uuids: Sequence[str] = ()
) -> list[dict[str, JsonValue]]:
    """The agent's open node-local findings, on these GPUs only when they are given."""
    if snapshot is None:
        return []
    return [
        {"detector": f.detector, **f.subject}
        for f in snapshot.findings
        if f.is_open and (not gpu_uuids or f.subject.get("gpu_uuid") in gpu_uuids)
    ]
