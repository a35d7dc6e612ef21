"""JSON forms of domain types, written by the agent's /v1/snapshot, the CLI's --json output
and the controller's API. Keys are stable: other tools depend on them. The snapshot is read
back by observer/fleet/wire.py, apart, so that an agent does not load its decoder. A run's
attempts are read back too (`attempt_from_json`): the store keeps them in this form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any

from observer.domain import (
    Attempt,
    Finding,
    GpmActivity,
    GpmState,
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuSample,
    MigInstance,
    NodeAllocation,
    NodeSnapshot,
    ProbeRun,
)


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def finding_to_json(finding: Finding) -> dict[str, Any]:
    return {
        "detector": finding.detector,
        "kind": finding.kind.value,
        "subject": dict(finding.subject),
        "severity": finding.severity.value,
        "summary": finding.summary,
        "opened_at": _iso(finding.opened_at),
        "closed_at": _iso(finding.closed_at),
        "evidence": dict(finding.evidence),
    }


def snapshot_to_json(snap: NodeSnapshot) -> dict[str, Any]:
    return {
        "node": snap.node,
        "at": _iso(snap.at),
        "driver": {
            "state": snap.driver.state.value,
            "driver_version": snap.driver.driver_version,
            "message": snap.driver.message,
        },
        "gpus": [
            {
                "index": gpu.index,
                "lost": gpu.lost,
                "identity": _fields(gpu.identity) if gpu.identity else None,
                "baseline_memory_bytes": gpu.baseline_memory_bytes,
                "sample": _reading(gpu.sample),
                "counters": _reading(gpu.counters),
                "activity": _activity(gpu.activity),
            }
            for gpu in snap.gpus
        ],
        "processes": [
            {
                "gpu_index": p.gpu_index,
                "gpu_uuid": p.gpu_uuid,
                "pid": p.pid,
                "mig_uuid": p.mig_uuid,
                "used_memory_bytes": p.used_memory_bytes,
                "exists": p.exists,
                "executable": p.executable,
                "uid": p.uid,
                "user": p.user,
                "command": p.command,
                "owner": {
                    "kind": p.owner.kind.value,
                    "id": p.owner.id,
                    "container_id": p.owner.container_id,
                },
                "owner_phase": p.owner_state.phase.value,
                "owner_ended_at": _iso(p.owner_state.ended_at),
                "owner_name": p.owner_state.name,
            }
            for p in snap.processes
        ],
        "findings": [finding_to_json(f) for f in snap.findings],
        "allocation": _allocation_to_json(snap.allocation),
    }


def _allocation_to_json(allocation: NodeAllocation | None) -> dict[str, Any] | None:
    if allocation is None:
        return None
    return {
        "source": allocation.source,
        "up": allocation.up,
        "reason": allocation.reason,
        "read_at": _iso(allocation.read_at),
        "assignments": [
            {
                "gpu_uuid": a.gpu_uuid,
                "owner": {"kind": a.owner.kind.value, "id": a.owner.id},
                "owner_name": a.owner_name,
                "parts": sorted(a.parts),
            }
            for a in allocation.assignments
        ],
        "allocatable": None if allocation.allocatable is None else sorted(allocation.allocatable),
    }


def _reading(reading: GpuSample | GpuCounters | None) -> dict[str, Any] | None:
    if reading is None:
        return None
    data = _fields(reading)
    data["at"] = _iso(reading.at)
    if isinstance(reading, GpuSample) and reading.processes is not None:
        data["processes"] = [_fields(p) for p in reading.processes]
    if isinstance(reading, GpuSample) and reading.mig_instances is not None:
        data["mig_instances"] = [_fields(m) for m in reading.mig_instances]
    data["errors"] = [
        {"call": e.call, "kind": e.kind.value, "message": e.message} for e in reading.errors
    ]
    return data


def _activity(activity: GpmActivity | GpmState | None) -> dict[str, Any] | str | None:
    """GPM's ratios, or why the GPU has none ("not_supported")."""
    if isinstance(activity, GpmState):
        return activity.value
    return None if activity is None else _fields(activity)


def _fields(
    value: GpuIdentity | GpuProcess | MigInstance | GpuSample | GpuCounters | GpmActivity,
) -> dict[str, Any]:
    """A dataclass's fields as they are (dataclasses.asdict deep-copies every value: it was
    four fifths of encoding a snapshot)."""
    return {f.name: getattr(value, f.name) for f in fields(value)}


def run_to_json(run: ProbeRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "probe": run.probe,
        "tenant": run.tenant,
        "queue": run.queue,
        "user": run.user,
        "window": run.window,
        "expectation": run.expectation.value,
        "gpus": run.gpus,
        "nodes": run.nodes,
        "state": run.state.value,
        "job_id": run.job_id,
        "submitted_at": _iso(run.submitted_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "queue_wait_seconds": run.queue_wait_seconds,
        "expected_wait_seconds": run.expected_wait_seconds,
        "run_seconds": run.run_seconds,
        "outcome": run.outcome.value if run.outcome else None,
        "exit_code": run.exit_code,
        "reason": run.reason,
        "message": run.message,
        "pending_reasons": dict(run.pending_reasons),
        "node_names": list(run.node_names),
        "reclaims_run_id": run.reclaims_run_id,
        "attempts": [attempt_to_json(a) for a in run.attempts],
        "eligible_at": _iso(run.eligible_at),
    }


def attempt_to_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "eligible_at": _iso(attempt.eligible_at),
        "started_at": _iso(attempt.started_at),
        "ended_at": _iso(attempt.ended_at),
        "nodes": list(attempt.nodes),
        "state": attempt.state,
        "reason": attempt.reason,
    }


def attempt_from_json(data: Mapping[str, Any]) -> Attempt:
    def instant(key: str) -> datetime | None:
        value = data.get(key)
        return datetime.fromisoformat(value) if isinstance(value, str) else None

    return Attempt(
        eligible_at=instant("eligible_at"),
        started_at=instant("started_at"),
        ended_at=instant("ended_at"),
        nodes=tuple(data["nodes"]),
        state=str(data["state"]),
        reason=data.get("reason"),
    )
