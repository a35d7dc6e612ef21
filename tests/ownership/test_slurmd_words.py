"""The agent's owner source cut off at its short deadline says what Slurm said meanwhile:
Slurm retries munge for ~9 s, longer than the agent may wait in its tick, and its words are
what tell that retry from a hang. The programs here are stand-ins saying what Slurm 22.05
says."""

from __future__ import annotations

from pathlib import Path

import pytest

from observer.clock import SystemClock
from observer.errors import OwnerSourceError
from observer.ownership.slurmd import SlurmdOwners

MUNGE = (
    'scontrol: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": '
    "No such file or directory (retrying ...)"
)


def _owners(commands: Path) -> SlurmdOwners:
    return SlurmdOwners(
        "n1",
        dict,
        slurm_conf=None,
        commands_dir=commands,
        timeout_seconds=0.5,
        clock=SystemClock(),
    )


def _scontrol(directory: Path, body: str) -> None:
    path = directory / "scontrol"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_a_munge_retry_past_the_deadline_is_named_in_slurms_words(tmp_path: Path):
    _scontrol(tmp_path, f"echo '{MUNGE}' >&2\nexec sleep 30")
    with pytest.raises(OwnerSourceError) as failed:
        _owners(tmp_path).read()
    assert str(failed.value) == (
        "scontrol show node n1 --oneliner: no answer within 0.5 s: Slurm said: Munge encode "
        'failed: Failed to access "/run/munge/munge.socket.2": No such file or directory '
        "(retrying ...)"
    )


def test_a_command_silent_until_the_deadline_is_no_answer(tmp_path: Path):
    _scontrol(tmp_path, "exec sleep 30")
    with pytest.raises(OwnerSourceError) as failed:
        _owners(tmp_path).read()
    assert str(failed.value) == "scontrol show node n1 --oneliner: no answer within 0.5 s"


def _node_with_steps(directory: Path, listpids: str) -> None:
    """n1 without GRES, whose listpids answers as `listpids` (a shell body) says, and job 7
    given no GPU there."""
    _scontrol(
        directory,
        f"""case "$1 $2" in
"show node") echo 'NodeName=n1 Arch=x86_64 Gres=(null) State=MIXED' ;;
"show job") printf 'JobId=7 JobName=wrap\\n     Nodes=n1 CPU_IDs=0 Mem=100 GRES=\\n\\n' ;;
"listpids *") printf 'PID      JOBID    STEPID   LOCALID GLOBALID\\n' ; {listpids} ;;
esac""",
    )


def test_a_step_that_ends_while_listpids_asks_leaves_the_other_jobs_read(tmp_path: Path):
    _node_with_steps(
        tmp_path,
        "printf '4242     7        batch    0       0\\n'; "
        "echo 'StepId=8.0 does not exist on this node.' >&2; "
        "echo 'Unable to connect to slurmstepd: Connection refused' >&2; exit 1",
    )

    assert _owners(tmp_path).read().running == {"7"}


def test_a_slurmstepd_that_refuses_the_agent_fails_the_reading(tmp_path: Path):
    # not a step that ended: its job may still run
    _node_with_steps(
        tmp_path,
        "printf '4242     7        batch    0       0\\n'; "
        "echo 'Unable to connect to slurmstepd: Permission denied' >&2; exit 1",
    )

    with pytest.raises(
        OwnerSourceError,
        match=r"^scontrol listpids \* n1: exit status 1: Unable to connect to slurmstepd: "
        "Permission denied",
    ):
        _owners(tmp_path).read()
