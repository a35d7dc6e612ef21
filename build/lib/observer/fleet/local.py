"""Agents in the same process (the simulator's nodes, tests)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from observer.domain import NodeSnapshot
from observer.errors import BackendError


class LocalFleet:
    def __init__(self, snapshots: Mapping[str, Callable[[], NodeSnapshot | None]]) -> None:
        self._snapshots = snapshots
        self.unreachable: set[str] = set()  # agents made to fail, as a fault

    def agents(self) -> list[str]:
        return sorted(self._snapshots)

    def fetch_all(self, agents: Sequence[str]) -> dict[str, NodeSnapshot | BackendError]:
        return {agent: self._fetch(agent) for agent in agents}

    def _fetch(self, agent: str) -> NodeSnapshot | BackendError:
        snapshot = None if agent in self.unreachable else self._snapshots[agent]()
        if snapshot is None:
            return BackendError(f"agent {agent} has no snapshot to give")
        return snapshot
