"""What the controller asks of the fleet of node agents."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from observer.domain import NodeSnapshot
from observer.errors import BackendError


class Fleet(Protocol):
    def agents(self) -> list[str]:
        """The agents to read now (addresses or names). Raises BackendError when discovery
        itself fails."""
        ...

    def fetch_all(self, agents: Sequence[str]) -> dict[str, NodeSnapshot | BackendError]:
        """Each agent's latest snapshot, or the BackendError that kept it from being read:
        one agent's failure is that agent's answer, never the whole read's."""
        ...
