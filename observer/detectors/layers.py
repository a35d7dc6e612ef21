"""What each layer (scheduler, node agent, NVML) shows about a job's resources, shared by
the detectors that compare the layers (unreleased, probe_release) and the controller's
monitoring-lag feed: the layers' words, a fresh agent snapshot, a job's processes on a node,
memory above the driver's baseline, the agent's open findings."""

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
