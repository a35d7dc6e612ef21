"""The host's /proc (the agent runs with hostPID) as a ProcessTable; user names come from a
passwd file of the host's users when one is given (the agent's own /etc/passwd is its
image's, whose names would be wrong for the host's uids)."""

from __future__ import annotations

from pathlib import Path

from observer.domain import NO_OWNER, Owner
from observer.ownership.base import ProcessInfo
from observer.ownership.cgroup import owner_from_cgroup, owner_from_environ

_STARTTIME_FIELD = 21  # 0-based index of starttime in /proc/<pid>/stat, after the comm field


class ProcFs:
    def __init__(self, root: Path = Path("/proc"), passwd_file: Path | None = None) -> None:
        self._root = root
        self._passwd_file = passwd_file

    def inspect(self, pid: int) -> ProcessInfo | None:
        base = self._root / str(pid)
        try:
            stat = (base / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # gone, or exiting as we read
            return None
        except OSError:
            stat = ""
        try:
            cmdline = (base / "cmdline").read_bytes()
        except OSError:
            cmdline = b""
        uid = _uid(base)
        return ProcessInfo(
            pid=pid,
            start_ticks=_start_ticks(stat),
            command=cmdline.replace(b"\x00", b" ").decode(errors="replace").strip() or None,
            owner=_owner(base),
            executable=_executable(base, cmdline),
            uid=uid,
            user=self._user(uid),
        )

    def alive(self, info: ProcessInfo) -> bool:
        try:
            stat = (self._root / str(info.pid) / "stat").read_text()
        except OSError:
            return False
        return info.start_ticks is None or _start_ticks(stat) == info.start_ticks

    def _user(self, uid: int | None) -> str | None:
        if uid is None or self._passwd_file is None:
            return None
        try:  # read at each new process: users added during a soak are named too
            lines = self._passwd_file.read_text().splitlines()
        except OSError:
            return None
        names = (line.split(":") for line in lines)
        return next((f[0] for f in names if len(f) > 2 and f[2] == str(uid)), None)


def _start_ticks(stat: str) -> int | None:
    # comm may hold spaces and parentheses: split after its closing parenthesis.
    fields = stat.rpartition(")")[2].split()
    index = _STARTTIME_FIELD - 2
    return int(fields[index]) if len(fields) > index else None


def _executable(base: Path, cmdline: bytes) -> str | None:
    # exe names the program itself but takes ptrace rights over the process to read; argv[0]
    # is what it was started as, unless rewritten into a title (setproctitle: spaces, maybe
    # arguments); comm, its first 15 bytes, is always readable.
    try:
        return (base / "exe").readlink().name.removesuffix(" (deleted)")
    except OSError:
        pass
    argv0 = cmdline.split(b"\x00", 1)[0].decode(errors="replace")
    if argv0 and not any(c.isspace() for c in argv0):
        return argv0.rpartition("/")[2]
    try:
        return (base / "comm").read_text().strip() or None
    except OSError:
        return None


def _uid(base: Path) -> int | None:
    try:
        status = (base / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])  # real, effective, saved, filesystem: the real one
    return None


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
