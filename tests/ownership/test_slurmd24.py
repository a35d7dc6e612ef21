"""SlurmdOwners on a node of the real Slurm 24.11 (deploy/local/infra/slurm24-up.sh, through its
chroot's programs): a running job is listed with the GPUs Slurm gave it, at no slurmctld request
once known, and leaves the listing when it ends."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from observer.clock import SystemClock
from observer.ownership.slurmd import SlurmdOwners
from tests.backends.slurm24_harness import slurm24_cluster
from tests.ownership.sdiag import counted_since, requests
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slurm24

UUIDS = {i: f"GPU-{i}1111111-2222-3333-4444-555555555555" for i in range(4)}


def test_a_job_on_a_24_11_node_is_listed_with_its_gpus_then_ends():
    with slurm24_cluster() as slurm:
        job = slurm.cli(
            "sbatch", "--parsable", "-w", "n1,n3", "-N", "2", "--gres=gpu:2",
            "-o", "/dev/null", "--wrap", "srun sleep 60",
        ).strip()  # fmt: skip
        try:
            source = SlurmdOwners(
                "n3",
                lambda: UUIDS,
                slurm_conf=None,  # the chroot's programs carry their own
                commands_dir=slurm.commands_dir,
                timeout_seconds=20,
                clock=SystemClock(),
            )
            settle(lambda: job in source.pids().values())
            assert source.read().gpus == {job: {UUIDS[0], UUIDS[1]}}

            known = requests(slurm.cli("sdiag"))
            for _ in range(3):
                assert source.read().running == {job}
            assert counted_since(known, requests(slurm.cli("sdiag"))) == {}

            slurm.cli("scancel", job)
            settle(lambda: source.read().running == frozenset())
        finally:  # an ended job's scancel fails: its word is not needed
            subprocess.run([slurm.commands_dir / "scancel", job], capture_output=True, check=False)


def settle(until: Callable[[], object]) -> None:
    wait_until(until, "Slurm 24.11 did not get there within 30 s", seconds=30, poll_seconds=0.2)
