"""SlurmdOwners against each real Slurm release, 22.05 and 24.11 (deploy/local/infra/slurm-up.sh,
slurm24-up.sh: nodes n1..n3, 4 GPUs each declared in gres.conf as fakedev/nvidia[0-3],
proctrack/linuxproc): the jobs it
lists on a node are the ones Slurm runs there, with the GPUs Slurm gave them; once it knows
them it asks slurmctld nothing (sdiag's counts); and every way of failing to ask is one
OwnerSourceError that says which command failed and why."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.domain import NO_OWNER, Owner, OwnerKind, OwnerPhase
from observer.errors import OwnerSourceError
from observer.ownership.procfs import ProcFs
from observer.ownership.slurmd import SlurmdOwners
from observer.ownership.tracked import TrackedOwners
from tests.backends.slurm_harness import SlurmCluster, SlurmHarness
from tests.ownership.sdiag import counted_since, requests
from tests.support.net import free_port

UUIDS = {i: f"GPU-{i}1111111-2222-3333-4444-555555555555" for i in range(4)}


def owners(
    cluster: SlurmCluster,
    node: str = "n2",
    slurm_conf: Path | None = None,
    commands_dir: Path | None = None,
    timeout_seconds: float = 20.0,
) -> SlurmdOwners:
    """The node's owner source as an agent there builds it for `cluster`, or with the given
    slurm.conf or commands directory."""
    return SlurmdOwners(
        node,
        lambda: UUIDS,
        slurm_conf=slurm_conf or cluster.slurm_conf,
        commands_dir=commands_dir or cluster.commands_dir,
        timeout_seconds=timeout_seconds,
        clock=SystemClock(),
    )


def submit(slurm: SlurmHarness, node: str, gpus: int, seconds: int) -> str:
    return slurm.cli(
        "sbatch", "--parsable", "-A", "research", "-w", node, f"--gres=gpu:{gpus}",
        "-o", "/dev/null", "--wrap", f"sleep {seconds}",
    ).strip()  # fmt: skip


def running(slurm: SlurmHarness, *job_ids: str) -> bool:
    states = slurm.cli("squeue", "-h", "-o", "%i %T", "-j", ",".join(job_ids)).split()
    return states[1::2] == ["RUNNING"] * len(job_ids)


def test_a_job_is_listed_on_its_node_with_its_gpus_until_it_ends(slurm: SlurmHarness):
    short = submit(slurm, "n2", gpus=2, seconds=3)
    elsewhere = submit(slurm, "n1", gpus=1, seconds=60)
    slurm.settle(lambda: running(slurm, short, elsewhere), 20)
    source = owners(slurm.cluster)
    slurm.settle(lambda: bool(source.pids()), 10)  # slurmstepd starts the script a moment later

    before = time.time()
    reading = source.read()

    assert reading.running == {short}  # the job on n1 is not n2's
    # an idle node gives the first GPUs in gres.conf order
    assert reading.gpus == {short: {UUIDS[0], UUIDS[1]}}
    assert reading.allocatable == frozenset(UUIDS.values())
    assert before <= reading.at.timestamp() <= time.time()

    slurm.settle(lambda: short not in source.read().running, 30)
    assert source.read().gpus == {}
    assert owners(slurm.cluster, node="n1").read().running == {elsewhere}


def test_the_process_of_a_running_job_is_its_and_running_until_the_job_ends(slurm: SlurmHarness):
    job = submit(slurm, "n2", gpus=1, seconds=60)
    slurm.settle(lambda: running(slurm, job), 20)
    source = owners(slurm.cluster)
    slurm.settle(lambda: job in source.pids().values(), 10)
    directory = TrackedOwners(source, interval_seconds=0)
    proc = ProcFs()
    # proctrack/linuxproc, as this cluster runs: no cgroup names the job, its environ does
    # (the job's own first process: one of an earlier job may still be ending on the node)
    inside = proc.inspect(min(pid for pid, of in source.pids().items() if of == job))
    outside = subprocess.Popen(["sleep", "60"])  # started on the node, outside Slurm
    stray = proc.inspect(outside.pid)
    assert inside is not None and stray is not None
    owner = inside.owner

    try:
        directory.refresh(datetime.now(UTC))
        assert owner == Owner(OwnerKind.SLURM_JOB, job)
        assert directory.state(owner).phase is OwnerPhase.RUNNING
        assert stray.owner == NO_OWNER

        slurm.cli("scancel", job)
        slurm.settle(lambda: not source.pids(), 30)
        directory.refresh(datetime.now(UTC))
        assert directory.state(owner).phase is OwnerPhase.ENDED
    finally:
        outside.kill()
        outside.wait()


def test_once_its_jobs_are_known_the_node_asks_slurmctld_nothing(slurm: SlurmHarness):
    source = owners(slurm.cluster)
    source.read()  # at start: the node's GPUs
    job = submit(slurm, "n2", gpus=2, seconds=60)
    slurm.settle(lambda: bool(source.pids()), 20)

    before = requests(slurm.cli("sdiag"))
    assert source.read().running == {job}
    known = requests(slurm.cli("sdiag"))
    for _ in range(5):
        assert source.read().gpus == {job: {UUIDS[0], UUIDS[1]}}
    steady = counted_since(known, requests(slurm.cli("sdiag")))

    named = counted_since(before, known)
    assert named["REQUEST_JOB_INFO_SINGLE"] == 1  # the new job, once
    assert "REQUEST_JOB_INFO" not in named  # never the queue
    assert steady == {}


def test_listpids_names_the_job_of_each_process_slurmd_tracks(slurm: SlurmHarness):
    job = submit(slurm, "n2", gpus=1, seconds=60)
    slurm.settle(lambda: running(slurm, job), 20)
    source = owners(slurm.cluster)
    slurm.settle(lambda: bool(source.pids()), 10)  # slurmstepd starts the script a moment later

    pids = source.pids()

    assert set(pids.values()) == {job}
    for pid in pids:  # what each process's own environment says
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"SLURM_JOB_ID={job}".encode() in environ
    assert owners(slurm.cluster, node="n3").pids() == {}


def test_a_node_slurm_does_not_know_fails_rather_than_reading_as_idle(slurm_cluster: SlurmCluster):
    source = owners(slurm_cluster, node="n9")

    with pytest.raises(OwnerSourceError, match=r"scontrol show node n9 .*Node n9 not found"):
        source.read()
    with pytest.raises(OwnerSourceError, match="scontrol listpids"):
        source.pids()


def test_a_bad_slurm_conf_fails_with_slurms_one_line_reason(slurm: SlurmHarness):
    bad = slurm.settings.output_dir / "slurm.conf"  # where 24.11's chroot sees it too
    bad.write_text("ClusterName\n")

    with pytest.raises(OwnerSourceError) as failed:
        owners(slurm.cluster, slurm_conf=bad).read()

    assert "\n" not in str(failed.value)
    assert str(failed.value).startswith("scontrol show node n2 --oneliner: exit status 1: ")
    assert f'Parse error in file {bad} line 1: "ClusterName"' in str(failed.value)


def test_commands_missing_from_commands_dir_fail_naming_the_program(
    slurm_cluster: SlurmCluster, tmp_path: Path
):
    with pytest.raises(OwnerSourceError) as failed:
        owners(slurm_cluster, commands_dir=tmp_path).read()

    assert str(failed.value) == (
        f"scontrol show node n2 --oneliner: cannot run {tmp_path}/scontrol: "
        "No such file or directory"
    )


def test_a_gpu_index_nvml_does_not_know_fails_the_reading_rather_than_guessing(
    slurm_cluster: SlurmCluster,
):
    three = {i: UUIDS[i] for i in range(3)}  # n2 declares 4 in gres.conf
    source = SlurmdOwners(
        "n2",
        lambda: three,
        slurm_conf=slurm_cluster.slurm_conf,
        commands_dir=slurm_cluster.commands_dir,
        timeout_seconds=20,
        clock=SystemClock(),
    )

    with pytest.raises(OwnerSourceError, match=r"node n2 GPU index 3, which is none of .*0, 1, 2"):
        source.read()


def test_a_command_that_hangs_is_cut_off_by_the_timeout(slurm: SlurmHarness):
    # slurmctld on a port nobody listens on: with the default MessageTimeout every call
    # retries for ~9 s
    port = free_port()
    dead = slurm.settings.output_dir / "slurm.conf"
    dead.write_text(
        "".join(
            f"SlurmctldPort={port}\n" if line.startswith("SlurmctldPort=") else line
            for line in slurm.slurm_conf.read_text().splitlines(keepends=True)
        )
    )
    started = time.monotonic()

    with pytest.raises(OwnerSourceError, match=r"^scontrol show node n2 --oneliner: no answer "):
        owners(slurm.cluster, slurm_conf=dead, timeout_seconds=0.5).read()

    assert time.monotonic() - started < 2
