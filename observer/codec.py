"""JSON forms of domain types, shared by the agent's /v1/snapshot, the CLI's --json output
and the controller that reads them back. Keys are stable: other tools depend on them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    Finding,
    FindingKind,
    GpuAssignment,
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuReading,
    GpuSample,
    NodeAllocation,
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


def snapshot_from_bytes(body: bytes) -> NodeSnapshot:
    """An agent's /v1/snapshot body read back (the controller's side of the agent API). The
    agent is not trusted to send what the API promises: anything else is a SnapshotError
    naming what was wrong, never another exception."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"snapshot is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or a number too long to convert
        raise SnapshotError(f"snapshot is not JSON ({exc})") from exc
    except RecursionError as exc:
        raise SnapshotError("snapshot is not JSON (nested too deeply)") from exc
    return snapshot_from_json(data)


def snapshot_from_json(data: object) -> NodeSnapshot:
    """A snapshot decoded from JSON; a field missing or of the wrong type is a SnapshotError
    naming its path (`snapshot field gpus[0].index: expected int, got str`)."""
    snap = _Fields(data, "")
    return NodeSnapshot(
        node=snap.string("node"),
        at=snap.time("at"),
        driver=_driver(snap.child("driver")),
        gpus=tuple(_gpu(g) for g in snap.children("gpus")),
        processes=tuple(_process(p) for p in snap.children("processes")),
        findings=tuple(_finding(f) for f in snap.children("findings")),
        allocation=_allocation(snap.optional_child("allocation")),
    )


class _Fields:
    """One JSON object of a snapshot, read field by field by the type the field must have;
    `path` is where the object lies in the snapshot (`gpus[0].sample`)."""

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, dict):
            raise _wrong(path, "object", data)
        self._data: dict[str, object] = data
        self._path = path

    def _at(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def _value(self, name: str, kind: type, required: bool) -> Any:
        """The field's value, checked to be a `kind`; None when it may be absent and is
        absent or null."""
        value = self._data.get(name)
        # json.loads makes exactly these types: compared exactly, true is not an int.
        if type(value) is kind or (value is None and not required):
            return value
        if name not in self._data:
            raise SnapshotError(f"snapshot field {self._at(name)}: missing")
        raise _wrong(self._at(name), _JSON_KINDS[kind], value)

    def integer(self, name: str) -> int:
        value: int = self._value(name, int, required=True)
        return value

    def optional_integer(self, name: str) -> int | None:
        value: int | None = self._value(name, int, required=False)
        return value

    def optional_boolean(self, name: str) -> bool | None:
        value: bool | None = self._value(name, bool, required=False)
        return value

    def boolean(self, name: str) -> bool:
        value: bool = self._value(name, bool, required=True)
        return value

    def string(self, name: str) -> str:
        value: str = self._value(name, str, required=True)
        return value

    def optional_string(self, name: str) -> str | None:
        value: str | None = self._value(name, str, required=False)
        return value

    def time(self, name: str) -> datetime:
        return self._parse_time(name, self.string(name))

    def optional_time(self, name: str) -> datetime | None:
        text = self.optional_string(name)
        return None if text is None else self._parse_time(name, text)

    def _parse_time(self, name: str, text: str) -> datetime:
        try:
            return datetime.fromisoformat(text)
        except ValueError as exc:
            raise SnapshotError(f"snapshot field {self._at(name)}: not an ISO time") from exc

    def enum(self, name: str, kind: type[_E]) -> _E:
        text = self.string(name)
        try:
            return kind(text)
        except ValueError as exc:
            allowed = ", ".join(member.value for member in kind)
            raise SnapshotError(
                f"snapshot field {self._at(name)}: {text!r} is not one of {allowed}"
            ) from exc

    def child(self, name: str) -> _Fields:
        return _Fields(self._value(name, dict, required=True), self._at(name))

    def optional_child(self, name: str) -> _Fields | None:
        value = self._value(name, dict, required=False)
        return None if value is None else _Fields(value, self._at(name))

    def children(self, name: str) -> list[_Fields]:
        return self._items(name, self._value(name, list, required=True))

    def optional_children(self, name: str) -> list[_Fields] | None:
        items = self._value(name, list, required=False)
        return None if items is None else self._items(name, items)

    def _items(self, name: str, items: list[object]) -> list[_Fields]:
        return [_Fields(item, f"{self._at(name)}[{i}]") for i, item in enumerate(items)]

    def optional_string_list(self, name: str) -> list[str] | None:
        items: list[object] | None = self._value(name, list, required=False)
        if items is None:
            return None
        for i, item in enumerate(items):
            if type(item) is not str:
                raise _wrong(f"{self._at(name)}[{i}]", "string", item)
        return [str(item) for item in items]

    def strings(self, name: str) -> dict[str, str]:
        """An object of strings (a finding's subject)."""
        found = self.child(name)
        return {key: found.string(key) for key in found._data}

    def values(self, name: str) -> dict[str, Any]:
        """An object of any JSON values (a finding's evidence); absent: empty."""
        found = self.optional_child(name)
        return {} if found is None else dict(found._data)


_E = TypeVar("_E", bound=StrEnum)
_JSON_KINDS = {
    dict: "object",
    list: "array",
    str: "string",
    int: "int",
    float: "number",
    bool: "bool",
}


def _wrong(path: str, expected: str, value: object) -> SnapshotError:
    where = f"snapshot field {path}" if path else "snapshot"
    got = "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)
    return SnapshotError(f"{where}: expected {expected}, got {got}")


def _driver(driver: _Fields) -> DriverStatus:
    return DriverStatus(
        driver.enum("state", DriverState),
        driver.optional_string("driver_version"),
        driver.optional_string("message") or "",
    )


def _gpu(gpu: _Fields) -> GpuReading:
    identity = gpu.optional_child("identity")
    return GpuReading(
        index=gpu.integer("index"),
        identity=GpuIdentity(
            identity.integer("index"),
            identity.string("uuid"),
            identity.string("name"),
            identity.optional_integer("memory_total_bytes"),
            identity.optional_string("pci_bus_id"),
        )
        if identity is not None
        else None,
        sample=_sample(gpu.optional_child("sample")),
        counters=_counters(gpu.optional_child("counters")),
        baseline_memory_bytes=gpu.optional_integer("baseline_memory_bytes"),
    )


def _process(process: _Fields) -> AttributedProcess:
    owner = process.child("owner")
    return AttributedProcess(
        gpu_index=process.integer("gpu_index"),
        gpu_uuid=process.string("gpu_uuid"),
        pid=process.integer("pid"),
        used_memory_bytes=process.optional_integer("used_memory_bytes"),
        exists=process.boolean("exists"),
        command=process.optional_string("command"),
        owner=Owner(
            owner.enum("kind", OwnerKind), owner.string("id"), owner.string("container_id")
        ),
        owner_state=OwnerState(
            process.enum("owner_phase", OwnerPhase),
            process.optional_time("owner_ended_at"),
            process.optional_string("owner_name"),
        ),
        executable=process.optional_string("executable"),
        uid=process.optional_integer("uid"),
        user=process.optional_string("user"),
    )


def _allocation(allocation: _Fields | None) -> NodeAllocation | None:
    if allocation is None:
        return None
    allocatable = allocation.optional_string_list("allocatable")
    return NodeAllocation(
        source=allocation.string("source"),
        up=allocation.boolean("up"),
        reason=allocation.optional_string("reason"),
        read_at=allocation.optional_time("read_at"),
        assignments=tuple(
            GpuAssignment(
                a.string("gpu_uuid"),
                Owner(a.child("owner").enum("kind", OwnerKind), a.child("owner").string("id")),
                a.optional_string("owner_name"),
            )
            for a in allocation.children("assignments")
        ),
        allocatable=None if allocatable is None else frozenset(allocatable),
    )


def _finding(finding: _Fields) -> Finding:
    return Finding(
        detector=finding.string("detector"),
        kind=finding.enum("kind", FindingKind),
        subject=finding.strings("subject"),
        severity=finding.enum("severity", Severity),
        summary=finding.string("summary"),
        opened_at=finding.time("opened_at"),
        closed_at=finding.optional_time("closed_at"),
        evidence=finding.values("evidence"),
    )


def _errors(reading: _Fields) -> tuple[ReadError, ...]:
    return tuple(
        ReadError(e.string("call"), e.enum("kind", ReadErrorKind), e.string("message"))
        for e in reading.children("errors")
    )


# The optional figures of a sample or counters, by the type their dataclass field declares
# (listed once: a field of another type fails at import); the other fields are read apart.
_FIGURES = {"int | None": _Fields.optional_integer, "bool | None": _Fields.optional_boolean}
_NOT_FIGURES = {"at", "index", "processes", "errors"}


def _figure_readers(
    kind: type[GpuSample] | type[GpuCounters],
) -> list[tuple[str, Callable[[_Fields, str], object]]]:
    return [(f.name, _FIGURES[str(f.type)]) for f in fields(kind) if f.name not in _NOT_FIGURES]


_SAMPLE_FIGURES = _figure_readers(GpuSample)
_COUNTERS_FIGURES = _figure_readers(GpuCounters)


def _figures(
    reading: _Fields, readers: list[tuple[str, Callable[[_Fields, str], object]]]
) -> dict[str, Any]:
    return {name: read(reading, name) for name, read in readers}


def _sample(sample: _Fields | None) -> GpuSample | None:
    if sample is None:
        return None
    processes = sample.optional_children("processes")
    return GpuSample(
        at=sample.time("at"),
        index=sample.integer("index"),
        processes=None
        if processes is None
        else tuple(
            GpuProcess(p.integer("pid"), p.optional_integer("used_memory_bytes")) for p in processes
        ),
        errors=_errors(sample),
        **_figures(sample, _SAMPLE_FIGURES),
    )


def _counters(counters: _Fields | None) -> GpuCounters | None:
    if counters is None:
        return None
    return GpuCounters(
        at=counters.time("at"),
        index=counters.integer("index"),
        errors=_errors(counters),
        **_figures(counters, _COUNTERS_FIGURES),
    )
