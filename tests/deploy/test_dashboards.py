"""The Grafana dashboards: generated from deploy/chart-tools/dashboards.py, conventional
(schemaVersion 39, a `${datasource}` variable of type prometheus), and every query parsed
with every metric name it reads among those `observer metrics list` prints (or Prometheus'
own series and the named standard exporters)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.deploy.chart import (
    DASHBOARDS,
    REPO,
    dashboard_queries,
    is_known_metric,
    promql_metric_names,
)

pytestmark = pytest.mark.chart

EXPECTED = {
    "soak-overview.json": "observer-soak-overview",
    "gpu-fleet.json": "observer-gpu-fleet",
    "probes-queues.json": "observer-probes-queues",
    "pipelines.json": "observer-pipelines",
    "self-health.json": "observer-self-health",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_dashboards_are_generated_from_their_definitions():
    result = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "chart-tools" / "dashboards.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_five_dashboards_are_there():
    assert {p.name: json.loads(p.read_text())["uid"] for p in DASHBOARDS} == EXPECTED


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_is_conventional(path):
    board = json.loads(path.read_text())
    assert board["schemaVersion"] == 39
    assert "gpu-soak-observer" in board["tags"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE
            assert variable["includeAll"] and variable["allValue"] == ".*"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] in ("row", "text"):
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]


def test_every_query_reads_only_exported_metrics():
    unknown, read = [], set()
    for path in DASHBOARDS:
        for where, expr in dashboard_queries(path):
            names = promql_metric_names(expr)
            assert names, f"{where}: reads no metric"
            read |= names
            unknown += [f"{where}: {name}" for name in sorted(names) if not is_known_metric(name)]
    assert not unknown, "\n".join(unknown)
    # the GPU fleet's figures: utilisation, memory, unreleased memory, idle allocations
    assert {
        "observer_gpu_utilization_ratio",
        "observer_gpu_memory_used_bytes",
        "observer_gpu_unreleased_memory_bytes",
        "observer_findings_open",
        "observer_probe_queue_wait_seconds_bucket",
        "observer_scheduler_node_gpus",
        "observer_nvml_up",
    } <= read


def test_an_unknown_metric_would_be_caught():
    assert not is_known_metric("observer_gpu_utilisation_ratio")
    assert not is_known_metric("observer_gpu_up_count")  # not a histogram
    assert is_known_metric("observer_probe_queue_wait_seconds_bucket")
    assert promql_metric_names('sum by (a) (rate(x_total{b="c"}[5m])) / on (a) y') == {
        "x_total",
        "y",
    }
