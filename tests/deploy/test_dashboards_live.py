"""The dashboards and alerts against a real Prometheus (2.42, from .tools/bin) scraping a
running agent (replaying the recorded H200 trace as node-000) and a running controller (the
simulated cluster, whose node-000 is in pool-a): every dashboard query is parsed and
evaluated without error, the GPU fleet's queries return data, every alert rule evaluates
cleanly, and the chart's `helm test` check passes against the live controller."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.chart import (
    DASHBOARDS,
    REPO,
    dashboard_queries,
    one,
    promql_metric_names,
    render,
    rule_groups,
    tool,
)
from tests.support.net import free_port
from tests.support.settings import ALWAYS
from tests.support.waiting import wait_until

TRACE = REPO / "tests" / "fixtures" / "nvml" / "h200-trace"
STARTUP_SECONDS = 30
# Queries that depend on work being on the GPUs, or a finding being open, when asked.
MAY_BE_EMPTY = {"observer_gpu_process_memory_used_bytes", "observer_findings_open"}

pytestmark = [pytest.mark.prometheus, pytest.mark.chart, pytest.mark.timeout(180)]


@dataclass
class Stack:
    prometheus: httpx.Client
    controller_url: str


def start(stack: ExitStack, name: str, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    out = stack.enter_context(log.open("wb"))
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    stack.callback(stop)
    return proc


def listening_port(proc: subprocess.Popen[bytes], log: Path, event: str) -> int:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == event:
                port: int = record["port"]
                return port
        assert proc.poll() is None, f"{event!r} never came:\n{log.read_text()}"
        time.sleep(0.1)
    raise AssertionError(f"{event!r} never came:\n{log.read_text()}")


def query(client: httpx.Client, expr: str) -> list[dict[str, Any]]:
    response = client.get("/api/v1/query", params={"query": expr})
    body = response.json()
    assert body["status"] == "success", f"{expr}: {body.get('error')}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def wait_for(client: httpx.Client, expr: str, what: str) -> None:
    wait_until(
        lambda: query(client, expr),
        f"no {what} in Prometheus ({expr})",
        seconds=STARTUP_SECONDS,
        poll_seconds=0.5,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus = tool("prometheus")
    helm = tool("helm")
    work = tmp_path_factory.mktemp("live")
    agent_config = {
        "agent": {
            "node_name": "node-000",
            "gpu_backend": "replay",
            "replay_trace_dir": str(TRACE),
            "interval_seconds": 0.2,
            "counters_interval_seconds": 1,
            "listen_host": "127.0.0.1",
            "listen_port": 0,
            "shutdown_deadline_seconds": 3,
        },
        "detectors": {"node": {"grace_seconds": 1, "idle_seconds": 2}},
        "logging": {"format": "json"},
    }
    controller_config = {
        "controller": {
            "backend": "simulated",
            "windows": [ALWAYS],
            "tenants": [{"name": "research", "weight": 0.7}, {"name": "prod", "weight": 0.3}],
            "plan": [{"window": "always", "probe": "short", "every_seconds": 1}],
            "probes": {"short": {"duration_seconds": 1}},
            "follow_interval_seconds": 0.2,
            "snapshot_interval_seconds": 0.5,
            "listen_host": "127.0.0.1",
            "listen_port": 0,
            "shutdown_deadline_seconds": 5,
            "simulation": {"nodes": 2, "gpus_per_node": 8, "pools": ["pool-a", "pool-b"]},
        },
        "storage": {"sqlite_path": str(work / "observer.db")},
        "logging": {"format": "json"},
    }
    rules = rule_groups(render(helm, sets={"prometheusRule.enabled": "true"}))
    (work / "rules.yaml").write_text(yaml.safe_dump({"groups": rules}, sort_keys=False))
    for name, config in (("agent", agent_config), ("controller", controller_config)):
        (work / f"{name}.yaml").write_text(yaml.safe_dump(config))

    with ExitStack() as stack:
        ports = {}
        for name in ("agent", "controller"):
            log = work / f"{name}.log"
            argv = [
                sys.executable,
                "-m",
                "observer.cli",
                name,
                "--config",
                str(work / f"{name}.yaml"),
            ]
            proc = start(stack, name, argv, log)
            ports[name] = listening_port(proc, log, f"{name} listening")
        (work / "prometheus.yml").write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(work / "rules.yaml")],
                    "scrape_configs": [
                        {
                            "job_name": f"observer-{name}",
                            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
                        }
                        for name, port in ports.items()
                    ],
                }
            )
        )
        web = f"127.0.0.1:{free_port()}"
        log = work / "prometheus.log"
        proc = start(
            stack,
            "prometheus",
            [
                str(prometheus),
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'tsdb'}",
                f"--web.listen-address={web}",
                "--log.level=warn",
            ],
            log,
        )
        client = stack.enter_context(httpx.Client(base_url=f"http://{web}", timeout=10))
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if client.get("/-/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        wait_for(client, "count(up == 1) == 2", "two targets up")
        wait_for(client, 'observer_gpu_info{node="node-000"}', "agent GPU series")
        wait_for(client, 'observer_scheduler_node_gpus{node="node-000"}', "scheduler nodes")
        wait_for(client, "observer_probe_queue_wait_seconds_count", "probe waits")
        # a few more scrapes, so that rate() and increase() have samples to work on
        wait_for(client, "count_over_time(observer_gpu_up[1m]) >= 5", "five scrapes")
        yield Stack(client, f"http://127.0.0.1:{ports['controller']}")


def test_every_dashboard_query_runs_on_prometheus(stack: Stack):
    problems, empty_gpu = [], []
    count = 0
    for path in DASHBOARDS:
        for where, expr in dashboard_queries(path):
            count += 1
            response = stack.prometheus.get("/api/v1/query", params={"query": expr})
            body = response.json()
            if body["status"] != "success":
                problems.append(f"{where}: {body.get('error')}\n  {expr}")
                continue
            names = promql_metric_names(expr)
            gpu = any(n.startswith("observer_gpu_") for n in names) and not names & MAY_BE_EMPTY
            if path.name == "gpu-fleet.json" and gpu and not body["data"]["result"]:
                empty_gpu.append(f"{where}\n  {expr}")
    assert not problems, "\n".join(problems)
    assert not empty_gpu, "GPU panels without data:\n" + "\n".join(empty_gpu)
    assert count > 80


def test_pool_and_node_joins_name_the_scheduler_pool(stack: Stack):
    fleet = REPO / "helm" / "observer" / "dashboards" / "gpu-fleet.json"
    exprs = dict(dashboard_queries(fleet))
    by_pool = next(e for w, e in exprs.items() if "'GPU utilisation by pool'" in w)
    assert {r["metric"]["pool"] for r in query(stack.prometheus, by_pool)} == {"pool-a"}
    by_node = next(e for w, e in exprs.items() if "'GPU utilisation by node'" in w)
    (row,) = query(stack.prometheus, by_node)
    assert row["metric"] == {"node": "node-000"}
    assert 0 <= float(row["value"][1]) <= 1


def test_every_alert_rule_evaluates_cleanly(stack: Stack):
    def evaluated() -> list[dict[str, Any]]:
        groups = stack.prometheus.get("/api/v1/rules").json()["data"]["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        every = all(rule.get("lastEvaluation", "").startswith("2") for rule in rules)
        return rules if every else []

    rules = wait_until(evaluated, "rules never evaluated", seconds=10, poll_seconds=0.5)
    bad = [f"{r['name']}: {r.get('lastError')}" for r in rules if r["health"] != "ok"]
    assert not bad, "\n".join(bad)
    assert len(rules) >= 15


def test_helm_test_pod_check_passes_against_the_controller(stack: Stack):
    pod = one(render(tool("helm")), "Pod", "-test")
    script = pod["spec"]["containers"][0]["args"][0]
    result = subprocess.run(
        [sys.executable, "-c", script, stack.controller_url, "30"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "controller healthy" in result.stdout
