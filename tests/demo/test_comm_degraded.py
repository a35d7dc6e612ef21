"""The demo's degraded GPU link: while one pair of a node's GPUs talks at half its rate, the
gpu-comm probe that runs there fails naming the pair, the reports put it down to the GPUs,
and no other probe notices; the same day without the fault has no gpu-comm failure."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from observer.domain import Outcome, ProbeRun
from observer.probes.catalog import GPU_COMM_PROBE
from observer.reports.compute.causes import Cause, classify
from observer.storage.store import Store
from tests.demo.played import play

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


def comm_runs(store: Store) -> list[ProbeRun]:
    return [r for r in store.runs(probe=GPU_COMM_PROBE) if r.outcome is not None]


@pytest.mark.parametrize("degraded", [True, False], ids=["degraded", "healthy"])
def test_gpu_comm_fails_naming_the_pair_only_while_the_link_is_degraded(
    tmp_path: Path, degraded: bool
):
    played = play(
        SCENARIO.format(faults=FAULT if degraded else "[]"),
        tmp_path,
        timedelta(hours=9, minutes=55),
        3 * 3600,
    )
    store, script = played.store, played.script

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
