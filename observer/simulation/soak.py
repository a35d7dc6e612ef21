"""A soak on the simulated cluster: the production composition (every task the daemon runs)
over a SimulatedCluster, usually on a ManualClock, stepped by SteppedRunner. What `observer demo`,
the benchmarks and the tests run; they differ only in the settings, the sources (agents,
Prometheus, Alertmanager) and the platform's own tasks they add."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry

from observer.backends.base import SchedulerBackend
from observer.backends.simulated import SimulatedCluster
from observer.clock import Clock, ManualClock
from observer.controller.compose import Composition, Sources, Task, build_backend, compose
from observer.controller.work import Controller
from observer.fleet.local import LocalFleet
from observer.metrics import ControllerMetrics, Heartbeat, ReportMetrics
from observer.settings import Settings
from observer.simulation.stepped import SteppedRunner
from observer.storage.store import Store


def simulated_cluster(settings: Settings, clock: ManualClock) -> SimulatedCluster:
    """The cluster `controller.simulation` describes."""
    cluster = build_backend(settings.controller.model_copy(update={"backend": "simulated"}), clock)
    assert isinstance(cluster, SimulatedCluster)
    return cluster


class SimulatedSoak:
    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        store: Store,
        backend: SchedulerBackend,
        sources: Sources | None = None,
        *,
        agents: Sequence[Task] = (),
        world: Sequence[Task] = (),
        registry: CollectorRegistry | None = None,
        timed: Callable[[Task], Task] | None = None,
    ) -> None:
        """`backend` is usually a SimulatedCluster (or a view of one); a test may give a real
        platform, with a clock and step that wait for it. `sources` default to no agents, no
        Prometheus and no Alertmanager. `agents` are the simulated nodes' own tasks, run in
        each step just before the controller reads the fleet; `world` the platform's other
        tasks (load, faults), run after the controller's. `timed` wraps each of the
        controller's tasks (a benchmark's timer)."""
        self.settings = settings
        self.clock = clock
        self.store = store
        self.registry = registry or CollectorRegistry()
        self.metrics = ControllerMetrics(self.registry)
        self.reports = ReportMetrics(self.registry)
        Heartbeat(self.registry, clock)
        self.composition: Composition = compose(
            settings,
            backend,
            store,
            sources or Sources(LocalFleet({})),
            clock,
            self.metrics,
            self.reports,
            threading.Event(),
        )
        tasks = [timed(t) if timed else t for t in self.composition.tasks]
        at = next(i for i, t in enumerate(tasks) if t.name == "fleet")
        self.runner = SteppedRunner(
            [*tasks[:at], *agents, *tasks[at:], *world], clock, self.metrics.loops
        )

    @property
    def controller(self) -> Controller:
        return self.composition.controller

    def run_for(self, seconds: float, step: Callable[[], object] | None = None) -> None:
        self.runner.run_for(seconds, step)
