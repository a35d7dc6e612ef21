"""Xid errors on the agent: the event thread that waits for them, and the findings they make.

`XidWatch` runs on its own thread: it registers every GPU for NVML's Xid events (a GPU that
answers NOT_SUPPORTED is not asked again), waits for one with a short timeout so that it
notices the stop event, and between waits reads the kernel log's new `NVRM: Xid` lines. It
hands each Xid, a frozen value, to the sampling thread through a queue, and publishes after
each round why each source misses Xids (`XidSourcesState`, a frozen value replaced whole: the
event set not open, a GPU not registered or NOT_SUPPORTED, a failed wait; the kernel log not
read or in no format its reader knows), from which the tick keeps the
`xid_source_unavailable` condition: the threads share nothing else.

`XidFindings`, on the sampling thread, makes each Xid one `gpu_xid` event finding with the
GPU, the code's meaning and class from `observer/gpu/xid.py`, the owners of the work on the
GPU when it was last seen (`gpu_owners` by name, `gpu_owner_ids` by the ids the scheduler
gives its jobs), and the process and its owner where the Xid names a pid. The NVML event
and the kernel-log line of one Xid (same GPU, same code, within `xid_merge_window_seconds`)
are one finding, completed by the second source.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from prometheus_client import Counter, Gauge

from observer.detectors.gpu_health import GPU_XID
from observer.domain import (
    AttributedProcess,
    Finding,
    FindingKind,
    GpuIdentity,
    GpuReading,
    Owner,
    OwnerState,
    ReadErrorKind,
    Severity,
    XidEvent,
    XidSourcesState,
)
from observer.errors import GpuError
from observer.gpu.backend import XidEventSource
from observer.gpu.kernel_log import UNRECOGNISED_AFTER_LINES, KernelLog, pci_key
from observer.gpu.xid import xid_info
from observer.logging_setup import get_logger

_log = get_logger("observer.agent.xids")

# A source that failed to open, or a GPU whose registration failed for a reason other than
# NOT_SUPPORTED, is tried again after this many waits.
_RETRY_WAITS = 30

OwnerOf = Callable[[int], tuple[Owner, OwnerState] | None]


class XidWatch:
    def __init__(
        self,
        source: XidEventSource | None,
        kernel_log: KernelLog | None,
        wait_seconds: float,
        stop: threading.Event,
        sources_up: Gauge,
    ) -> None:
        """`source`: NVML's events (None: not asked); `kernel_log`: None when not read."""
        self._source = source
        self._kernel_log = kernel_log
        self._wait = wait_seconds
        self._stop = stop
        self._up = sources_up
        self._queue: queue.SimpleQueue[XidEvent] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="xid-watch", daemon=True)
        self._device_count: int | None = None  # None: the source is not open
        self._registered: set[int] = set()
        self._unsupported: dict[int, str] = {}  # by GPU index: NVML's answer
        self._failed: dict[int, str] = {}  # by GPU index: registrations to try again
        self._nvml_down: str | None = None  # the event set did not open, or its wait failed
        self._retry_in = 0
        self._kernel_log_up: bool | None = None  # None: not read yet
        self._kernel_log_down: str | None = "not read"
        self._state: XidSourcesState | None = None  # None: no round yet

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_seconds: float) -> bool:
        self._thread.join(timeout_seconds)
        return not self._thread.is_alive()

    def take(self) -> list[XidEvent]:
        """The Xids reported since the last call (from the sampling thread)."""
        events = []
        while True:
            try:
                events.append(self._queue.get_nowait())
            except queue.Empty:
                return events

    def state(self) -> XidSourcesState | None:
        """What the sources missed as of the last round (None: no round yet)."""
        return self._state

    def step(self) -> None:
        """One round: the kernel log's new lines, then one wait for an NVML event (or the
        stop event, while no GPU is registered)."""
        self._read_kernel_log()
        registered = self._register()
        self._publish()
        if not registered:
            self._stop.wait(self._wait)
            return
        assert self._source is not None
        got = self._source.wait(self._wait)
        if isinstance(got, XidEvent) or got is None:
            self._nvml_down = None
            if got is not None:
                self._queue.put(got)
            self._publish()
            return
        _log.warning("NVML event wait failed", error=got.message, kind=got.kind.value)
        self._nvml_down = f"event wait failed: {got.message}"
        if got.kind in (ReadErrorKind.DRIVER_NOT_LOADED, ReadErrorKind.GPU_LOST):
            self._close_source()  # opened and registered again once the driver is back
        self._publish()
        self._stop.wait(self._wait)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
        self._close_source()
        if self._kernel_log is not None:
            self._kernel_log.close()

    def _publish(self) -> None:
        # One frozen value, replaced whole: the sampling thread reads it without a lock.
        self._state = XidSourcesState(self._nvml_missing(), self._kernel_log_down)

    def _nvml_missing(self) -> str | None:
        if self._source is None:
            return "not asked"
        if self._nvml_down is not None:
            return self._nvml_down
        if self._device_count is None:
            return "event set not open"
        missing = {**self._unsupported, **self._failed}
        if not missing:
            return None
        return "; ".join(f"GPU {index}: {why}" for index, why in sorted(missing.items()))

    def _read_kernel_log(self) -> None:
        if self._kernel_log is None:
            return
        try:
            events = self._kernel_log.read()
        except GpuError as exc:
            if self._kernel_log_up is not False:  # said once, not every wait
                _log.warning("kernel log not read", error=str(exc))
            self._kernel_log_up = False
            self._kernel_log_down = str(exc)
            self._up.labels("kernel_log").set(0)
            return
        self._kernel_log_up = True
        self._kernel_log_down = (
            f"unrecognised format: none of its first {UNRECOGNISED_AFTER_LINES} lines is a "
            "/dev/kmsg record, a dmesg or syslog line or a journalctl JSON entry"
            if self._kernel_log.unrecognised
            else None
        )
        self._up.labels("kernel_log").set(0 if self._kernel_log.unrecognised else 1)
        for event in events:
            self._queue.put(event)

    def _register(self) -> bool:
        """Whether at least one GPU is registered, opening the source and registering the
        GPUs not yet registered (on a retry schedule after a failure)."""
        if self._source is None:
            return False
        if self._retry_in > 0:
            self._retry_in -= 1
            return bool(self._registered)
        if self._device_count is None:
            try:
                self._device_count = self._source.open()
            except GpuError as exc:
                _log.warning("NVML events not available", error=str(exc))
                self._nvml_down = f"events not opened: {exc}"
                self._up.labels("nvml").set(0)
                self._retry_in = _RETRY_WAITS
                return False
            self._nvml_down = None
        self._failed.clear()
        for index in range(self._device_count):
            if index in self._registered or index in self._unsupported:
                continue
            error = self._source.register(index)
            if error is None:
                self._registered.add(index)
            elif error.kind is ReadErrorKind.NOT_SUPPORTED:
                self._unsupported[index] = f"NOT_SUPPORTED ({error.message})"
                _log.info("Xid events not supported", gpu=index, error=error.message)
            else:
                self._failed[index] = f"not registered ({error.message})"
                _log.warning("Xid events not registered", gpu=index, error=error.message)
        if self._failed:
            self._retry_in = _RETRY_WAITS
        self._up.labels("nvml").set(1 if self._registered else 0)
        return bool(self._registered)

    def _close_source(self) -> None:
        if self._source is None or self._device_count is None:
            return
        self._device_count = None
        self._registered.clear()
        self._failed.clear()
        self._up.labels("nvml").set(0)
        try:
            self._source.close()
        except GpuError as exc:
            _log.warning("NVML event set not freed", error=str(exc))


@dataclass(frozen=True, slots=True)
class _Holders:
    """The owners of a GPU's processes when last seen: what people call them, and their ids."""

    names: list[str]
    ids: list[str]


@dataclass(frozen=True, slots=True)
class _Seen:
    pci: str
    code: int
    at: datetime
    finding: Finding


class XidFindings:
    """The Xid findings of the last `retention` (at most `retained_max`, the newest), on the
    sampling thread."""

    def __init__(
        self,
        node: str,
        merge_window_seconds: float,
        retention: timedelta,
        retained_max: int,
        counted: Counter,
    ) -> None:
        self._node = node
        self._retained_max = retained_max
        self._window = timedelta(seconds=merge_window_seconds)
        self._retention = retention
        self._counted = counted
        self._seen: list[_Seen] = []
        self._gpus: dict[str, GpuIdentity] = {}  # by pci_key: every GPU identified so far
        self._owners: dict[str, _Holders] = {}  # by GPU uuid, as its processes last showed

    def findings(self) -> list[Finding]:
        return [s.finding for s in self._seen]

    def take(
        self,
        events: Sequence[XidEvent],
        gpus: Sequence[GpuReading],
        processes: Sequence[AttributedProcess],
        owner_of: OwnerOf,
        now: datetime,
    ) -> list[Finding]:
        """Fold this tick's Xids in; return the findings that are new (counted once)."""
        for gpu in gpus:
            if gpu.identity is None:
                continue
            if gpu.identity.pci_bus_id:
                self._gpus[pci_key(gpu.identity.pci_bus_id)] = gpu.identity
            if gpu.sample is not None and gpu.sample.processes is not None:
                on_it = [p for p in processes if p.gpu_uuid == gpu.identity.uuid]
                self._owners[gpu.identity.uuid] = _Holders(
                    sorted({p.owner_state.name or p.owner.label for p in on_it}),
                    sorted({p.owner.id for p in on_it if p.owner.id}),
                )
        by_index = {g.index: g.identity for g in gpus if g.identity is not None}
        new: list[Finding] = []
        for event in events:
            identity = (by_index.get(event.gpu_index) if event.gpu_index is not None else None) or (
                self._gpus.get(pci_key(event.pci_bus_id)) if event.pci_bus_id else None
            )
            bus = event.pci_bus_id or (identity.pci_bus_id if identity else None)
            pci = pci_key(bus) if bus else "unknown"
            same = next(
                (
                    i
                    for i, s in enumerate(self._seen)
                    if s.pci == pci
                    and s.code == event.code
                    and abs(s.at - event.at) <= self._window
                ),
                None,
            )
            if same is not None:
                seen = self._seen[same]
                merged = _merge(seen.finding, event, identity, self._owners, owner_of)
                self._seen[same] = replace(seen, finding=merged)
                continue
            finding = _finding(self._node, pci, event, identity, self._owners, owner_of)
            self._seen.append(_Seen(pci, event.code, event.at, finding))
            new.append(finding)
            gpu_label = str(identity.index) if identity else ""
            self._counted.labels(
                gpu_label, identity.uuid if identity else "", str(event.code)
            ).inc()
        kept = [s for s in self._seen if now - s.finding.opened_at <= self._retention]
        self._seen = kept[-self._retained_max :]  # an Xid storm costs a bounded list
        return new


def _finding(
    node: str,
    pci: str,
    event: XidEvent,
    identity: GpuIdentity | None,
    owners: Mapping[str, _Holders],
    owner_of: OwnerOf,
) -> Finding:
    info = xid_info(event.code)
    evidence = {
        "xid": event.code,
        "meaning": info.meaning,
        "xid_class": info.xid_class.value,
        "fatal": info.fatal,
        "gpu_index": identity.index if identity else event.gpu_index,
        "gpu_uuid": identity.uuid if identity else None,
        "pci_bus_id": pci,
        **_held(identity, owners),
        "sources": [event.source.value],
        "reported_at": {event.source.value: event.at.isoformat()},
        "catalogue": "https://docs.nvidia.com/deploy/xid-errors/",
    }
    finding = Finding(
        detector=GPU_XID,
        kind=FindingKind.EVENT,
        subject={"node": node, "pci_bus_id": pci, "xid": str(event.code)},
        severity=Severity.CRITICAL if info.fatal else Severity.WARNING,
        summary="",
        opened_at=event.at,
        closed_at=event.at,
        evidence={**evidence, **_process(event, owner_of)},
    )
    return replace(finding, summary=_summary(node, finding))


def _merge(
    finding: Finding,
    event: XidEvent,
    identity: GpuIdentity | None,
    owners: Mapping[str, _Holders],
    owner_of: OwnerOf,
) -> Finding:
    evidence = dict(finding.evidence)
    evidence["sources"] = sorted({*evidence["sources"], event.source.value})
    evidence["reported_at"] = {**evidence["reported_at"], event.source.value: event.at.isoformat()}
    if evidence.get("gpu_uuid") is None and identity is not None:
        evidence["gpu_uuid"], evidence["gpu_index"] = identity.uuid, identity.index
        evidence.update(_held(identity, owners))
    if evidence.get("pid") is None:
        evidence.update(_process(event, owner_of))
    merged = replace(finding, evidence=evidence)
    return replace(merged, summary=_summary(finding.subject["node"], merged))


def _held(identity: GpuIdentity | None, owners: Mapping[str, _Holders]) -> dict[str, object]:
    """Who held the GPU when its processes were last seen; None: never seen, or not known."""
    held = owners.get(identity.uuid) if identity else None
    return {
        "gpu_owners": held.names if held else None,
        "gpu_owner_ids": held.ids if held else None,
    }


def _process(event: XidEvent, owner_of: OwnerOf) -> dict[str, object]:
    if event.pid is None:
        return {"detail": event.detail} if event.detail else {}
    owned = owner_of(event.pid)
    owner, state = owned if owned is not None else (None, None)
    return {
        "detail": event.detail,
        "pid": event.pid,
        "process_name": event.process_name,
        "owner": owner.label if owner else None,
        "owner_id": owner.id or None if owner else None,
        "owner_name": state.name if state else None,
        "owner_phase": state.phase.value if state else None,
    }


def _summary(node: str, finding: Finding) -> str:
    e = finding.evidence
    gpu = f"GPU {e['gpu_index']}" if e.get("gpu_index") is not None else "a GPU"
    who = ""
    if e.get("pid") is not None:
        who = f", pid {e['pid']}" + (f" ({e['process_name']})" if e.get("process_name") else "")
        owner = e.get("owner_name") or e.get("owner")
        who += f" of {owner}" if owner else ", owner unknown"
    elif e.get("gpu_owners"):
        who = f", running {', '.join(e['gpu_owners'])}"
    fatal = ", fatal" if e["fatal"] else ""
    return (
        f"Xid {e['xid']} on {gpu} ({e['pci_bus_id']}) of {node}: {e['meaning']} "
        f"[{e['xid_class']}{fatal}]{who}"
    )
