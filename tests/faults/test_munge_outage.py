"""munged stopped on the machine of the local Slurm (every daemon and client of the cluster
authenticates through it), then started again: what the agent's owner source, the
controller's backend and a probe's submission say is Slurm's own word, munge, and the
refused probe is a platform outage, not a configuration to fix."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.domain import JobRequest, Outcome, Workload
from observer.errors import BackendError, OwnerSourceError, ProbeError
from observer.ownership.slurmd import SlurmdOwners
from observer.reports.compute.causes import Cause, classify
from observer.settings.agent import AgentSettings
from tests.backends.slurm_harness import SlurmHarness, slurm_harness
from tests.reports.builders import run
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

MUNGED = Path("/run/munge/munged.pid")


def test_a_munge_outage_reads_as_munge_everywhere_and_as_a_platform_outage(tmp_path: Path):
    with slurm_harness() as slurm:
        agent = SlurmdOwners(
            "n1",
            dict,
            slurm_conf=slurm.slurm_conf,
            commands_dir=None,
            # the agent's own deadline, shorter than Slurm's retries
            timeout_seconds=AgentSettings().owners_timeout_seconds,
            clock=SystemClock(),
        )
        request = JobRequest(
            run_id=uuid.uuid4().hex,
            probe="short",
            tenant=slurm.tenants[0],
            queue=slurm.queue,
            workload=Workload(gpus_per_node=1, duration_seconds=1),
        )
        try:
            _stop_munge()
            with pytest.raises(OwnerSourceError) as owners:
                agent.read()
            with pytest.raises(BackendError) as snapshot:
                slurm.backend.snapshot()
            with pytest.raises((ProbeError, BackendError)) as submitted:
                slurm.backend.submit(request)
        finally:
            _start_munge(slurm)

    for failed in (owners.value, snapshot.value, submitted.value):
        assert "munge" in str(failed).lower(), str(failed)
    assert "Unspecified error" not in str(snapshot.value) or "Munge" in str(snapshot.value)
    # as the controller records a refusal (runs.py): reason Rejected, the words as message
    refused = run(outcome=Outcome.REJECTED, reason="Rejected", message=str(submitted.value))
    classified = classify(refused, [], [])
    assert classified is not None and classified.cause is Cause.PLATFORM_OUTAGE


def _stop_munge() -> None:
    os.kill(int(MUNGED.read_text()), signal.SIGTERM)
    wait_until(lambda: not _munge_answers(), "munged did not stop", seconds=30, poll_seconds=0.2)


def _start_munge(slurm: SlurmHarness) -> None:
    """As slurm-up.sh starts it; then until the cluster answers again."""
    if not _munge_answers():
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
    wait_until(_munge_answers, "munged did not answer again", seconds=30, poll_seconds=0.2)
    env = {**os.environ, "SLURM_CONF": str(slurm.slurm_conf)}

    def cluster_answers() -> bool:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True, check=False
        )
        return done.returncode == 0 and not {"down*", "idle*", "mix*", "alloc*"} & set(
            done.stdout.split()
        )

    wait_until(cluster_answers, "Slurm did not answer after munge", seconds=60, poll_seconds=1)
    time.sleep(1)


def _munge_answers() -> bool:
    return subprocess.run(["munge", "-n"], capture_output=True, check=False).returncode == 0
