"""JSON forms of domain types, shared by the agent's /v1/snapshot, the CLI's --json output
and the controller that reads them back. Keys are stable: other tools depend on them."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from datetime import datetime
from typing import Any

import msgspec

from observer.domain import (
    AttributedProcess,
    DriverStatus,
    Finding,
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuReading,
    GpuSample,
    NodeAllocation,
    NodeSnapshot,
    Owner,
    OwnerPhase,
    OwnerState,
    ProbeRun,
)
from observer.errors import SnapshotError


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
    data["errors"] = [
        {"call": e.call, "kind": e.kind.value, "message": e.message} for e in reading.errors
    ]
    return data


def _fields(value: GpuIdentity | GpuProcess | GpuSample | GpuCounters) -> dict[str, Any]:
    """A dataclass's fields as they are (dataclasses.asdict deep-copies every value: it was
    four fifths of encoding a snapshot)."""
    return {f.name: getattr(value, f.name) for f in fields(value)}


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
        "reclaims_run_id": run.reclaims_run_id,
    }


def snapshot_from_bytes(body: bytes) -> NodeSnapshot:
    """An agent's /v1/snapshot body read back (the controller's side of the agent API),
    decoded and checked in one pass by msgspec against the wire types. The agent is not
    trusted to send what the API promises: anything else is a SnapshotError naming what was
    wrong (`snapshot field gpus[0].index: expected int, got string`), never another
    exception."""
    try:
        wire = _SNAPSHOT_DECODER.decode(body)
    except msgspec.DecodeError as exc:
        raise _explained(body, exc) from exc
    return NodeSnapshot(
        node=wire.node,
        at=wire.at,
        driver=wire.driver,
        gpus=wire.gpus,
        processes=tuple(p.attributed() for p in wire.processes),
        findings=wire.findings,
        allocation=wire.allocation,
    )


class _WireProcess(msgspec.Struct):
    """A process as /v1/snapshot writes it: its owner's state flattened into the process.
    Every other part of the snapshot is written as its domain type, which msgspec decodes
    by the type's own annotations."""

    gpu_index: int
    gpu_uuid: str
    pid: int
    exists: bool
    owner: Owner
    owner_phase: OwnerPhase
    used_memory_bytes: int | None = None
    command: str | None = None
    owner_ended_at: datetime | None = None
    owner_name: str | None = None
    executable: str | None = None
    uid: int | None = None
    user: str | None = None

    def attributed(self) -> AttributedProcess:
        return AttributedProcess(
            gpu_index=self.gpu_index,
            gpu_uuid=self.gpu_uuid,
            pid=self.pid,
            used_memory_bytes=self.used_memory_bytes,
            exists=self.exists,
            command=self.command,
            owner=self.owner,
            owner_state=OwnerState(self.owner_phase, self.owner_ended_at, self.owner_name),
            executable=self.executable,
            uid=self.uid,
            user=self.user,
        )


class _WireSnapshot(msgspec.Struct):
    node: str
    at: datetime
    driver: DriverStatus
    gpus: tuple[GpuReading, ...]
    processes: tuple[_WireProcess, ...]
    findings: tuple[Finding, ...]
    allocation: NodeAllocation | None = None


_SNAPSHOT_DECODER = msgspec.json.Decoder(_WireSnapshot)
# msgspec's words for JSON's kinds, as the errors say them.
_KINDS = {"str": "string", "float": "number"}
_AT = re.compile(r"(?P<problem>.*?)(?: - at `\$(?P<path>.*)`)?", re.DOTALL)


def _explained(body: bytes, exc: msgspec.DecodeError) -> SnapshotError:
    """Why a body is not a snapshot, in the controller's words. Only a failed body comes
    here: the standard library's parser names where a body stops being JSON (line and
    column) and the key of a wrong value inside an object, which msgspec's message leaves
    out."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as bad:
        return SnapshotError(f"snapshot is not UTF-8 ({bad.reason} at byte {bad.start})")
    try:
        data = json.loads(text)
    except ValueError as bad:  # JSONDecodeError, or a number too long to convert
        return SnapshotError(f"snapshot is not JSON ({bad})")
    except RecursionError:
        return SnapshotError("snapshot is not JSON (nested too deeply)")
    if not isinstance(exc, msgspec.ValidationError):
        return SnapshotError(f"snapshot is not JSON ({exc})")
    found = _AT.fullmatch(str(exc))
    assert found is not None  # the pattern's every part is optional
    problem, path = found["problem"], found["path"] or ""
    if missing := re.fullmatch(r"Object missing required field `(.*)`", problem):
        path, problem = f"{path}.{missing[1]}", "missing"
    elif expected := re.fullmatch(r"Expected `(.*?)(?: \| null)?`, got `(.*)`", problem):
        want, got = (_KINDS.get(k, k) for k in expected.groups())
        problem = f"expected {want}, got {got}"
        if path.endswith("[...]"):  # a value inside an object: name its key
            path = path.removesuffix("[...]") + "." + _key_of(data, path, got)
    elif value := re.fullmatch(r"Invalid enum value (.*)", problem):
        problem = f"{value[1]} is not an allowed value"
    elif problem.startswith("Invalid RFC3339"):
        problem = "not an ISO time"
    path = path.removeprefix(".")
    return SnapshotError(f"snapshot field {path}: {problem}" if path else f"snapshot: {problem}")


_JSON_KINDS = {
    dict: "object",
    list: "array",
    str: "string",
    int: "int",
    float: "number",
    bool: "bool",
    type(None): "null",
}


def _key_of(data: Any, path: str, kind: str) -> str:
    """The first key of the object at `path` (msgspec's form) whose value is of `kind`."""
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path.removesuffix("[...]")):
        data = data[name] if name else data[int(index)]
    return next((k for k, v in data.items() if _JSON_KINDS[type(v)] == kind), "[...]")
