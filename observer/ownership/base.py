"""The two questions attribution asks: what is this pid, and is its owner still running."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from observer.domain import Owner, OwnerPhase, OwnerState


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    pid: int
    start_ticks: int | None  # /proc/<pid>/stat starttime: tells a reused pid apart
    command: str | None
    owner: Owner
    executable: str | None = None
    uid: int | None = None
    user: str | None = None


class ProcessTable(Protocol):
    def inspect(self, pid: int) -> ProcessInfo | None:
        """What the host knows of `pid`; None when no such process exists."""
        ...

    def alive(self, info: ProcessInfo) -> bool:
        """Whether the process `info` describes still runs (a reused pid is not it)."""
        ...


class OwnerDirectory(Protocol):
    def state(self, owner: Owner) -> OwnerState:
        """Whether `owner` still runs. UNKNOWN when it cannot tell: never guess 'ended'."""
        ...


class UnknownOwners:
    """The directory used when no scheduler is wired: every owner's state is unknown, so
    'owner ended' findings are never raised on a guess."""

    def state(self, owner: Owner) -> OwnerState:
        return OwnerState(OwnerPhase.UNKNOWN)
