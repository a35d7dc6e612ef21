"""Every backend's canary writer (Slurm's batch script and the Kubernetes container's command,
both `observer probe log-canary|log-burst`, and the simulated cluster) writes lines the
log-loss detector reads whole: padded to the workload's line size when it asks for one, as
fast as they can be written when unpaced."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client

from observer.backends.kubernetes.manifests import PROGRAM, job_manifest
from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.backends.slurm.script import batch_script
from observer.clock import ManualClock
from observer.detectors.log_loss import analyse
from observer.domain import JobRequest, Workload
from observer.log_readers.base import DeliveredLine
from observer.probes.catalog import builtin_catalog
from observer.settings.controller import KubernetesSettings, SlurmSettings
from tests.support.cli import run_cli

RUN = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
BURST = builtin_catalog(gpus_per_node=8)["log-burst"].workload
Writer = Callable[[Workload], str]


def slurm(workload: Workload) -> str:
    # the observer beside this interpreter, as on a node sharing the controller's venv
    settings = SlurmSettings(observer_program=Path(sys.executable).parent / "observer")
    script = batch_script(JobRequest(RUN, "log-burst", "research", None, workload), settings)
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def kubernetes(workload: Workload) -> str:
    request = JobRequest(RUN, "log-burst", "research", None, workload)
    job = client.ApiClient().sanitize_for_serialization(
        job_manifest(KubernetesSettings(), request, "j")
    )
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][0] == PROGRAM  # the image's observer: this process's here
    done = run_cli(*container["command"][1:], env={e["name"]: e["value"] for e in container["env"]})
    assert done.exit_code == 0, done.stderr
    return done.stdout


def simulated(workload: Workload) -> str:
    clock = ManualClock(T0)
    cluster = SimulatedCluster([NodeSpec("n1", 8)], [TenantSpec("research")], clock)
    job_id = cluster.submit(JobRequest(RUN, "log-burst", "research", None, workload))
    clock.advance(workload.duration_seconds + 1)
    return cluster.logs(job_id)


def delivered(output: str) -> list[DeliveredLine]:
    return [DeliveredLine(text, "output") for text in output.splitlines()]


# The simulator's timestamps have microseconds, the probe program's nanoseconds.
@pytest.mark.parametrize(
    ("writer", "longest_bytes"), [(slurm, 1024), (kubernetes, 1024), (simulated, 1024 - 3)]
)
def test_a_padded_canary_is_read_whole_with_its_lines_at_the_asked_size(
    writer: Writer, longest_bytes: int
) -> None:
    workload = replace(BURST, log_lines=150, duration_seconds=5)

    output = writer(workload)

    sizes = [len(line.encode()) + 1 for line in output.splitlines()]  # with the newline
    assert len(sizes) == 150
    assert max(sizes) == longest_bytes  # three-digit sequence numbers
    assert min(sizes) == longest_bytes - 2  # one-digit ones
    report = analyse(RUN, 150, delivered(output))
    assert report.clean and report.received == 150


@pytest.mark.parametrize("writer", [slurm, kubernetes, simulated])
def test_an_unpadded_canary_is_written_as_before(writer: Writer) -> None:
    workload = replace(BURST, log_lines=20, log_line_bytes=0, duration_seconds=5)

    output = writer(workload)

    assert " pad=" not in output
    report = analyse(RUN, 20, delivered(output))
    assert report.clean and report.received == 20


def test_the_log_burst_writes_past_kubelets_rotation_threshold_in_one_run() -> None:
    output = simulated(BURST)

    assert len(output.encode()) > 10 * 2**20  # containerLogMaxSize's default
    report = analyse(RUN, BURST.log_lines, delivered(output))
    assert report.clean and report.received == 12_000
