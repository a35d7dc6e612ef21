"""SlurmdOwners against the real Slurm 22.05 of deploy/local/infra/slurm-up.sh (nodes n1..n3,
4 GPUs each declared in gres.conf as fakedev/nvidia[0-3]): the jobs it lists on a node are the
ones Slurm runs there, with the GPUs Slurm gave them, and every way of failing to ask is one
OwnerSourceError that says which command failed and why."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.errors import OwnerSourceError
from observer.ownership.slurmd import SlurmdOwners
from tests.backends.slurm_harness import SlurmHarness, require_slurm, slurm_harness
from tests.support.net import free_port

pytestmark = pytest.mark.slurm

UUIDS = {i: f"GPU-{i}1111111-2222-3333-4444-555555555555" for i in range(4)}


@pytest.fixture
def slurm() -> Iterator[SlurmHarness]:
    with slurm_harness() as harness:
        yield harness


def owners(
    slurm_conf: Path,
    node: str = "n2",
    commands_dir: Path | None = None,
    timeout_seconds: float = 20.0,
) -> SlurmdOwners:
    return SlurmdOwners(
        node,
        lambda: UUIDS,
        slurm_conf=slurm_conf,
        commands_dir=commands_dir,
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

    before = time.time()
    reading = owners(slurm.slurm_conf).read()

    assert reading.running == {short}  # the job on n1 is not n2's
    # an idle node gives the first GPUs in gres.conf order
    assert reading.gpus == {short: {UUIDS[0], UUIDS[1]}}
    assert reading.allocatable == frozenset(UUIDS.values())
    assert before <= reading.at.timestamp() <= time.time()

    slurm.settle(lambda: short not in slurm.cli("squeue", "-h", "-o", "%i"), 30)
    assert owners(slurm.slurm_conf).read().running == frozenset()
    assert owners(slurm.slurm_conf, node="n1").read().running == {elsewhere}


def test_listpids_names_the_job_of_each_process_slurmd_tracks(slurm: SlurmHarness):
    job = submit(slurm, "n2", gpus=1, seconds=60)
    slurm.settle(lambda: running(slurm, job), 20)
    source = owners(slurm.slurm_conf)
    slurm.settle(lambda: bool(source.pids()), 10)  # slurmstepd starts the script a moment later

    pids = source.pids()

    assert set(pids.values()) == {job}
    for pid in pids:  # what each process's own environment says
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"SLURM_JOB_ID={job}".encode() in environ
    assert owners(slurm.slurm_conf, node="n3").pids() == {}


def test_a_node_slurm_does_not_know_fails_rather_than_reading_as_idle():
    source = owners(require_slurm(), node="n9")

    with pytest.raises(OwnerSourceError, match=r"scontrol show node n9 .*Node n9 not found"):
        source.read()
    with pytest.raises(OwnerSourceError, match="scontrol listpids"):
        source.pids()


def test_a_bad_slurm_conf_fails_with_slurms_one_line_reason(tmp_path: Path):
    require_slurm()
    bad = tmp_path / "slurm.conf"
    bad.write_text("ClusterName\n")

    with pytest.raises(OwnerSourceError) as failed:
        owners(bad).read()

    assert "\n" not in str(failed.value)
    assert str(failed.value).startswith("scontrol show node n2 --oneliner: exit status 1: ")
    assert f'Parse error in file {bad} line 1: "ClusterName"' in str(failed.value)


def test_commands_missing_from_commands_dir_fail_naming_the_program(tmp_path: Path):
    slurm_conf = require_slurm()
    (tmp_path / "scontrol").symlink_to("/usr/bin/scontrol")  # squeue is missing

    with pytest.raises(OwnerSourceError) as failed:
        owners(slurm_conf, commands_dir=tmp_path).read()

    assert str(failed.value) == (
        f"squeue --json: cannot run {tmp_path}/squeue: No such file or directory"
    )


def test_a_command_that_hangs_is_cut_off_by_the_timeout(tmp_path: Path):
    # slurmctld on a port nobody listens on: with the default MessageTimeout every call
    # retries for ~9 s
    port = free_port()
    dead = tmp_path / "slurm.conf"
    dead.write_text(
        "".join(
            f"SlurmctldPort={port}\n" if line.startswith("SlurmctldPort=") else line
            for line in require_slurm().read_text().splitlines(keepends=True)
        )
    )
    started = time.monotonic()

    with pytest.raises(OwnerSourceError, match=r"^scontrol show node n2 --oneliner: no answer "):
        owners(dead, timeout_seconds=0.5).read()

    assert time.monotonic() - started < 2
