"""A host whose processes and owners a test or the simulator sets directly: both the
ProcessTable and the OwnerDirectory of a simulated node."""

from __future__ import annotations

from observer.domain import NO_OWNER, Owner, OwnerPhase, OwnerState
from observer.ownership.base import ProcessInfo


class FakeHost:
    def __init__(self) -> None:
        self.processes: dict[int, ProcessInfo] = {}
        self.owners: dict[Owner, OwnerState] = {}

    def spawn(
        self,
        pid: int,
        owner: Owner = NO_OWNER,
        command: str = "python train.py",
        start_ticks: int | None = None,
    ) -> None:
        """A process; it started at `start_ticks` (default: its pid, so later pids start
        later), which tells a reused pid's new process from the one that ended."""
        executable = command.split(maxsplit=1)[0].rpartition("/")[2]
        self.processes[pid] = ProcessInfo(
            pid, pid if start_ticks is None else start_ticks, command, owner, executable
        )

    def kill(self, pid: int) -> None:
        self.processes.pop(pid, None)

    def inspect(self, pid: int) -> ProcessInfo | None:
        return self.processes.get(pid)

    def alive(self, info: ProcessInfo) -> bool:
        return self.processes.get(info.pid) == info

    def state(self, owner: Owner) -> OwnerState:
        return self.owners.get(owner, OwnerState(OwnerPhase.UNKNOWN))
