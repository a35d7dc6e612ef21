"""The demo's degraded GPU link: while one pair of a node's GPUs talks at half its rate, the
gpu-comm probe that runs there fails naming the pair, the reports put it down to the GPUs,
and no other probe notices; the same day without the fault has no gpu-comm failure."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.demo.nodes import DemoNodes
from observer.demo.scenario import load_scenario
from observer.demo.script import FaultScript, World
from observer.domain import Outcome, ProbeRun
from observer.fleet.local import LocalFleet
from observer.probes.catalog import GPU_COMM_PROBE
from observer.reports.compute.causes import Cause, classify
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

SCENARIO = """\
name: a degraded link
start: 2026-11-30
days: 1
seed: 3
platform: {{nodes: 1, gpus_per_node: 4, pools: [a]}}
faults: {faults}
"""
FAULT = (
    '[{kind: comm_degraded, node: node-000, pair: "1-3", '
    'at: "2026-11-30 10:00", until: "2026-11-30 20:00"}]'
)
STEP_SECONDS = 5.0


def play(tmp_path: Path, faults: str) -> tuple[Store, FaultScript]:
    path = tmp_path / "scenario.yaml"
    path.write_text(SCENARIO.format(faults=faults), encoding="utf-8")
    scenario = load_scenario(path, tmp_path, "en")
    settings = scenario.settings
    clock = ManualClock(scenario.start + timedelta(hours=9, minutes=55))
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    cluster = simulated_cluster(settings, clock)
    nodes = DemoNodes(cluster, clock, 4, settings.detectors.node, settings.detectors.gpu_health)
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

    soak.run_for(3 * 3600, step)
    return store, script


def comm_runs(store: Store) -> list[ProbeRun]:
    return [r for r in store.runs(probe=GPU_COMM_PROBE) if r.outcome is not None]


@pytest.mark.parametrize("degraded", [True, False], ids=["degraded", "healthy"])
def test_gpu_comm_fails_naming_the_pair_only_while_the_link_is_degraded(
    tmp_path: Path, degraded: bool
):
    store, script = play(tmp_path, FAULT if degraded else "[]")

    runs = comm_runs(store)
    assert runs, "the plan ran no gpu-comm probe in the first three hours of its window"
    if not degraded:
        assert {r.outcome for r in runs} == {Outcome.PASSED}
        return
    [injection] = script.injections
    assert injection.injected
    hit = {h["run_id"] for h in injection.hit}
    failed = [r for r in runs if r.run_id in hit]
    assert failed and {r.outcome for r in failed} == {Outcome.FAILED}
    for run in failed:
        assert run.exit_code == 72
        assert run.message is not None and "GPU 1 -> GPU 3" in run.message
        classified = classify(run, store.findings(), [])
        assert classified is not None and classified.cause is Cause.GPU_DRIVER
    assert sorted(injection.expected_causes()) == sorted((r.run_id, "gpu_driver") for r in failed)
