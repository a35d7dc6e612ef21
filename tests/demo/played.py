"""A scenario file played for a while as the demo plays it (the soak's controller and the
simulated nodes on one manual clock, its faults switched by their script), for tests of one
fault kind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.demo.nodes import DemoNodes
from observer.demo.scenario import Scenario, load_scenario
from observer.demo.script import FaultScript, World
from observer.fleet.local import LocalFleet
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

STEP_SECONDS = 5.0


@dataclass(frozen=True)
class Played:
    store: Store
    script: FaultScript
    start: datetime
    end: datetime


def play(text: str, tmp_path: Path, after_start: timedelta, seconds: float) -> Played:
    """`text` played for `seconds` from `after_start` past the scenario's start, in steps of
    STEP_SECONDS."""
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")
    scenario: Scenario = load_scenario(path, tmp_path, "en")
    settings = scenario.settings
    clock = ManualClock(scenario.start + after_start)
    began = clock.now()
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    cluster = simulated_cluster(settings, clock)
    gpus = settings.controller.gpus_per_node
    nodes = DemoNodes(cluster, clock, gpus, settings.detectors.node, settings.detectors.gpu_health)
    soak = SimulatedSoak(
        settings,
        clock,
        store,
        cluster,
        Sources(LocalFleet(nodes.snapshots)),
        agents=[Task("nodes", STEP_SECONDS, nodes.tick)],
    )
    script = FaultScript(
        scenario,
        World(
            cluster, nodes, LocalFleet(nodes.snapshots), (), soak.controller.runner.active, store
        ),
    )

    def step() -> None:
        clock.advance(STEP_SECONDS)
        script.tick(clock.now())

    soak.run_for(seconds, step)
    return Played(store, script, began, clock.now())
