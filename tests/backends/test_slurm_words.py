"""A Slurm program cut off at its timeout, or answering with an "Unspecified error", is
reported in what Slurm itself said on its way: munge refusing to encode its credential
reads as that, not as "no answer" or "Unspecified error", and a program that said nothing
reads as a hang. The programs here are stand-ins saying what Slurm 22.05 says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from observer.backends.slurm.commands import SlurmCommands
from observer.errors import BackendError
from observer.settings.controller import SlurmSettings

MUNGE = (
    'squeue: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": '
    "No such file or directory (retrying ...)"
)


def _program(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _commands(directory: Path) -> SlurmCommands:
    settings = SlurmSettings(
        commands_dir=directory, command_timeout_seconds=0.5, output_dir=directory
    )
    return SlurmCommands(settings)


def test_a_program_retrying_munge_past_the_timeout_is_reported_in_slurms_words(tmp_path: Path):
    _program(tmp_path, "squeue", f"echo '{MUNGE}' >&2\nexec sleep 30")
    with pytest.raises(BackendError) as raised:
        _commands(tmp_path).json("squeue")
    assert str(raised.value) == (
        "squeue did not answer within 0.5 s: Slurm said: Munge encode failed: Failed to access "
        '"/run/munge/munge.socket.2": No such file or directory (retrying ...)'
    )


def test_a_program_that_says_nothing_before_the_timeout_is_a_hang(tmp_path: Path):
    _program(tmp_path, "squeue", "exec sleep 30")
    with pytest.raises(BackendError, match=r"within 0\.5 s: no word from it"):
        _commands(tmp_path).json("squeue")


def test_an_unspecified_error_in_the_json_comes_with_what_slurm_said_beside_it(tmp_path: Path):
    answer = {"errors": [{"error": "Unspecified error", "error_number": -1}], "jobs": []}
    _program(tmp_path, "squeue", f"echo '{MUNGE}' >&2\necho '{json.dumps(answer)}'")
    with pytest.raises(BackendError) as raised:
        _commands(tmp_path).json("squeue")
    assert "Unspecified error" in str(raised.value)
    assert "Munge encode failed" in str(raised.value)
