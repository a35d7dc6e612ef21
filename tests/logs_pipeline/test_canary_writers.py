"""Every backend's canary writer (Slurm's batch script, the Kubernetes container's script,
the simulated cluster) writes lines the log-loss detector reads whole: padded to the
workload's line size when it asks for one, as fast as they can be written when unpaced."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from observer.backends.kubernetes.manifests import CANARY_SCRIPT, probe_env
from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.backends.slurm.script import batch_script
from observer.clock import ManualClock
from observer.detectors.log_loss import analyse
from observer.domain import JobRequest, Workload
from observer.logs_pipeline.base import DeliveredLine
from observer.probes.catalog import builtin_catalog

RUN = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
BURST = builtin_catalog(gpus_per_node=8)["log-burst"].workload
Writer = Callable[[Workload], str]


def slurm(workload: Workload) -> str:
    script = batch_script(JobRequest(RUN, "log-burst", "research", None, workload), 64)
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def kubernetes(workload: Workload) -> str:
    env = {
        "PATH": os.environ["PATH"],
        **probe_env(JobRequest(RUN, "log-burst", "research", None, workload)),
    }
    return subprocess.run(
        ["/bin/sh", "-c", CANARY_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def simulated(workload: Workload) -> str:
    clock = ManualClock(T0)
    cluster = SimulatedCluster([NodeSpec("n1", 8)], [TenantSpec("research")], clock)
    job_id = cluster.submit(JobRequest(RUN, "log-burst", "research", None, workload))
    clock.advance(workload.duration_seconds + 1)
    return cluster.logs(job_id)


def delivered(output: str) -> list[DeliveredLine]:
    return [DeliveredLine(text, "output") for text in output.splitlines()]


# The simulator's timestamps have microseconds, the shells' `date +%s.%N` nanoseconds.
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
