"""The two questions attribution asks: what is this pid, and is its owner still running; and
the node's own scheduler agent (the kubelet, slurmd) that answers the second on a real node,
with which GPUs it gave each owner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from observer.domain import Owner, OwnerKind, OwnerState
from observer.errors import OwnerSourceError


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


@dataclass(frozen=True, slots=True)
class NodeOwners:
    """One reading of the node's scheduler agent: the owners it runs now (pod UIDs, Slurm
    job ids, by OwnerKind), the GPUs (NVML UUIDs) it assigned to each, and the GPUs it can
    assign at all (None when it does not say)."""

    at: datetime
    kind: OwnerKind
    running: frozenset[str]
    gpus: Mapping[str, frozenset[str]] = field(default_factory=dict)
    allocatable: frozenset[str] | None = None
    # What people call each owner it knows the id of (a pod's "namespace/name"), running or
    # lately ended.
    names: Mapping[str, str] = field(default_factory=dict)
    # Owners it runs whose id the node cannot tell (by name, with their GPUs): while one is,
    # an owner missing from `running` may be it, so only an owner named otherwise is ended.
    unmatched: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Of a GPU given in parts (MIG devices), the parts each owner (id, or name when unmatched)
    # was given, as the source names them.
    parts: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)


class OwnerSource(Protocol):
    """The kubelet's pod-resources API or slurmd, read at most once per agent tick."""

    name: str  # "kubelet" | "slurm": the agent.owners setting's value

    def read(self) -> NodeOwners:
        """What the node runs now; raises OwnerSourceError when it cannot be asked (socket
        missing, command failed or timed out, an answer that does not parse)."""
        ...

    def close(self) -> None:
        """Release its connection, if it holds one."""
        ...


class Undetected:
    """The source when `agent.owners` is `none`, or `auto` finds no scheduler agent on the
    node: every read fails with why, so the agent reports itself blind to owners instead of
    guessing."""

    name = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def read(self) -> NodeOwners:
        raise OwnerSourceError(self.reason)

    def close(self) -> None:
        pass
