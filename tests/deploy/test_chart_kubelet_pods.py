"""The kubelet's /pods for the agents (agent.podResources.kubeletPods): each agent asks its own
node's kubelet, at the node's IP, with a projected ServiceAccount token allowed `get` on
nodes/pods and nothing else; off by default, when the agent holds no API credential at all."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from observer.settings import load_settings
from tests.deploy.chart import config_of, kinds, one, pod_spec, render, tool
from tests.deploy.test_chart_volumes import mounted_from, refusal

pytestmark = pytest.mark.chart

ENABLED = {"agent.podResources.kubeletPods.enabled": "true"}
NODE_IP = "10.0.3.7"


def agent_settings(objects: list[dict[str, Any]], tmp_path: Path, monkeypatch: Any) -> Any:
    """The agent's settings as its container reads them: the config file and its environment,
    `$(VAR)` expanded as the kubelet does, on a node at NODE_IP."""
    (container,) = pod_spec(one(objects, "DaemonSet"))["containers"]
    given = {"HOST_IP": NODE_IP, "OBSERVER_AGENT__NODE_NAME": "gpu-node-0"}
    for env in container["env"]:
        if "value" in env:
            value = env["value"]
            for name, known in given.items():
                value = value.replace(f"$({name})", known)
            given[env["name"]] = value
    for name, value in given.items():
        if name.startswith("OBSERVER_"):
            monkeypatch.setenv(name, value)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_of(objects)))
    return load_settings(config).agent


def test_an_agent_asks_its_own_nodes_kubelet_with_a_token_it_may_use_for_pods_alone(
    tmp_path, monkeypatch
):
    objects = render(tool("helm"), sets=ENABLED)
    settings = agent_settings(objects, tmp_path, monkeypatch)
    spec = pod_spec(one(objects, "DaemonSet"))

    assert settings.kubelet_pods_url == f"https://{NODE_IP}:10250/pods"
    assert settings.kubelet_ca_file is None  # a kubelet's certificate is self-signed by default
    token, inside = mounted_from(spec, "agent", str(settings.kubelet_token_file))
    assert token["projected"]["sources"][0]["serviceAccountToken"]["path"] == inside
    agent_roles = [
        r for r in kinds(objects, "ClusterRole") if r["metadata"]["name"].endswith("-agent")
    ]
    assert [rule for role in agent_roles for rule in role["rules"]] == [
        {"apiGroups": [""], "resources": ["nodes/pods"], "verbs": ["get"]}
    ]
    account = one(objects, "ServiceAccount", "-agent")["metadata"]
    [binding] = [
        b for b in kinds(objects, "ClusterRoleBinding") if b["roleRef"]["name"].endswith("-agent")
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]


def test_a_cluster_signing_kubelet_certificates_has_them_checked(tmp_path, monkeypatch):
    objects = render(
        tool("helm"), sets={**ENABLED, "agent.podResources.kubeletPods.verifyCertificate": "true"}
    )
    settings = agent_settings(objects, tmp_path, monkeypatch)
    spec = pod_spec(one(objects, "DaemonSet"))

    ca, inside = mounted_from(spec, "agent", str(settings.kubelet_ca_file))
    assert PurePosixPath(inside).name == "ca.crt"
    assert {
        "configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": inside}]}
    } in (ca["projected"]["sources"])


def test_by_default_the_agent_holds_no_credential_and_asks_no_kubelet(tmp_path, monkeypatch):
    objects = render(tool("helm"))
    settings = agent_settings(objects, tmp_path, monkeypatch)
    spec = pod_spec(one(objects, "DaemonSet"))

    assert settings.kubelet_pods_url is None
    assert spec["automountServiceAccountToken"] is False
    assert not [v for v in spec["volumes"] if "projected" in v]
    assert not [
        r for r in kinds(objects, "ClusterRole") if r["metadata"]["name"].endswith("-agent")
    ]


def test_a_kubelet_pods_url_without_the_chart_mounting_its_token_is_refused():
    error = refusal("settings.agent.kubelet_pods_url=https://10.0.3.7:10250/pods")

    assert "agent.podResources.kubeletPods.enabled" in error
