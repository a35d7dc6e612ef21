"""munged stopped on the machine of the local Slurm (every daemon and client of the cluster
authenticates through it), then started again: what the agent's owner source, the
controller's backend and its /healthz say is Slurm's own word, munge, and the probe it
refused is a platform outage, not a configuration to fix."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from observer.clock import SystemClock
from observer.domain import Outcome, ProbeRun
from observer.errors import BackendError, OwnerSourceError
from observer.ownership.slurmd import SlurmdOwners
from observer.reports.compute.causes import Cause, classify
from observer.settings.agent import AgentSettings
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmCluster, SlurmHarness, slurm_harness
from tests.faults.daemon import controller, slurm_config, stop
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)


def test_a_munge_outage_reads_as_munge_everywhere_and_as_a_platform_outage(
    slurm_cluster: SlurmCluster, tmp_path: Path
):
    url = f"sqlite:///{tmp_path / 'observer.db'}"
    with slurm_harness(slurm_cluster) as slurm:
        agent = SlurmdOwners(
            "n1",
            dict,
            slurm_conf=slurm.slurm_conf,
            commands_dir=slurm.cluster.commands_dir,
            timeout_seconds=AgentSettings().owners_timeout_seconds,  # the agent's default
            clock=SystemClock(),
        )
        with controller(slurm_config(tmp_path, slurm, url), tmp_path / "controller.log") as ctl:
            wait_until(
                lambda: ctl.get("/healthz").json()["status"] == "ok",
                "the controller was not ok at the start",
                seconds=60,
                poll_seconds=0.5,
            )
            try:
                _stop_munge(slurm.cluster)
                with pytest.raises(OwnerSourceError) as owners:
                    agent.read()
                with pytest.raises(BackendError) as snapshot:
                    slurm.backend.snapshot()
                health = wait_until(
                    lambda: _failing(ctl.get("/healthz", timeout_seconds=5).json()),
                    "/healthz did not name the scheduler failing",
                    seconds=60,
                    poll_seconds=0.5,
                )
                refused = wait_until(
                    lambda: _refused(url), "no probe was refused", seconds=60, poll_seconds=0.5
                )
            finally:
                _start_munge(slurm)
            stop(ctl)

    assert health is not None and refused is not None
    for said in (str(owners.value), str(snapshot.value), health["errors"]["scheduler"]):
        assert "Munge encode failed" in said, said
    # each of its calls now takes munge's 2 s: the follow loop may be stale beside it
    assert "scheduler failing" in health["status"].split(", "), health["status"]
    assert refused.message is not None and "Munge encode failed" in refused.message
    classified = classify(refused, [], [])
    assert classified is not None and classified.cause is Cause.PLATFORM_OUTAGE


def _failing(health: dict[str, Any]) -> dict[str, Any] | None:
    return health if health["parts"]["scheduler"] == "failing" else None


def _refused(url: str) -> ProbeRun | None:
    with Store(url) as store:
        return next((r for r in store.runs() if r.outcome is Outcome.REJECTED), None)


def _stop_munge(cluster: SlurmCluster) -> None:
    os.kill(int(cluster.munged_pid.read_text()), signal.SIGTERM)
    wait_until(
        lambda: not _munge_answers(cluster), "munged did not stop", seconds=30, poll_seconds=0.2
    )


def _start_munge(slurm: SlurmHarness) -> None:
    """As the up script starts it; then until every node responds again. slurmctld marks the
    nodes whose ping failed meanwhile as not responding until its next ping (a third of
    SlurmdTimeout later); a reconfigure has them register at once."""
    if not _munge_answers(slurm.cluster):
        subprocess.run(
            slurm.cluster.installed("runuser", "-u", "munge", "--", "/usr/sbin/munged"), check=True
        )
    wait_until(
        lambda: _munge_answers(slurm.cluster),
        "munged did not answer again",
        seconds=30,
        poll_seconds=0.2,
    )
    slurm.cli("scontrol", "reconfigure")
    wait_until(
        lambda: _responding(slurm),
        "a node did not respond after munge",
        seconds=120,
        poll_seconds=1,
    )


def _responding(slurm: SlurmHarness) -> bool:
    states = slurm.cli("sinfo", "-N", "-h", "-o", "%t").split()
    return len(states) >= slurm.nodes and not any(s.endswith("*") for s in states)


def _munge_answers(cluster: SlurmCluster) -> bool:
    done = subprocess.run(cluster.installed("munge", "-n"), capture_output=True, check=False)
    return done.returncode == 0
