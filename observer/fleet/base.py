"""What the controller asks of the fleet of node agents."""

from __future__ import annotations

from typing import Protocol

from observer.domain import NodeSnapshot


class Fleet(Protocol):
    def agents(self) -> list[str]:
        """The agents to read now (addresses or names). Raises BackendError when discovery
        itself fails."""
        ...

    def fetch(self, agent: str) -> NodeSnapshot:
        """One agent's latest snapshot. Raises BackendError when it cannot be read."""
        ...
