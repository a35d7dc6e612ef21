"""What the deploy tests share: where the chart and its tools are, rendering the chart, and
reading the PromQL out of the rules and dashboards."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from observer.metrics import AgentMetrics, ControllerMetrics
from tests import components
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "observer"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
DASHBOARDS = sorted((CHART / "dashboards").glob("*.json"))
TOOLS_BIN = REPO / ".tools" / "bin"
INSTALL_HINT = "bash deploy/chart-tools/install.sh"

# Series that Prometheus makes itself, next to what the observer exports.
PROMETHEUS_OWN = frozenset(
    {"up", "scrape_duration_seconds", "scrape_samples_scraped", "ALERTS", "ALERTS_FOR_STATE"}
)
# Standard exporters the dashboards and alerts may read (kube-state-metrics, where it runs).
STANDARD_EXPORTERS = frozenset(
    {
        "kube_pod_container_status_restarts_total",
        # the alerts' planned maintenance: cordoned nodes, driver pods not ready
        "kube_node_spec_unschedulable",
        "kube_pod_info",
        "kube_pod_status_ready",
    }
)
# Grafana's variables as the live test gives them: "All" is `.*`.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
    "${node}": ".*",
    "$node": ".*",
    "$pool": ".*",
    "$tenant": ".*",
    "$window": ".*",
    "$job": ".*",
}


def need(what: str, reason: str) -> None:
    """A missing tool skips the test here, and fails it in CI (CI=true)."""
    components.unavailable(f"{what} is missing: {reason}")


def optional(module: str, package: str) -> Any:
    """A module of the dev extras; missing: skipped here, failed in CI."""
    try:
        return importlib.import_module(module)
    except ImportError:
        need(package, f"pip install {package} (the dev extras)")
        raise


def tool(name: str) -> Path:
    components.require("chart")
    for candidate in (TOOLS_BIN / name, shutil.which(name)):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    need(name, f"run `{INSTALL_HINT}` (installs into .tools/bin)")
    raise AssertionError("unreachable")


def run(
    *args: str | Path, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def helm_args(
    *value_files: Path, sets: dict[str, str] | None = None, api_versions: tuple[str, ...] = ()
) -> list[str]:
    args: list[str] = []
    for path in value_files:
        args += ["-f", str(path)]
    for key, value in (sets or {}).items():
        args += ["--set", f"{key}={value}"]
    for api in api_versions:
        args += ["--api-versions", api]
    return args


def render(
    helm: Path,
    *value_files: Path,
    sets: dict[str, str] | None = None,
    api_versions: tuple[str, ...] = (),
    release: str = "observer",
    namespace: str = "gpu-soak",
) -> list[dict[str, Any]]:
    """`helm template` with hooks and tests included; every document as a dict."""
    out = run(
        helm,
        "template",
        release,
        CHART,
        "--namespace",
        namespace,
        *helm_args(*value_files, sets=sets, api_versions=api_versions),
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def runs_agents(values: Path | None) -> bool:
    """Whether a value set deploys the agent DaemonSet (the Slurm one runs agents outside)."""
    if values is None:
        return True
    return yaml.safe_load(values.read_text()).get("agent", {}).get("enabled", True) is not False


def kinds(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [o for o in kinds(objects, kind) if o["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{len(found)} {kind} named *{name_suffix}"
    return found[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"] if obj["kind"] == "Pod" else obj["spec"]["template"]["spec"]


def all_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def config_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The rendered settings: one ConfigMap, or one copy per namespace (agent.namespace)."""
    maps = [c for c in kinds(objects, "ConfigMap") if c["metadata"]["name"].endswith("-config")]
    copies = {c["data"]["config.yaml"] for c in maps}
    assert len(copies) == 1, f"{len(maps)} ConfigMaps named *-config, {len(copies)} different"
    data: dict[str, Any] = yaml.safe_load(copies.pop())
    return data


# --- metric names ----------------------------------------------------------------------------


@cache
def observer_metric_names() -> frozenset[str]:
    """What `observer metrics list` prints."""
    listed = run_cli("metrics", "list")
    assert listed.exit_code == 0, listed.stderr
    return frozenset(listed.stdout.split())


@cache
def histogram_names() -> frozenset[str]:
    """The observer's histograms, whose series are <name>_bucket, _sum and _count."""
    names = set()
    for build in (AgentMetrics, ControllerMetrics):
        registry = CollectorRegistry()
        build(registry)
        names |= {f.name for f in registry.collect() if f.type == "histogram"}
    return frozenset(names)


def is_known_metric(name: str) -> bool:
    if name in observer_metric_names() or name in PROMETHEUS_OWN or name in STANDARD_EXPORTERS:
        return True
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return base != name and base in histogram_names() and base in observer_metric_names()


def promql_metric_names(expr: str) -> set[str]:
    """Every metric a PromQL expression selects, by its parsed syntax tree."""
    promql_parser = optional("promql_parser", "promql-parser")
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name
            if name is None:
                for matcher in node.matchers.matchers:
                    if matcher.name == "__name__":
                        name = matcher.value
            assert name, f"a selector without a metric name in {expr!r}"
            names.add(name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


# --- queries in the dashboards and rules -------------------------------------------------------


def grafana_expr(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"an unknown Grafana variable in {expr!r}"
    return expr


LABEL_VALUES = re.compile(r"^label_values\((?:(?P<selector>.+),\s*)?(?P<label>\w+)\)$")


def dashboard_queries(path: Path) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every variable query of a dashboard, with
    Grafana's variables replaced; `label_values(selector, label)` gives its selector."""
    board = json.loads(path.read_text(encoding="utf-8"))
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        query = query["query"] if isinstance(query, dict) else query
        match = LABEL_VALUES.match(query.strip())
        assert match and match["selector"], f"{path.name} ${variable['name']}: {query!r}"
        yield f"{path.name} variable ${variable['name']}", grafana_expr(match["selector"])
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield (
                f"{path.name} panel {panel['title']!r} {target['refId']}",
                grafana_expr(target["expr"]),
            )


def rule_groups(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = one(objects, "PrometheusRule")["spec"]["groups"]
    return groups


def alerts(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in rule_groups(objects) for rule in group["rules"]]
