"""Who may reach the agents and the controller, as the rendered NetworkPolicies decide it for
the rendered pods (tests/deploy/network_policy.py evaluates them as Kubernetes does): the
agent's /v1/snapshot port admits the controller alone, and the metrics ports admit Prometheus
wherever it runs, in `monitoring`, in `observability` or in the release namespace, by default
and with the selectors narrowed to where it is."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from observer.backends.kubernetes.manifests import service_labels
from observer.controller.compose import inference_spec
from observer.settings import Settings
from tests.deploy.chart import (
    CHART,
    CI_VALUES,
    config_of,
    kinds,
    pod_spec,
    render,
    runs_agents,
    tool,
)
from tests.deploy.network_policy import METADATA_NAME, Pod, reachable

pytestmark = pytest.mark.chart

VALUE_SETS = [
    pytest.param(values, id=values.name.removesuffix("-values.yaml") if values else "defaults")
    for values in (None, *CI_VALUES)
]
WITH_AGENTS = [
    pytest.param(values, id=values.name.removesuffix("-values.yaml") if values else "defaults")
    for values in (None, *CI_VALUES)
    if runs_agents(values)
]
RELEASE_NAMESPACE = "gpu-soak"  # chart.render's
PLACEMENTS = ["monitoring", "observability", RELEASE_NAMESPACE]
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus"}  # kube-prometheus-stack's


def chart_pods(objects: list[dict[str, Any]]) -> dict[str, Pod]:
    """The pods the rendered workloads make, by component (agent, controller, test)."""
    pods = {}
    for obj in objects:
        if obj["kind"] not in ("DaemonSet", "Deployment", "Pod"):
            continue
        meta = obj["metadata"] if obj["kind"] == "Pod" else obj["spec"]["template"]["metadata"]
        ports = {
            port.get("name", str(port["containerPort"])): port["containerPort"]
            for container in pod_spec(obj)["containers"]
            for port in container.get("ports", [])
        }
        labels = meta["labels"]
        pods[labels["app.kubernetes.io/component"]] = Pod(
            obj["metadata"]["name"], obj["metadata"]["namespace"], labels, ports
        )
    return pods


def prometheus_in(namespace: str) -> Pod:
    return Pod("prometheus-0", namespace, PROMETHEUS_LABELS)


def other_pod_in(namespace: str) -> Pod:
    return Pod("train-0", namespace, {"app": "train"})


def selectors_for(namespace: str) -> dict[str, Any]:
    """Values that admit kube-prometheus-stack's pods in `namespace` alone."""
    return {
        "networkPolicy": {
            "prometheus": {
                "namespaceSelector": {"matchLabels": {METADATA_NAME: namespace}},
                "podSelector": {"matchLabels": PROMETHEUS_LABELS},
            }
        }
    }


def render_with(values: dict[str, Any], tmp_path: Path, **sets: str) -> list[dict[str, Any]]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return render(tool("helm"), path, sets=sets)


@pytest.mark.parametrize("values", WITH_AGENTS)
def test_the_agents_snapshot_port_admits_the_controller_alone(values):
    objects = render(tool("helm"), *([values] if values else []))
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    agent = pods["agent"]
    snapshot_port = agent.ports["http"]

    assert reachable(policies, pods["controller"], agent, snapshot_port)
    for namespace in PLACEMENTS:
        assert not reachable(policies, prometheus_in(namespace), agent, snapshot_port)
        assert not reachable(policies, other_pod_in(namespace), agent, snapshot_port)
    assert not reachable(policies, pods["test"], agent, snapshot_port)


@pytest.mark.parametrize("values", WITH_AGENTS)
@pytest.mark.parametrize("namespace", PLACEMENTS)
def test_by_default_prometheus_scrapes_both_metrics_ports_wherever_it_runs(values, namespace):
    objects = render(tool("helm"), *([values] if values else []))
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    agent, controller = pods["agent"], pods["controller"]
    scraper = prometheus_in(namespace)

    assert reachable(policies, scraper, agent, agent.ports["metrics"])
    assert reachable(policies, scraper, controller, controller.ports["http"])
    assert not reachable(policies, scraper, agent, agent.ports["metrics"] + 1)


@pytest.mark.parametrize("namespace", PLACEMENTS)
def test_selectors_narrowed_to_prometheus_admit_it_and_no_other_pod(namespace, tmp_path):
    objects = render_with(selectors_for(namespace), tmp_path)
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    agent, controller = pods["agent"], pods["controller"]
    scrapes = [(agent, agent.ports["metrics"]), (controller, controller.ports["http"])]

    for target, port in scrapes:
        assert reachable(policies, prometheus_in(namespace), target, port)
        assert not reachable(policies, other_pod_in(namespace), target, port)
        for elsewhere in set(PLACEMENTS) - {namespace}:
            assert not reachable(policies, prometheus_in(elsewhere), target, port)
    assert not reachable(policies, prometheus_in(namespace), agent, agent.ports["http"])
    assert reachable(policies, pods["controller"], agent, agent.ports["http"])
    assert reachable(policies, pods["test"], controller, controller.ports["http"])


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_the_monitors_scrape_the_ports_the_policies_open_to_prometheus(monitor, tmp_path):
    objects = render_with(
        selectors_for("observability"), tmp_path, **{f"{monitor}.enabled": "true"}
    )
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    kind = monitor[0].upper() + monitor[1:]
    endpoints = "endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints"
    services = {s["metadata"]["name"]: s for s in kinds(objects, "Service")}
    scraped = {}
    for obj in kinds(objects, kind):
        component = obj["metadata"]["labels"]["app.kubernetes.io/component"]
        (endpoint,) = obj["spec"][endpoints]
        name = endpoint["port"]
        if kind == "ServiceMonitor":  # the Service's port names its target container port
            service = services[obj["metadata"]["name"]]
            (port,) = [p for p in service["spec"]["ports"] if p["name"] == name]
            name = port["targetPort"]
        scraped[component] = pods[component].ports[name]

    assert scraped == {
        "agent": pods["agent"].ports["metrics"],
        "controller": pods["controller"].ports["http"],
    }
    for component, port in scraped.items():
        assert reachable(policies, prometheus_in("observability"), pods[component], port)


def test_the_policies_follow_moved_ports(tmp_path):
    objects = render(
        tool("helm"),
        sets={"settings.agent.listen_port": "9500", "settings.agent.metrics_port": "9501"},
    )
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    agent = pods["agent"]

    assert agent.ports == {"http": 9500, "metrics": 9501}
    assert reachable(policies, prometheus_in("monitoring"), agent, 9501)
    assert not reachable(policies, prometheus_in("monitoring"), agent, 9500)
    assert reachable(policies, pods["controller"], agent, 9500)


def test_without_a_metrics_port_the_policies_refuse_to_render():
    """One port for everything would open /v1/snapshot to whoever may scrape."""
    helm_template = [str(tool("helm")), "template", "observer", str(CHART)]
    refused = subprocess.run(
        [*helm_template, "--set", "settings.agent.metrics_port=null"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode != 0
    assert "networkPolicy.enabled needs settings.agent.metrics_port" in refused.stderr


def test_without_policies_one_agent_port_is_scraped():
    sets = {
        "networkPolicy.enabled": "false",
        "settings.agent.metrics_port": "null",
        "serviceMonitor.enabled": "true",
    }
    objects = render(tool("helm"), sets=sets)
    pods = chart_pods(objects)
    (agent_monitor,) = [
        m for m in kinds(objects, "ServiceMonitor") if "agent" in m["metadata"]["name"]
    ]

    assert not kinds(objects, "NetworkPolicy")
    assert pods["agent"].ports == {"http": 9400}
    assert [e["port"] for e in agent_monitor["spec"]["endpoints"]] == ["http"]
    assert reachable([], other_pod_in("team-a"), pods["agent"], 9400)


def test_with_the_inference_probe_on_the_controller_alone_reaches_its_replicas():
    """In a tenant namespace that denies ingress by default, as shared clusters often do:
    the replicas the backend creates (their labels from its manifests) let the controller in,
    on their port only."""
    sets = {
        "settings.controller.tenants[0].name": "team-a",
        "settings.controller.inference.enabled": "true",
        "settings.controller.inference.port": "8080",
    }
    objects = render(tool("helm"), sets=sets)
    site_deny = {
        "metadata": {"name": "default-deny", "namespace": "team-a"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }
    policies, pods = [*kinds(objects, "NetworkPolicy"), site_deny], chart_pods(objects)
    spec = inference_spec(Settings.model_validate(config_of(objects)).controller)
    replica = Pod("observer-inference-1", "team-a", service_labels(spec))

    assert spec.tenant == "team-a" and spec.port == 8080
    assert reachable(policies, pods["controller"], replica, 8080)
    assert not reachable(policies, pods["controller"], replica, 8081)
    assert not reachable(policies, pods["agent"], replica, 8080)
    assert not reachable(policies, prometheus_in("monitoring"), replica, 8080)


def test_the_evaluator_reads_peers_as_the_kubernetes_docs_do():
    """One peer with both selectors is their AND; two peers are an OR; no `from` is anyone."""
    target = Pod("db-0", "prod", {"role": "db"}, {"pg": 5432})
    client_here = Pod("client", "prod", {"role": "client"})
    client_there = Pod("client", "other", {"role": "client"}, namespace_labels={"team": "x"})
    stranger_there = Pod("stranger", "other", {"role": "web"}, namespace_labels={"team": "x"})

    def policy(ingress: list[dict[str, Any]]) -> list[dict[str, Any]]:
        spec = {"podSelector": {"matchLabels": {"role": "db"}}, "ingress": ingress}
        return [{"metadata": {"namespace": "prod"}, "spec": spec}]

    team_x = {"matchLabels": {"team": "x"}}
    clients = {"matchLabels": {"role": "client"}}
    both = policy([{"from": [{"namespaceSelector": team_x, "podSelector": clients}]}])
    either = policy([{"from": [{"namespaceSelector": team_x}, {"podSelector": clients}]}])
    anyone_on_pg = policy([{"ports": [{"port": "pg"}]}])

    assert [
        reachable(both, p, target, 5432) for p in (client_here, client_there, stranger_there)
    ] == [
        False,
        True,
        False,
    ]
    assert [
        reachable(either, p, target, 5432) for p in (client_here, client_there, stranger_there)
    ] == [
        True,
        True,
        True,
    ]
    assert reachable(anyone_on_pg, stranger_there, target, 5432)
    assert not reachable(anyone_on_pg, stranger_there, target, 5433)
    assert not reachable(policy([]), client_here, target, 5432)
