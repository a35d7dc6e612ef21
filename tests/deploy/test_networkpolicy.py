"""Who may reach the agents and the controller, as the rendered NetworkPolicies decide it for
the rendered pods: the policies' selectors are evaluated against the labels the DaemonSet,
the Deployment and the test Pod really carry, as Kubernetes evaluates them."""

from __future__ import annotations

from dataclasses import dataclass, field
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
RELEASE_NAMESPACE = "gpu-soak"
METADATA_NAME = "kubernetes.io/metadata.name"  # every namespace carries its name as this label


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: dict[str, str]
    namespace_labels: dict[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = ()


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector's verdict: every matchLabels pair and every matchExpression."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        verdict = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not verdict:
            return False
    return True


def peer_admits(peer: dict[str, Any], policy_namespace: str, source: Pod) -> bool:
    namespaces = peer.get("namespaceSelector")
    if namespaces is None:
        in_namespace = source.namespace == policy_namespace
    else:
        in_namespace = selects(namespaces, source.namespace_labels)
    return in_namespace and selects(peer.get("podSelector", {}), source.labels)


def reachable(policies: list[dict[str, Any]], source: Pod, target: Pod, port: int) -> bool:
    """Ingress to `target` on `port` from `source`: open when no policy isolates the target,
    else when a rule of one of the policies that select it admits the source and the port."""
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == target.namespace
        and "Ingress" in p["spec"]["policyTypes"]
        and selects(p["spec"]["podSelector"], target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            ports = [p["port"] for p in rule.get("ports", [])]
            peers = rule.get("from")
            port_ok = not ports or port in ports
            peer_ok = peers is None or any(
                peer_admits(peer, policy["metadata"]["namespace"], source) for peer in peers
            )
            if port_ok and peer_ok:
                return True
    return False


def chart_pods(objects: list[dict[str, Any]]) -> dict[str, Pod]:
    """The pods the rendered workloads make, by component (agent, controller, test)."""
    pods = {}
    for obj in objects:
        if obj["kind"] not in ("DaemonSet", "Deployment", "Pod"):
            continue
        meta = obj["metadata"] if obj["kind"] == "Pod" else obj["spec"]["template"]["metadata"]
        ports = tuple(
            port["containerPort"]
            for container in pod_spec(obj)["containers"]
            for port in container.get("ports", [])
        )
        labels = meta["labels"]
        namespace = obj["metadata"]["namespace"]
        pods[labels["app.kubernetes.io/component"]] = Pod(
            obj["metadata"]["name"], namespace, labels, {METADATA_NAME: namespace}, ports
        )
    return pods


def prometheus(values: dict[str, Any], namespace: str | None = None) -> Pod:
    """A pod with the labels the values select Prometheus by, in the namespace they select
    (or in another one). A null label is one the values drop from the chart's defaults."""

    def labels(selector: str) -> dict[str, str]:
        matching = values["networkPolicy"]["prometheus"][selector]["matchLabels"]
        return {key: value for key, value in matching.items() if value is not None}

    namespace_labels = (
        labels("namespaceSelector") if namespace is None else {METADATA_NAME: namespace}
    )
    return Pod(
        "prometheus-0",
        namespace_labels.get(METADATA_NAME, "observability"),
        labels("podSelector"),
        namespace_labels,
    )


def default_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def tenant_pod() -> Pod:
    return Pod("train-0", "team-a", {"app": "train"}, {METADATA_NAME: "team-a"})


@pytest.mark.parametrize("values", WITH_AGENTS)
def test_only_prometheus_and_the_controller_reach_the_agents(values):
    objects = render(tool("helm"), *([values] if values else []))
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    agent = pods["agent"]
    (port,) = agent.ports
    scraper = prometheus(default_values())

    assert reachable(policies, scraper, agent, port)
    assert reachable(policies, pods["controller"], agent, port)
    assert not reachable(policies, pods["test"], agent, port)
    assert not reachable(policies, tenant_pod(), agent, port)
    assert not reachable(policies, prometheus(default_values(), "team-a"), agent, port)
    assert not reachable(policies, scraper, agent, port + 1)


@pytest.mark.parametrize("values", VALUE_SETS)
def test_only_prometheus_and_the_helm_test_reach_the_controller(values):
    objects = render(tool("helm"), *([values] if values else []))
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    controller = pods["controller"]
    (port,) = controller.ports
    scraper = prometheus(default_values())

    assert reachable(policies, scraper, controller, port)
    assert reachable(policies, pods["test"], controller, port)
    assert not reachable(policies, tenant_pod(), controller, port)
    if "agent" in pods:
        assert not reachable(policies, pods["agent"], controller, port)
    assert not reachable(policies, tenant_pod(), pods["test"], port)


def test_the_policies_follow_a_moved_port_and_other_prometheus_selectors(tmp_path):
    ours = {
        "networkPolicy": {
            "prometheus": {
                # Helm merges maps: null drops the default's key
                "namespaceSelector": {
                    "matchLabels": {"team": "observability", METADATA_NAME: None}
                },
                "podSelector": {
                    "matchLabels": {"app": "prometheus-server", "app.kubernetes.io/name": None}
                },
            }
        },
        "settings": {"agent": {"listen_port": 9500}},
    }
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(ours))
    objects = render(tool("helm"), values)
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    agent = pods["agent"]
    assert agent.ports == (9500,)

    assert reachable(policies, prometheus(ours), agent, 9500)
    assert not reachable(policies, prometheus(default_values()), agent, 9500)


def test_no_policy_when_disabled():
    objects = render(tool("helm"), sets={"networkPolicy.enabled": "false"})
    assert not kinds(objects, "NetworkPolicy")
    pods = chart_pods(objects)
    assert reachable([], tenant_pod(), pods["agent"], pods["agent"].ports[0])


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
    replica = Pod("observer-inference-1", "team-a", service_labels(spec), {METADATA_NAME: "team-a"})

    assert spec.tenant == "team-a" and spec.port == 8080
    assert reachable(policies, pods["controller"], replica, 8080)
    assert not reachable(policies, pods["controller"], replica, 8081)
    assert not reachable(policies, pods["agent"], replica, 8080)
    assert not reachable(policies, prometheus(default_values()), replica, 8080)
