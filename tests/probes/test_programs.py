"""Every probe of the default catalogue runs the observer's own program, `observer probe
...`, from the observer's image on Kubernetes and the node's observer on Slurm; only the
probes about a missing command or image run something else, by design."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from kubernetes import client

from observer import __version__
from observer.backends.kubernetes.manifests import job_manifest
from observer.backends.slurm.script import batch_script
from observer.cli import _parser
from observer.domain import JobRequest
from observer.probes.catalog import GPU_COMM_EXPECTED_GBPS, builtin_catalog
from observer.settings.controller import KubernetesSettings, SlurmSettings

CATALOG = builtin_catalog(gpus_per_node=8)
NOT_OURS = {"fail-command", "fail-image"}  # a command / an image that must not exist
RUNS_A_JOB = sorted(name for name, spec in CATALOG.items() if spec.workload.gpus)


def _request(probe: str) -> JobRequest:
    return JobRequest("run-1", probe, "research", None, CATALOG[probe].workload)


def _container(probe: str) -> dict[str, Any]:
    job = client.ApiClient().sanitize_for_serialization(
        job_manifest(KubernetesSettings(), _request(probe), "j")
    )
    [container] = job["spec"]["template"]["spec"]["containers"]
    return dict(container)


@pytest.mark.parametrize("probe", sorted(set(RUNS_A_JOB) - NOT_OURS))
def test_on_kubernetes_each_probe_runs_observer_probe_from_the_observers_image(probe: str):
    container = _container(probe)

    assert container["image"] == f"gpu-soak-observer:{__version__}"
    assert container["command"][:2] == ["observer", "probe"]


def test_on_kubernetes_the_bad_command_and_image_probes_run_what_does_not_exist():
    assert _container("fail-command")["command"] == ["observer-no-such-command"]
    assert _container("fail-image")["image"] == KubernetesSettings().bad_image


@pytest.mark.parametrize("probe", RUNS_A_JOB)
def test_on_slurm_each_probe_execs_the_configured_observer(probe: str):
    settings = SlurmSettings(observer_program="/opt/observer/venv/bin/observer")

    script = batch_script(_request(probe), settings)

    shebang, line = script.splitlines()
    assert shebang == "#!/bin/bash"
    words = shlex.split(line)
    assert words[0] == "exec"
    if probe in NOT_OURS:
        assert words[1] != "/opt/observer/venv/bin/observer"
    else:
        assert words[1:3] == ["/opt/observer/venv/bin/observer", "probe"]


def test_the_gpu_busy_probe_is_gpu_burn_with_its_memory_and_utilisation():
    busy = _request("gpu-busy")

    args = _container("gpu-busy")["command"]

    assert args[:3] == ["observer", "probe", "gpu-burn"]
    assert args[args.index("--seconds") + 1] == "300"
    assert args[args.index("--memory-gib") + 1] == f"{busy.workload.gpu_memory_gib:g}"
    assert args[args.index("--utilization") + 1] == "100"


def test_the_gpu_comm_probe_holds_a_whole_node_and_runs_gpu_comm_with_the_expected_rates():
    args = _container("gpu-comm")["command"]

    assert args[:3] == ["observer", "probe", "gpu-comm"]
    assert args[3::2] == ["--expect-model"] * len(GPU_COMM_EXPECTED_GBPS)
    assert args[4::2] == [f"{model}={gbps:g}" for model, gbps in GPU_COMM_EXPECTED_GBPS.items()]
    assert CATALOG["gpu-comm"].workload.gpus_per_node == 8


@pytest.mark.parametrize("probe", sorted(set(RUNS_A_JOB) - NOT_OURS))
def test_each_probe_command_line_both_backends_render_parses_through_the_real_cli(probe: str):
    kubernetes = _container(probe)["command"]
    settings = SlurmSettings(observer_program="/opt/observer/venv/bin/observer")
    slurm = shlex.split(batch_script(_request(probe), settings).splitlines()[1])[2:]

    for words in (kubernetes[1:], slurm):
        parsed = _parser().parse_args(words)
        assert (parsed.command, parsed.workload) == ("probe", words[1])
