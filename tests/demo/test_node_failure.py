"""The demo's node failure: the node a probe runs on fails under it, the probe is queued again
and passes elsewhere, and the day's summary puts the run down to the node, as the score asks
of every run the fault hit."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from observer.reports.compute.causes import Cause, classify
from tests.demo.played import play

SCENARIO = """\
name: a node failure
start: 2026-11-30
days: 1
seed: 3
platform: {nodes: 2, gpus_per_node: 8, pools: [a]}
faults:
  - {kind: node_failure, at: "2026-11-30 11:05", until: "2026-11-30 11:30"}
"""


def test_a_node_failure_requeues_the_probe_on_it_and_its_run_is_the_nodes_fault(
    tmp_path: Path,
):
    played = play(SCENARIO, tmp_path, timedelta(hours=10, minutes=35), 2 * 3600)

    store = played.store
    [injection] = played.script.injections
    [hit] = injection.hit
    run = store.run(hit["run_id"])
    assert run is not None and run.attempts
    assert run.attempts[0].nodes == (hit["node"],)
    assert run.attempts[0].state == "NODE_FAIL"
    classified = classify(run, store.findings(), store.node_changes(played.start, played.end))
    assert classified is not None and classified.cause is Cause.NODE
    assert injection.expected_causes() == [(run.run_id, "node")]
