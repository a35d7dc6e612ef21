"""The agent on a node of the real Slurm with `agent.owners: auto` (no kubelet, scontrol on
PATH): it asks slurmd who runs there. A job whose background process escapes it (setsid) and
keeps GPU memory after the job ends opens `unreleased_memory` naming the job and its end; a
job that ends with its processes opens nothing. The GPUs are the stand-in NVML's, listing the
real escaped process; /proc is the host's."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.agent.main import build_agent
from observer.agent.tick import NodeAgent
from observer.clock import SystemClock
from observer.domain import Finding
from observer.settings import Settings
from tests.backends.slurm_harness import SlurmHarness, slurm_harness
from tests.gpu import fake_nvml

pytestmark = [pytest.mark.slurm, pytest.mark.fake_nvml, pytest.mark.timeout(600)]

NODE = "n2"
GRACE_SECONDS = 2
GIB = 2**30


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmHarness]:
    with slurm_harness() as harness:
        monkeypatch.setenv("SLURM_CONF", str(harness.slurm_conf))
        yield harness


def _agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[NodeAgent, fake_nvml.FakeNvml]:
    nvml = fake_nvml.install(fake_nvml.require_library(), tmp_path, monkeypatch)
    nvml.set([fake_nvml.FakeNvmlGpu() for _ in range(4)])
    settings = Settings.model_validate(
        {
            "agent": {
                "node_name": NODE,
                "nvml_library_path": nvml.library,
                "owners": "auto",
                "pod_resources_socket": tmp_path / "no-kubelet.sock",
                "owners_interval_seconds": 0.5,
            },
            "detectors": {"node": {"grace_seconds": GRACE_SECONDS}},
        }
    )
    return build_agent(settings, SystemClock(), CollectorRegistry()), nvml


def _submit(slurm: SlurmHarness, script: str) -> str:
    out = slurm.cli(
        "sbatch",
        "--parsable",
        "-A",
        "research",
        "-w",
        NODE,
        "--gres=gpu:1",
        "-o",
        str(slurm.settings.output_dir / "job-%j.out"),
        "--wrap",
        script,
    )
    return out.strip().split(";")[0]


def _until(
    agent: NodeAgent, seen: list[Finding], done: Callable[[], object], seconds: float
) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, seen
        seen += agent.tick()
        time.sleep(0.25)


def test_a_process_that_escapes_its_job_and_keeps_gpu_memory_is_unreleased_memory(
    slurm: SlurmHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, nvml = _agent(tmp_path, monkeypatch)
    pid_file = slurm.settings.output_dir / "escaped.pid"
    # The job starts a process in a session of its own (Slurm's linuxproc tracking loses
    # it), then ends; the process lives on with SLURM_JOB_ID in its environment.
    job = _submit(
        slurm, f"setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {pid_file}; sleep 4"
    )
    seen: list[Finding] = []
    try:
        _until(agent, seen, pid_file.exists, 60)
        pid = int(pid_file.read_text())
        _until(agent, seen, lambda: _assigned(agent, job) is not None, 30)
        gpu = _assigned(agent, job)
        assert gpu is not None
        gpus = [fake_nvml.FakeNvmlGpu() for _ in range(4)]
        gpus[gpu] = fake_nvml.FakeNvmlGpu(processes=((pid, 4 * GIB),), memory_used_bytes=5 * GIB)
        nvml.set(gpus)
        _until(agent, seen, lambda: job not in slurm.cli("squeue", "-h", "-o", "%i"), 60)
        ended_by = time.time()
        _until(agent, seen, lambda: _open(agent, "unreleased_memory"), GRACE_SECONDS + 10)
        finding = _open(agent, "unreleased_memory")
        assert finding is not None
        assert str(job) in finding.summary + str(finding.evidence)
        assert finding.opened_at.timestamp() <= ended_by + GRACE_SECONDS + 10
        assert "ended" in str(finding.evidence)

        os.kill(pid, signal.SIGKILL)
        nvml.set([fake_nvml.FakeNvmlGpu() for _ in range(4)])
        _until(agent, seen, lambda: _open(agent, "unreleased_memory") is None, 10)
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
        agent.close()


def test_a_job_that_ends_with_its_processes_opens_nothing(
    slurm: SlurmHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, _ = _agent(tmp_path, monkeypatch)
    job = _submit(slurm, "sleep 3")
    seen: list[Finding] = []
    try:
        _until(agent, seen, lambda: _assigned(agent, job) is not None, 60)
        _until(agent, seen, lambda: job not in slurm.cli("squeue", "-h", "-o", "%i"), 60)
        for _ in range(int(GRACE_SECONDS / 0.25) + 8):
            seen += agent.tick()
            time.sleep(0.25)
    finally:
        agent.close()
    assert [f for f in seen if f.is_open and f.detector != "orphan_process"] == []


def _assigned(agent: NodeAgent, job: str) -> int | None:
    """The NVML index of the GPU the agent's allocation layer says `job` holds."""
    snap = agent.snapshot()
    if snap is None or snap.allocation is None:
        return None
    for a in snap.allocation.assignments:
        if a.owner.id == job:
            return next(g.index for g in snap.gpus if g.identity and g.identity.uuid == a.gpu_uuid)
    return None


def _open(agent: NodeAgent, detector: str) -> Finding | None:
    snap = agent.snapshot()
    assert snap is not None
    return next((f for f in snap.findings if f.detector == detector and f.is_open), None)
