"""The chart's values for the probe pods and the agent's snapshot reach the observer: rendered
into the ConfigMap, loaded as the processes load it, and built into the probe Job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from observer.backends.kubernetes.manifests import job_manifest
from observer.domain import JobRequest, Workload
from observer.settings import Settings, load_settings
from tests.deploy.chart import config_of, render, tool

pytestmark = pytest.mark.chart

VALUES = """
settings:
  agent:
    expose_command_lines: true
  controller:
    tenants: [{name: team-a}]
    kubernetes:
      run_as_user: 2000
      run_as_group: 2000
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      node_selector: {soak: "true"}
      priority_class_name: soak-probes
      image_pull_secrets: [registry]
"""


@pytest.fixture(scope="module")
def helm() -> Path:
    return tool("helm")


def loaded(objects: list[dict[str, Any]], tmp_path: Path) -> Settings:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(config_of(objects)))
    return load_settings(config)


def probe_pod(settings: Settings) -> dict[str, Any]:
    request = JobRequest("run-1", "short", "team-a", None, Workload(gpus_per_node=1))
    job = job_manifest(settings.controller.kubernetes, request, "observer-short-0123456789")
    body: dict[str, Any] = client.ApiClient().sanitize_for_serialization(job)
    spec: dict[str, Any] = body["spec"]["template"]["spec"]
    return spec


def test_probe_placement_and_identity_values_reach_the_probe_pod(
    helm: Path, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(VALUES)

    spec = probe_pod(loaded(render(helm, values), tmp_path))

    assert (spec["securityContext"]["runAsUser"], spec["securityContext"]["runAsGroup"]) == (
        2000,
        2000,
    )
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert spec["nodeSelector"] == {"soak": "true"}
    assert spec["priorityClassName"] == "soak-probes"
    assert spec["imagePullSecrets"] == [{"name": "registry"}]


def test_by_default_probes_run_as_65532_and_agents_hide_command_lines(
    helm: Path, tmp_path: Path
) -> None:
    settings = loaded(render(helm), tmp_path)

    assert settings.agent.expose_command_lines is False
    spec = probe_pod(settings)
    assert spec["securityContext"]["runAsUser"] == 65532
    assert "tolerations" not in spec and "priorityClassName" not in spec


def test_the_agents_command_lines_are_exposed_only_when_the_values_say_so(
    helm: Path, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(VALUES)

    assert loaded(render(helm, values), tmp_path).agent.expose_command_lines is True


def test_probe_pods_run_the_observers_own_image_unless_the_site_names_one(
    helm: Path, tmp_path: Path
) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(VALUES + "image: {repository: registry.example/observer, tag: '1.2.3'}\n")
    own = probe_pod(loaded(render(helm, values), tmp_path))
    site = tmp_path / "site.yaml"
    site.write_text(
        "settings:\n  controller:\n    tenants: [{name: team-a}]\n"
        "    kubernetes: {image: site/probe:7}\n"
    )
    chosen = probe_pod(loaded(render(helm, site), tmp_path))

    [container] = own["containers"]
    assert container["image"] == "registry.example/observer:1.2.3"
    assert container["command"][:3] == ["observer", "probe", "sleep"]
    assert chosen["containers"][0]["image"] == "site/probe:7"
