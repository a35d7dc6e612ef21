"""How the agent asks the node's container runtime for NVML (agent.gpuAccess), each way the
NVIDIA runtime is asked: the variable, the volume-mounts device list, a CDI annotation; never by
requesting a GPU. Each is rehearsed (tests/deploy/rehearsal.py plays the runtime by the same
rules) and its agent must read NVML, not merely be ready."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.chart import one, pod_spec, render, tool
from tests.deploy.rehearsal import (
    NVIDIA_DEVICE_LIST,
    ROOT_PREFIX,
    Rehearsal,
    asks_for_gpus,
    cluster_for,
    template_annotations,
)

pytestmark = [pytest.mark.chart, pytest.mark.fake_nvml]

MODES = ["env", "volumeMounts", "cdi"]


def agent_of(mode: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    objects = render(tool("helm"), sets={"agent.gpuAccess": mode})
    daemonset = one(objects, "DaemonSet")
    (container,) = pod_spec(daemonset)["containers"]
    return objects, daemonset, container


def ways_asked(daemonset: dict[str, Any], container: dict[str, Any]) -> set[str]:
    env = {e["name"] for e in container["env"]}
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    return (
        ({"env"} if "NVIDIA_VISIBLE_DEVICES" in env else set())
        | ({"volumeMounts"} if any(m.startswith(NVIDIA_DEVICE_LIST) for m in mounts) else set())
        | (
            {"cdi"}
            if any(k.startswith("cdi.k8s.io/") for k in template_annotations(daemonset))
            else set()
        )
    )


def rehearse(objects: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix=ROOT_PREFIX) as name:
        root = Path(name)
        root.chmod(0o755)
        with cluster_for(objects, root) as cluster:
            Rehearsal(objects, root, cluster).run()


@pytest.mark.parametrize("mode", MODES)
def test_the_agent_asks_for_nvml_one_way_and_requests_no_gpu(mode):
    _, daemonset, container = agent_of(mode)

    assert ways_asked(daemonset, container) == {mode}
    assert asks_for_gpus(template_annotations(daemonset), container)
    assert "nvidia.com/gpu" not in str(container.get("resources", {}))


@pytest.mark.parametrize("mode", ["volumeMounts", "cdi"])
def test_each_way_gives_a_rehearsed_agent_its_nvml(mode):
    objects, _, _ = agent_of(mode)
    rehearse(objects)


def test_an_agent_the_runtime_gives_no_driver_fails_the_rehearsal():
    objects, daemonset, _ = agent_of("cdi")
    del daemonset["spec"]["template"]["metadata"]["annotations"]["cdi.k8s.io/observer-agent"]

    with pytest.raises(AssertionError, match="is blind"):
        rehearse(objects)
