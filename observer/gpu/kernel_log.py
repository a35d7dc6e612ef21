"""Xid errors from the kernel log: the driver writes every Xid as a line
`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., name=..., GPU has fallen off the bus.`, also when
NVML's event API is not supported or the agent was not running.

`KernelLog` reads `agent.kernel_log_path` in whichever known format each line is in:
- /dev/kmsg records, `<prio>,<seq>,<usec since boot>,<flags>;<message>` (the ` KEY=value`
  continuation lines skipped), and dmesg's own lines, `[  12.345678] <message>` (seconds
  since boot);
- syslog files (`kern.log`, `/var/log/messages`), the `kernel` tag's lines: the traditional
  `Dec  7 01:30:05 host kernel: ...` (this host's local time, the year not written: the
  latest such date not ahead of now) and the RFC 3339 stamp of rsyslog's default file format
  on newer distributions, `2026-12-07T01:30:05.123456+08:00 host kernel: ...` (and
  journalctl's `short-iso`, `+0800`); the kernel's own `[12345.678901]` uptime before the
  message is dropped;
- journald entries as `journalctl -o json` writes them, one object a line: the `MESSAGE`
  (a string, or an array of bytes where it is not UTF-8) of `_TRANSPORT` `kernel`, at
  `__REALTIME_TIMESTAMP` (microseconds since the epoch).
A log none of whose first `UNRECOGNISED_AFTER_LINES` lines is in a known format is read but
not observed (`unrecognised`): no Xid line of it would ever match.

It reads from where its last reading stopped, kept in a small state file replaced atomically
after each reading that moved, so a restarted agent reports each line once and none written
while it was down is missed: in /dev/kmsg, the boot id and the sequence number of the last
record (unless the kernel's ring buffer overwrote it first, which is logged); in a regular
file, its inode and the offset after the last whole line (a file spans boots). A file
replaced by rotation or truncated is read again from its start."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

from observer.clock import Clock
from observer.domain import XidEvent, XidSource
from observer.errors import GpuError
from observer.logging_setup import get_logger

_log = get_logger("observer.gpu.kernel_log")

# Past this many lines with none in a known format the log is taken for one it cannot read;
# any log of a booted host has written this many lines within minutes.
UNRECOGNISED_AFTER_LINES = 100

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
    r"(?:\.[0-9a-fA-F])?\): (?P<code>\d+)(?:, (?P<detail>.*))?$"
)
_PID = re.compile(r"\bpid=(?:(?P<pid>\d+)|'?<unknown>'?)")
_NAME = re.compile(r"\bname=(?P<name>[^,]*)")
_KMSG = re.compile(r"^(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),[^;]*;(?P<message>.*)$")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SYSLOG = re.compile(
    rf"^(?:(?P<month>{'|'.join(_MONTHS)}) {{1,2}}(?P<day>\d{{1,2}}) "
    r"(?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)"
    r"|(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)))"
    r" \S+ (?P<tag>[^\s:\[]+)(?:\[\d+\])?: ?(?P<message>.*)$"
)
_UPTIME = re.compile(r"^\[ *(?P<seconds>\d+\.\d+)\] ?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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
class LogLine:
    """One line of a kernel log in a known format. `seq`: /dev/kmsg's record number (None in
    the other formats); `kernel`: the kernel wrote it (a syslog file or the journal holds
    every program's lines)."""

    message: str
    at: datetime
    seq: int | None = None
    kernel: bool = True


def parse_line(line: str, boot_time: datetime, now: datetime) -> LogLine | None:
    """The line in the known format it is in, or None (a /dev/kmsg continuation line, or a
    format this reader does not know). `boot_time`: what /dev/kmsg's times count from;
    `now`: the year of a syslog date that does not write it."""
    if line.startswith("{"):
        return _journal_entry(line)
    kmsg = _KMSG.match(line)
    if kmsg is not None:
        since_boot = timedelta(microseconds=int(kmsg["usec"]))
        return LogLine(kmsg["message"], boot_time + since_boot, seq=int(kmsg["seq"]))
    syslog = _SYSLOG.match(line)
    if syslog is None:
        dmesg = _UPTIME.match(line)
        if dmesg is None:
            return None
        since_boot = timedelta(seconds=float(dmesg["seconds"]))
        return LogLine(line[dmesg.end() :], boot_time + since_boot)
    stamp = syslog["stamp"]
    at = datetime.fromisoformat(stamp) if stamp else _local_date(syslog, now)
    if at is None:
        return None
    return LogLine(_UPTIME.sub("", syslog["message"]), at, kernel=syslog["tag"] == "kernel")


def _local_date(match: re.Match[str], now: datetime) -> datetime | None:
    """A syslog date without year or zone: this host's local time, in the latest year that
    does not put it ahead of now (the log of December read in January)."""
    year = now.astimezone().year
    for candidate in (year, year - 1):
        try:
            at = datetime(
                candidate,
                _MONTHS.index(match["month"]) + 1,
                int(match["day"]),
                int(match["hour"]),
                int(match["minute"]),
                int(match["second"]),
            ).astimezone()
        except ValueError:  # 29 February of a year without one
            continue
        if at <= now + timedelta(days=1):
            return at
    return None


def _journal_entry(line: str) -> LogLine | None:
    try:
        entry = json.loads(line)
        stamp = _EPOCH + timedelta(microseconds=int(entry["__REALTIME_TIMESTAMP"]))
        message = entry["MESSAGE"]
        # journalctl writes a field that is not UTF-8 as its bytes, one number each, and one
        # too large to show as null.
        text = bytes(message).decode("utf-8", "replace") if isinstance(message, list) else message
    except (ValueError, TypeError, KeyError):
        return None
    kernel = entry.get("_TRANSPORT") == "kernel"
    return LogLine(text if isinstance(text, str) else "", stamp, kernel=kernel)


@dataclass(frozen=True, slots=True)
class Position:
    boot_id: str
    seq: int  # the last /dev/kmsg record read in that boot; -1: none
    inode: int | None = None  # the regular file read, and the offset after its last whole line
    offset: int = 0


class KernelLog:
    """Reads new Xid lines of the kernel log; one thread owns it. `boot_time`: the wall time
    /dev/kmsg's record timestamps count from."""

    def __init__(
        self, path: Path, state_file: Path, boot_id: str, boot_time: datetime, clock: Clock
    ) -> None:
        self._path = path
        self._state_file = state_file
        self._boot_id = boot_id
        self._boot_time = boot_time
        self._clock = clock
        self._fd: int | None = None
        self._regular = False
        self._partial = b""
        self._lines = 0
        self._recognised = 0
        saved = _load_position(state_file) or Position(boot_id, -1)
        # Another boot's sequence numbers mean nothing now: this boot is read from its start.
        self._seq = saved.seq if saved.boot_id == boot_id else -1
        self._inode, self._offset = saved.inode, saved.offset

    @property
    def unrecognised(self) -> bool:
        """Whether enough lines were read, none of them in a known format."""
        return self._recognised == 0 and self._lines >= UNRECOGNISED_AFTER_LINES

    def read(self) -> list[XidEvent]:
        """Every Xid line written since the last reading. Raises GpuError when the log
        cannot be opened or read (the next call tries again)."""
        if self._fd is None:
            self._open()
        events: list[XidEvent] = []
        start = (self._seq, self._offset)
        try:
            while (chunk := self._chunk()) is not None:
                lines = (self._partial + chunk).split(b"\n")
                self._partial = lines.pop()
                for line in lines:
                    event = self._line(line)
                    if event is not None:
                        events.append(event)
        except GpuError as exc:
            if not events:
                raise
            _log.warning("kernel log reading stopped short", error=str(exc))
        finally:
            # What was read is reported even when the reading then failed: keep its place.
            if (self._seq, self._offset) != start:
                position = Position(self._boot_id, self._seq, self._inode, self._offset)
                _save_position(self._state_file, position)
        return events

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> None:
        try:
            self._fd = os.open(self._path, os.O_RDONLY | os.O_NONBLOCK)
            status = os.fstat(self._fd)
        except OSError as exc:
            self.close()
            raise GpuError(f"kernel log {self._path} cannot be opened: {exc}") from exc
        self._regular = stat.S_ISREG(status.st_mode)
        if not self._regular:  # /dev/kmsg: a new open starts at the oldest record kept
            return
        if status.st_ino == self._inode and self._offset <= status.st_size:
            os.lseek(self._fd, self._offset, os.SEEK_SET)
            return
        if self._inode is not None:
            _log.info("kernel log replaced or truncated: read from its start", path=str(self._path))
        self._inode, self._offset = status.st_ino, 0

    def _replaced(self) -> bool:
        """Whether the path names another file now (rotated) or one shorter than what was
        read of it (truncated)."""
        try:
            status = os.stat(self._path)
        except OSError:  # between a rotation's rename and its new file: looked at again later
            return False
        return status.st_ino != self._inode or status.st_size < self._offset

    def _chunk(self) -> bytes | None:
        """The next bytes, or None when there are none yet. /dev/kmsg answers one record
        per read; a regular file what it holds, then the file that replaced it."""
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
            if chunk or not self._regular or not self._replaced():
                return chunk or None
            self.close()
            self._partial = b""
            self._open()

    def _line(self, raw: bytes) -> XidEvent | None:
        if self._regular:
            self._offset += len(raw) + 1
        text = raw.decode("utf-8", "replace")
        if not text.strip():
            return None
        self._lines += 1
        line = parse_line(text, self._boot_time, self._clock.now())
        if line is None:
            return None
        self._recognised += 1
        if line.seq is not None:
            if line.seq <= self._seq:
                return None
            if self._seq >= 0 and line.seq > self._seq + 1:
                _log.warning("kernel log records missed", after_seq=self._seq, next_seq=line.seq)
            self._seq = line.seq
        return parse_xid(line.message, line.at) if line.kernel else None


def _load_position(path: Path) -> Position | None:
    try:
        data = json.loads(path.read_text())
        inode = data.get("inode")
        return Position(
            str(data["boot_id"]),
            int(data["seq"]),
            int(inode) if inode is not None else None,
            int(data.get("offset", 0)),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        _log.warning(
            "kernel log position unreadable, reading this boot from its start",
            path=str(path),
            error=str(exc),
        )
        return None


def _save_position(path: Path, position: Position) -> None:
    # A position that cannot be saved is kept in memory: only a restart would repeat lines.
    staged = path.with_name(path.name + ".new")
    state = {
        "boot_id": position.boot_id,
        "seq": position.seq,
        "inode": position.inode,
        "offset": position.offset,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staged.write_text(json.dumps(state))
        staged.replace(path)
    except OSError as exc:
        _log.warning("kernel log position not saved", path=str(path), error=str(exc))
