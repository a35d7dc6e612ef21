"""An agent's /v1/snapshot read back: the controller's side of the agent API, whose keys
observer/codec.py writes. msgspec decodes and checks it in one pass against the wire types."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import msgspec

from observer.domain import (
    AttributedProcess,
    DriverStatus,
    Finding,
    GpuReading,
    NodeAllocation,
    NodeSnapshot,
    Owner,
    OwnerPhase,
    OwnerState,
)
from observer.errors import SnapshotError


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
    mig_uuid: str | None = None

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
            mig_uuid=self.mig_uuid,
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
