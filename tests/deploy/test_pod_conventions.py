"""The agent DaemonSet as a node-level daemon should be (scheduled on every GPU node whatever
the taint's effect, the last to be evicted, never restarted by a chart bump alone), and the
values the chart refuses because a pod would break on them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from observer.settings.agent import AgentSettings
from tests.deploy.chart import (
    CHART,
    CI_VALUES,
    kinds,
    one,
    pod_spec,
    render,
    run,
    runs_agents,
    tool,
)

pytestmark = pytest.mark.chart

WITH_AGENTS = [
    pytest.param(values, id=values.name.removesuffix("-values.yaml") if values else "defaults")
    for values in (None, *CI_VALUES)
    if runs_agents(values)
]
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
GPU_TAINT_KEY = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def helm() -> Path:
    return tool("helm")


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    """Kubernetes' matching of a taint by a pod's tolerations."""
    for toleration in tolerations:
        operator = toleration.get("operator", "Equal")
        if operator == "Exists":  # an empty key with Exists tolerates every taint
            key_ok = toleration.get("key", "") in ("", taint["key"])
        else:
            key_ok = toleration.get("key") == taint["key"]
        value_ok = operator == "Exists" or toleration.get("value", "") == taint.get("value", "")
        effect_ok = toleration.get("effect", "") in ("", taint["effect"])
        if key_ok and value_ok and effect_ok:
            return True
    return False


@pytest.mark.parametrize("values", WITH_AGENTS)
def test_the_agent_tolerates_the_gpu_taint_of_every_effect(helm: Path, values: Path | None):
    spec = pod_spec(one(render(helm, *([values] if values else [])), "DaemonSet"))
    for effect in TAINT_EFFECTS:
        for value in ("", "present"):
            taint = {"key": GPU_TAINT_KEY, "value": value, "effect": effect}
            assert tolerates(spec["tolerations"], taint), taint
    assert not tolerates(spec["tolerations"], {"key": "example.com/other", "effect": "NoExecute"})


def test_the_toleration_check_is_not_vacuous():
    only_no_schedule = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    assert tolerates(only_no_schedule, {"key": GPU_TAINT_KEY, "effect": "NoSchedule"})
    assert not tolerates(only_no_schedule, {"key": GPU_TAINT_KEY, "effect": "NoExecute"})


def test_the_agent_is_node_critical_unless_told_otherwise(helm: Path):
    assert pod_spec(one(render(helm), "DaemonSet"))["priorityClassName"] == "system-node-critical"
    custom = render(helm, sets={"agent.priorityClassName": "gpu-observers"})
    assert pod_spec(one(custom, "DaemonSet"))["priorityClassName"] == "gpu-observers"
    none = render(helm, sets={"agent.priorityClassName": ""})
    assert "priorityClassName" not in pod_spec(one(none, "DaemonSet"))


@pytest.mark.parametrize("values", WITH_AGENTS)
def test_the_agent_requests_the_memory_it_may_use(helm: Path, values: Path | None):
    (agent,) = pod_spec(one(render(helm, *([values] if values else [])), "DaemonSet"))["containers"]
    assert agent["resources"]["requests"]["memory"] == agent["resources"]["limits"]["memory"]


def bumped_chart(tmp_path: Path, version: str) -> Path:
    """The chart as released under another chart version and appVersion."""
    chart = tmp_path / version / "observer"
    shutil.copytree(CHART, chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"], meta["appVersion"] = version, version
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    return chart


def test_a_chart_bump_changes_no_pod_template(helm: Path, tmp_path: Path):
    """Only the image restarts pods: a chart release that runs the same image (pinned by tag)
    renders the same pod templates, while the objects' own labels name the release."""

    def workloads(chart: Path) -> dict[str, dict[str, Any]]:
        out = run(
            helm, "template", "observer", chart, "--namespace", "gpu-soak", "--set", "image.tag=1.0"
        ).stdout
        objects = [doc for doc in yaml.safe_load_all(out) if doc]
        return {o["kind"]: o for o in kinds(objects, "DaemonSet") + kinds(objects, "Deployment")}

    old = workloads(bumped_chart(tmp_path, "0.1.0"))
    new = workloads(bumped_chart(tmp_path, "0.2.0"))

    assert sorted(old) == ["DaemonSet", "Deployment"]
    for kind in old:
        template = [json.dumps(w[kind]["spec"]["template"], sort_keys=True) for w in (old, new)]
        assert template[0] == template[1], kind
        assert old[kind]["metadata"]["labels"] != new[kind]["metadata"]["labels"], kind


# --- values the chart refuses -------------------------------------------------------------

AGENT_DEFAULT_DEADLINE = AgentSettings().shutdown_deadline_seconds

REFUSED = {
    "agent memory request below its limit": (
        "agent: {resources: {requests: {memory: 128Mi}, limits: {memory: 256Mi}}}",
        "agent.resources: requests.memory (128Mi) must equal limits.memory (256Mi)",
    ),
    "agent without a memory limit": (
        "agent: {resources: {requests: {memory: null}, limits: {memory: null}}}",
        "agent.resources.limits.memory is unset",
    ),
    "agent grace at its shutdown deadline": (
        "agent: {terminationGracePeriodSeconds: 12}\n"
        "settings: {agent: {shutdown_deadline_seconds: 12}}",
        "agent.terminationGracePeriodSeconds (12) must be above "
        "settings.agent.shutdown_deadline_seconds (12)",
    ),
    "agent grace below the model's default deadline": (
        "agent: {terminationGracePeriodSeconds: 5}\n"
        "settings: {agent: {shutdown_deadline_seconds: null}}",
        f"agent.terminationGracePeriodSeconds (5) must be above "
        f"settings.agent.shutdown_deadline_seconds ({AGENT_DEFAULT_DEADLINE:g})",
    ),
    "controller grace below its shutdown deadline": (
        "controller: {terminationGracePeriodSeconds: 15}",
        "controller.terminationGracePeriodSeconds (15) must be above "
        "settings.controller.shutdown_deadline_seconds (",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_chart_refuses_values_a_pod_would_break_on(helm: Path, tmp_path: Path, case: str):
    """Cross-field checks are the templates' `fail` (a schema cannot compare two values):
    `helm template` and `helm install` stop on them; helm 4's lint only logs them."""
    text, message = REFUSED[case]
    values = tmp_path / "values.yaml"
    values.write_text(text + "\n")
    for command in (["template", "observer"], ["install", "--dry-run=client", "observer"]):
        result = run(helm, *command, CHART, "-f", values, check=False)
        assert result.returncode != 0, (case, command)
        assert message in result.stdout + result.stderr, result.stdout + result.stderr
