"""The agents in a namespace of their own (agent.namespace): every agent object goes there, the
controller finds them by their Service's name in it and alone reaches their /v1/snapshot port,
and the release's namespace then holds only pods that Pod Security `restricted` admits (the
checks of tests/backends/pod_security.py, the API server's); the agent's own pod could never be."""

from __future__ import annotations

import pytest

from tests.backends.pod_security import BASELINE, ENFORCE_LABEL, RESTRICTED, pod_security_refusal
from tests.deploy.chart import config_of, kinds, one, pod_spec, render, tool
from tests.deploy.network_policy import Pod, reachable
from tests.deploy.test_chart_volumes import refusal
from tests.deploy.test_networkpolicy import chart_pods, other_pod_in, prometheus_in

pytestmark = pytest.mark.chart

RELEASE_NAMESPACE = "gpu-soak"  # chart.render's
AGENTS = "observer-agents"
OWN = {
    "agent.namespace.name": AGENTS,
    "agent.namespace.create": "true",
    "agent.podResources.kubeletPods.enabled": "true",
    "serviceMonitor.enabled": "true",
}
AGENT_KINDS = ("DaemonSet", "Service", "ServiceAccount")


def test_every_agent_object_is_in_the_agents_namespace_and_the_controller_finds_them():
    objects = render(tool("helm"), sets=OWN)

    for kind in AGENT_KINDS:
        assert one(objects, kind, "-agent")["metadata"]["namespace"] == AGENTS, kind
    agent_config = [c for c in kinds(objects, "ConfigMap") if c["metadata"]["namespace"] == AGENTS]
    assert [c["metadata"]["name"] for c in agent_config] == [
        v["configMap"]["name"]
        for v in pod_spec(one(objects, "DaemonSet"))["volumes"]
        if "configMap" in v
    ]
    service = one(objects, "Service", "-agent")["metadata"]
    assert config_of(objects)["controller"]["agent_dns_name"] == f"{service['name']}.{AGENTS}.svc"
    [binding] = [
        b for b in kinds(objects, "ClusterRoleBinding") if b["roleRef"]["name"] == service["name"]
    ]
    assert binding["subjects"][0]["namespace"] == AGENTS
    monitor = one(objects, "ServiceMonitor", "-agent")
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [AGENTS]}
    [namespace] = kinds(objects, "Namespace")
    assert namespace["metadata"]["name"] == AGENTS
    assert namespace["metadata"]["labels"][ENFORCE_LABEL] == "privileged"


def test_the_controller_alone_reaches_the_agents_snapshot_port_across_namespaces():
    objects = render(tool("helm"), sets=OWN)
    policies, pods = kinds(objects, "NetworkPolicy"), chart_pods(objects)
    agent, controller = pods["agent"], pods["controller"]
    imposter = Pod("imposter", "elsewhere", dict(controller.labels))  # the controller's labels

    assert agent.namespace == AGENTS and controller.namespace == RELEASE_NAMESPACE
    assert reachable(policies, controller, agent, agent.ports["http"])
    assert not reachable(policies, imposter, agent, agent.ports["http"])
    assert not reachable(policies, other_pod_in(AGENTS), agent, agent.ports["http"])
    assert reachable(policies, prometheus_in("monitoring"), agent, agent.ports["metrics"])
    assert not reachable(policies, other_pod_in(AGENTS), agent, agent.ports["metrics"] + 1)


def test_the_release_namespace_can_enforce_restricted_once_the_agents_have_their_own():
    objects = render(tool("helm"), sets=OWN)
    workloads = [o for o in objects if o["kind"] in ("Deployment", "DaemonSet", "Pod")]
    here = [o for o in workloads if o["metadata"]["namespace"] == RELEASE_NAMESPACE]

    assert {o["kind"] for o in here} == {"Deployment", "Pod"}
    for obj in here:
        assert pod_security_refusal(RESTRICTED, obj["metadata"]["name"], pod_spec(obj)) is None
    agent = one(objects, "DaemonSet")
    assert pod_security_refusal(BASELINE, agent["metadata"]["name"], pod_spec(agent)) is not None


def test_creating_the_agents_namespace_needs_its_name():
    assert "agent.namespace.create needs agent.namespace.name" in refusal(
        "agent.namespace.create=true"
    )
