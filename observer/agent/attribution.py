"""Joins each process NVML lists with its host process and its owner's state.

/proc is read once per process (cached while NVML keeps listing the pid) and checked for
liveness every tick; the owner's state is asked every tick, since that is what changes.
A process's command line goes no further unless asked for: argv often carries tokens, and
the snapshot is readable by whoever reaches the agent."""

from __future__ import annotations

from collections.abc import Sequence

from observer.domain import NO_OWNER, AttributedProcess, GpuReading, Owner, OwnerState
from observer.ownership.base import OwnerDirectory, ProcessInfo, ProcessTable


class Attributor:
    def __init__(
        self, processes: ProcessTable, owners: OwnerDirectory, command_lines: bool = False
    ) -> None:
        self._processes = processes
        self._owners = owners
        self._command_lines = command_lines
        self._known: dict[int, ProcessInfo] = {}

    def attribute(self, gpus: Sequence[GpuReading]) -> tuple[AttributedProcess, ...]:
        result: list[AttributedProcess] = []
        listed: set[int] = set()
        states: dict[object, OwnerState] = {}
        for gpu in gpus:
            if gpu.identity is None or gpu.sample is None or not gpu.sample.processes:
                continue
            for proc in gpu.sample.processes:
                listed.add(proc.pid)
                info = self._info(proc.pid)
                owner = info.owner if info else NO_OWNER
                if owner not in states:
                    states[owner] = self._owners.state(owner)
                result.append(
                    AttributedProcess(
                        gpu_index=gpu.index,
                        gpu_uuid=gpu.identity.uuid,
                        pid=proc.pid,
                        used_memory_bytes=proc.used_memory_bytes,
                        exists=info is not None,
                        command=info.command if info and self._command_lines else None,
                        owner=owner,
                        owner_state=states[owner],
                        executable=info.executable if info else None,
                        uid=info.uid if info else None,
                        user=info.user if info else None,
                        mig_uuid=proc.mig_uuid,
                    )
                )
        for pid in self._known.keys() - listed:
            del self._known[pid]
        return tuple(result)

    def owner_of(self, pid: int) -> tuple[Owner, OwnerState] | None:
        """Whose a process is (a pid an Xid names) and that owner's state; None when the
        process is gone and was not on a GPU at the last tick."""
        info = self._known.get(pid) or self._processes.inspect(pid)
        if info is None:
            return None
        return info.owner, self._owners.state(info.owner)

    def _info(self, pid: int) -> ProcessInfo | None:
        known = self._known.get(pid)
        if known is not None and self._processes.alive(known):
            return known
        info = self._processes.inspect(pid)
        if info is None:
            self._known.pop(pid, None)
        else:
            self._known[pid] = info
        return info
