"""The demo's node failure: the node a probe runs on fails under it, the probe is queued again
and passes elsewhere, and the day's summary puts the run down to the node, as the score asks
of every run the fault hit."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.demo.nodes import DemoNodes
from observer.demo.scenario import load_scenario
from observer.demo.script import FaultScript, World
from observer.fleet.local import LocalFleet
from observer.reports.compute.causes import Cause, classify
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

SCENARIO = """\
name: a node failure
start: 2026-11-30
days: 1
seed: 3
platform: {nodes: 2, gpus_per_node: 8, pools: [a]}
faults:
  - {kind: node_failure, at: "2026-11-30 11:05", until: "2026-11-30 11:30"}
"""
STEP_SECONDS = 5.0


def test_a_node_failure_requeues_the_probe_on_it_and_its_run_is_the_nodes_fault(
    tmp_path: Path,
):
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    scenario = load_scenario(path, tmp_path, "en")
    settings = scenario.settings
    start = scenario.local(scenario.faults[0].at) - timedelta(minutes=30)
    clock = ManualClock(start)
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    cluster = simulated_cluster(settings, clock)
    nodes = DemoNodes(cluster, clock, 8, settings.detectors.node, settings.detectors.gpu_health)
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

    soak.run_for(2 * 3600, step)

    [injection] = script.injections
    [hit] = injection.hit
    run = store.run(hit["run_id"])
    assert run is not None and run.attempts
    assert run.attempts[0].nodes == (hit["node"],)
    assert run.attempts[0].state == "NODE_FAIL"
    classified = classify(run, store.findings(), store.node_changes(start, clock.now()))
    assert classified is not None and classified.cause is Cause.NODE
    assert injection.expected_causes() == [(run.run_id, "node")]
