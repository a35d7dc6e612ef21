"""JSON forms of domain types, shared by the agent's /v1/snapshot, the CLI's --json output
and the controller that reads them back. Keys are stable: other tools depend on them."""

from __future__ import annotations

from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    Finding,
    FindingKind,
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuReading,
    GpuSample,
    NodeSnapshot,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
    ProbeRun,
    ReadError,
    ReadErrorKind,
    Severity,
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


def finding_from_json(data: dict[str, Any]) -> Finding:
    closed = data.get("closed_at")
    return Finding(
        detector=data["detector"],
        kind=FindingKind(data["kind"]),
        subject=dict(data["subject"]),
        severity=Severity(data["severity"]),
        summary=data["summary"],
        opened_at=datetime.fromisoformat(data["opened_at"]),
        closed_at=datetime.fromisoformat(closed) if closed else None,
        evidence=dict(data.get("evidence", {})),
    )


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
                "identity": asdict(gpu.identity) if gpu.identity else None,
                "baseline_memory_bytes": gpu.baseline_memory_bytes,
                "sample": _reading(gpu.sample),
                "counters": _reading(gpu.counters),
            }
            for gpu in snap.gpus
        ],
        "processes": [
            {
                "gpu_index": p.gpu_index,
                "gpu_uuid": p.gpu_uuid,
                "pid": p.pid,
                "used_memory_bytes": p.used_memory_bytes,
                "exists": p.exists,
                "command": p.command,
                "owner": {
                    "kind": p.owner.kind.value,
                    "id": p.owner.id,
                    "container_id": p.owner.container_id,
                },
                "owner_phase": p.owner_state.phase.value,
                "owner_ended_at": _iso(p.owner_state.ended_at),
            }
            for p in snap.processes
        ],
        "findings": [finding_to_json(f) for f in snap.findings],
    }


def _reading(reading: Any) -> dict[str, Any] | None:
    if reading is None:
        return None
    data: dict[str, Any] = asdict(reading)
    data["at"] = _iso(reading.at)
    data["errors"] = [
        {"call": e.call, "kind": e.kind.value, "message": e.message} for e in reading.errors
    ]
    return data


def run_to_json(run: ProbeRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "probe": run.probe,
        "tenant": run.tenant,
        "queue": run.queue,
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
        "run_seconds": run.run_seconds,
        "outcome": run.outcome.value if run.outcome else None,
        "exit_code": run.exit_code,
        "reason": run.reason,
        "message": run.message,
        "pending_reasons": dict(run.pending_reasons),
        "node_names": list(run.node_names),
    }


def snapshot_from_json(data: dict[str, Any]) -> NodeSnapshot:
    """An agent's /v1/snapshot read back (the controller's side of the agent API)."""
    driver = data["driver"]
    return NodeSnapshot(
        node=data["node"],
        at=datetime.fromisoformat(data["at"]),
        driver=DriverStatus(
            DriverState(driver["state"]), driver.get("driver_version"), driver.get("message", "")
        ),
        gpus=tuple(
            GpuReading(
                index=g["index"],
                identity=GpuIdentity(**g["identity"]) if g.get("identity") else None,
                sample=_sample(g.get("sample")),
                counters=_counters(g.get("counters")),
                baseline_memory_bytes=g.get("baseline_memory_bytes"),
            )
            for g in data["gpus"]
        ),
        processes=tuple(
            AttributedProcess(
                gpu_index=p["gpu_index"],
                gpu_uuid=p["gpu_uuid"],
                pid=p["pid"],
                used_memory_bytes=p["used_memory_bytes"],
                exists=p["exists"],
                command=p["command"],
                owner=Owner(
                    OwnerKind(p["owner"]["kind"]), p["owner"]["id"], p["owner"]["container_id"]
                ),
                owner_state=OwnerState(
                    OwnerPhase(p["owner_phase"]),
                    datetime.fromisoformat(p["owner_ended_at"]) if p["owner_ended_at"] else None,
                ),
            )
            for p in data["processes"]
        ),
        findings=tuple(finding_from_json(f) for f in data["findings"]),
    )


def _errors(data: dict[str, Any]) -> tuple[ReadError, ...]:
    return tuple(
        ReadError(e["call"], ReadErrorKind(e["kind"]), e["message"]) for e in data["errors"]
    )


def _sample(data: dict[str, Any] | None) -> GpuSample | None:
    if data is None:
        return None
    values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(GpuSample)}
    values["at"] = datetime.fromisoformat(data["at"])
    values["errors"] = _errors(data)
    if data.get("processes") is not None:
        values["processes"] = tuple(
            GpuProcess(p["pid"], p["used_memory_bytes"]) for p in data["processes"]
        )
    return GpuSample(**values)


def _counters(data: dict[str, Any] | None) -> GpuCounters | None:
    if data is None:
        return None
    values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(GpuCounters)}
    values["at"] = datetime.fromisoformat(data["at"])
    values["errors"] = _errors(data)
    return GpuCounters(**values)
