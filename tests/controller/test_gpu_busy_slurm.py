"""The gpu-busy probe on the real Slurm runs the real program, `observer probe gpu-burn`, on
nodes whose GPUs are GRES without a driver: the run ends no_gpu (not a failed probe), and
because the scheduler gave it GPUs on a node that claims them, the node is a platform finding
(gpu_unusable, critical)."""

from __future__ import annotations

import getpass
import time
from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.domain import FindingKind, Outcome, Severity
from observer.errors import NO_GPU_EXIT_CODE
from observer.reports.compute.tasks import FAILED_OUTCOMES
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.slurm_harness import slurm_harness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

pytestmark = pytest.mark.slurm


def test_gpu_burn_without_a_driver_is_no_gpu_and_a_finding_on_the_node_that_claims_gpus(
    tmp_path: Path,
) -> None:
    url = migrated_sqlite(tmp_path / "observer.db")
    settings = controller_settings(
        backend="slurm",
        tenants=[{"name": "research", "queue": "gpu"}],
        plan=[{"window": "always", "probe": "gpu-busy", "every_seconds": 2}],
        probes={"gpu-busy": {"duration_seconds": 5}},
        gpus_per_node=4,
        max_probe_gpus=1,  # one run at a time
        follow_interval_seconds=1,
        snapshot_interval_seconds=5,
    )
    with slurm_harness() as slurm, Store(url) as store:
        soak = SimulatedSoak(settings, SystemClock(), store, slurm.backend)
        deadline = time.monotonic() + 90
        while not store.findings(detector="gpu_unusable") and time.monotonic() < deadline:
            soak.run_for(2, lambda: time.sleep(0.5))
        ended = [r for r in store.runs() if r.outcome is not None]
        findings = store.findings(detector="gpu_unusable")
        soak.controller.runner.cancel_all("test over")

    assert ended
    for run in ended:
        assert (run.probe, run.outcome, run.exit_code) == (
            "gpu-busy",
            Outcome.NO_GPU,
            NO_GPU_EXIT_CODE,
        )
        assert run.outcome not in FAILED_OUTCOMES  # not counted as the platform's failure
        # the task record names whom Slurm ran it as and in which partition
        assert (run.user, run.queue) == (getpass.getuser(), "gpu")
    finding = findings[0]
    [run] = [r for r in ended if r.run_id == finding.subject["run_id"]]
    assert finding.kind is FindingKind.EVENT and finding.severity is Severity.CRITICAL
    assert finding.subject == {"node": run.node_names[0], "run_id": run.run_id}
    assert finding.evidence["gpus"] == 1 and finding.evidence["job_id"] == run.job_id
    assert "allocated GPUs" in finding.summary and run.node_names[0] in finding.summary
