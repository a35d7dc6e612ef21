"""Xid errors from the kernel log: the driver writes every Xid as a line
`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., GPU has fallen off the bus.`, also when
NVML's event API is not supported or the agent was not running.

`KernelLog` reads /dev/kmsg records (`<prio>,<seq>,<usec since boot>,<flags>;<message>`)
from where its last reading stopped: the boot id and the sequence number of the last record
are kept in a small state file, replaced atomically after each reading that moved, so a
restarted agent reports each line once and none written while it was down is missed (unless
the kernel's ring buffer overwrote it first, which is logged)."""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

from observer.domain import XidEvent, XidSource
from observer.errors import GpuError
from observer.logging_setup import get_logger

_log = get_logger("observer.gpu.kernel_log")

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
    r"(?:\.[0-9a-fA-F])?\): (?P<code>\d+)(?:, (?P<detail>.*))?$"
)
_PID = re.compile(r"\bpid=(?:(?P<pid>\d+)|'?<unknown>'?)")
_NAME = re.compile(r"\bname=(?P<name>[^,]*)")
_RECORD = re.compile(r"^(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),[^;]*;(?P<message>.*)$")
_READ_BYTES = 65536


@cache  # a node has a handful of addresses, asked for on every tick
def pci_key(bus_id: str) -> str:
    """One spelling of a PCI address for NVML's `00000000:3B:00.0` and the kernel's
    `0000:3b:00` (domain, bus, device; the function is not in the kernel's line)."""
    parts = bus_id.split(":")
    if len(parts) < 3:
        return bus_id.lower()
    domain, bus, device = parts[-3], parts[-2], parts[-1].split(".")[0]
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}"


def parse_xid(message: str, at: datetime) -> XidEvent | None:
    """The Xid a kernel message reports, or None when it is not an Xid line."""
    match = _XID.search(message.rstrip())
    if match is None:
        return None
    detail = match["detail"] or ""
    pid = _PID.search(detail)
    name = _NAME.search(detail)
    process_name = name["name"].strip() if name else None
    return XidEvent(
        at=at,
        code=int(match["code"]),
        source=XidSource.KERNEL_LOG,
        pci_bus_id=match["bus"],
        pid=int(pid["pid"]) if pid and pid["pid"] else None,
        process_name=None if process_name in (None, "", "<unknown>") else process_name,
        detail=detail,
    )


@dataclass(frozen=True, slots=True)
class Position:
    boot_id: str
    seq: int


class KernelLog:
    """Reads new Xid lines of one boot's kernel log; one thread owns it. `boot_time`: the wall
    time the record timestamps count from."""

    def __init__(self, path: Path, state_file: Path, boot_id: str, boot_time: datetime) -> None:
        self._path = path
        self._state_file = state_file
        self._boot_id = boot_id
        self._boot_time = boot_time
        self._fd: int | None = None
        self._partial = b""
        saved = _load_position(state_file)
        # Another boot's sequence numbers mean nothing now: this boot is read from its start.
        self._seq = saved.seq if saved is not None and saved.boot_id == boot_id else -1

    def read(self) -> list[XidEvent]:
        """Every Xid line written since the last reading. Raises GpuError when the log
        cannot be opened or read (the next call tries again)."""
        if self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                raise GpuError(f"kernel log {self._path} cannot be opened: {exc}") from exc
        events: list[XidEvent] = []
        start = self._seq
        try:
            while (chunk := self._chunk()) is not None:
                lines = (self._partial + chunk).split(b"\n")
                self._partial = lines.pop()
                for line in lines:
                    event = self._record(line.decode("utf-8", "replace"))
                    if event is not None:
                        events.append(event)
        except GpuError as exc:
            if not events:
                raise
            _log.warning("kernel log reading stopped short", error=str(exc))
        finally:
            # What was read is reported even when the reading then failed: keep its place.
            if self._seq != start:
                _save_position(self._state_file, Position(self._boot_id, self._seq))
        return events

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _chunk(self) -> bytes | None:
        """The next bytes, or None when there are none yet. /dev/kmsg answers one record
        per read; a plain file (a copy of it) answers what it holds."""
        assert self._fd is not None
        while True:
            try:
                chunk = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return None
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # the ring buffer overwrote records not yet read
                    _log.warning("kernel log records were overwritten before they were read")
                    continue
                self.close()
                self._partial = b""
                raise GpuError(f"kernel log {self._path} cannot be read: {exc}") from exc
            return chunk or None

    def _record(self, line: str) -> XidEvent | None:
        match = _RECORD.match(line)
        if match is None:  # a continuation line (" SUBSYSTEM=pci") or not a record
            return None
        seq = int(match["seq"])
        if seq <= self._seq:
            return None
        if self._seq >= 0 and seq > self._seq + 1:
            _log.warning("kernel log records missed", after_seq=self._seq, next_seq=seq)
        self._seq = seq
        at = self._boot_time + timedelta(microseconds=int(match["usec"]))
        return parse_xid(match["message"], at)


def _load_position(path: Path) -> Position | None:
    try:
        data = json.loads(path.read_text())
        return Position(str(data["boot_id"]), int(data["seq"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log.warning(
            "kernel log position unreadable, reading this boot from its start",
            path=str(path),
            error=str(exc),
        )
        return None


def _save_position(path: Path, position: Position) -> None:
    # A position that cannot be saved is kept in memory: only a restart would repeat lines.
    staged = path.with_name(path.name + ".new")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staged.write_text(json.dumps({"boot_id": position.boot_id, "seq": position.seq}))
        staged.replace(path)
    except OSError as exc:
        _log.warning("kernel log position not saved", path=str(path), error=str(exc))
