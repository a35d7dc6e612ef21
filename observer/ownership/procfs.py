"""The host's /proc (the agent runs with hostPID) as a ProcessTable."""

from __future__ import annotations

from pathlib import Path

from observer.domain import NO_OWNER, Owner
from observer.ownership.base import ProcessInfo
from observer.ownership.cgroup import owner_from_cgroup, owner_from_environ

_STARTTIME_FIELD = 21  # 0-based index of starttime in /proc/<pid>/stat, after the comm field


class ProcFs:
    def __init__(self, root: Path = Path("/proc")) -> None:
        self._root = root

    def inspect(self, pid: int) -> ProcessInfo | None:
        base = self._root / str(pid)
        try:
            stat = (base / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # gone, or exiting as we read
            return None
        except OSError:
            stat = ""
        return ProcessInfo(
            pid=pid,
            start_ticks=_start_ticks(stat),
            command=_command(base),
            owner=_owner(base),
        )

    def alive(self, info: ProcessInfo) -> bool:
        try:
            stat = (self._root / str(info.pid) / "stat").read_text()
        except OSError:
            return False
        return info.start_ticks is None or _start_ticks(stat) == info.start_ticks


def _start_ticks(stat: str) -> int | None:
    # comm may hold spaces and parentheses: split after its closing parenthesis.
    fields = stat.rpartition(")")[2].split()
    index = _STARTTIME_FIELD - 2
    return int(fields[index]) if len(fields) > index else None


def _command(base: Path) -> str | None:
    try:
        raw = (base / "cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\x00", b" ").decode(errors="replace").strip() or None


def _owner(base: Path) -> Owner:
    try:
        owner = owner_from_cgroup((base / "cgroup").read_text())
    except OSError:
        owner = NO_OWNER
    if owner != NO_OWNER:
        return owner
    try:
        # environ is readable only by the same user or root; without it cgroup must do.
        return owner_from_environ((base / "environ").read_bytes())
    except OSError:
        return NO_OWNER
