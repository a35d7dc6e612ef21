"""How the scheduler contract suite drives each implementation: a backend plus a way to let
the platform's time pass until something is true."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Protocol

from observer.backends.base import SchedulerBackend
from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.clock import ManualClock


class Harness(Protocol):
    """What every scheduler backend's test platform offers the contract suite. Read-only, so
    that a platform may hold its own backend class and a narrower queue type."""

    @property
    def backend(self) -> SchedulerBackend: ...

    @property
    def tenants(self) -> tuple[str, str]: ...

    @property
    def queue(self) -> str | None: ...

    @property
    def gpus_per_node(self) -> int: ...

    @property
    def nodes(self) -> int: ...

    def settle(self, until: Callable[[], bool], timeout_seconds: float) -> None:
        """Let the platform's time pass until `until()` holds; fail the test after
        `timeout_seconds` of it."""
        ...

    def owner_ids(self, job_id: str) -> set[str]:
        """What a node agent names as the owner of the job's processes now."""
        ...


class HangingHarness(Harness, Protocol):
    """A platform that can be made unable to stop a job's processes, and repaired."""

    def hang_ends(self, job_id: str) -> None: ...

    def release_ends(self, job_id: str) -> None: ...


# How the suite opens each platform: a context manager that yields it ready and cleans up.
Platform = Callable[[], AbstractContextManager[Harness]]
HangingPlatform = Callable[[], AbstractContextManager[HangingHarness]]


class SimulatedHarness:
    def __init__(self) -> None:
        self.clock = ManualClock(datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
        self.tenants = ("research", "prod")
        self.queue = "gpu"
        self.gpus_per_node = 4
        self.nodes = 3
        self.backend = SimulatedCluster(
            [NodeSpec(f"n{i}", self.gpus_per_node, "pool-a") for i in range(1, self.nodes + 1)],
            [TenantSpec("research", 0.7), TenantSpec("prod", 0.3)],
            self.clock,
        )

    def owner_ids(self, job_id: str) -> set[str]:
        return {job_id}  # as the demo's nodes own their processes

    def hang_ends(self, job_id: str) -> None:
        self.backend.faults.stuck_jobs.add(job_id)

    def release_ends(self, job_id: str) -> None:
        self.backend.faults.stuck_jobs.discard(job_id)

    def settle(self, until: Callable[[], bool], timeout_seconds: float) -> None:
        waited = 0.0
        while not until():
            assert waited < timeout_seconds, f"not settled after {timeout_seconds} s"
            self.clock.advance(0.5)
            waited += 0.5


@contextmanager
def simulated() -> Iterator[SimulatedHarness]:
    yield SimulatedHarness()
