"""Running Slurm's programs (sbatch, squeue, sacct, sacctmgr, sinfo, scancel, scontrol): each
call is its own process with a timeout, as the observer or as a tenant's user, and its
failures become BackendError or ProbeError in Slurm's own words.

`squeue --json` and `sinfo --json` of 22.05 exit 0 with an `errors` list when slurmctld cannot
be reached (after ~9 s of retries); the list is what says so.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from observer.errors import BackendError, ProbeError
from observer.settings.controller import SlurmSettings
from observer.slurm_json import ShapeError, document

Completed = subprocess.CompletedProcess[str]  # what a program answered: exit status and output

# how Slurm's programs word a controller they cannot reach, as opposed to refusing a request
_UNREACHABLE = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Communication connection failure",
    "Zero Bytes were transmitted",
    "backup controller in standby mode",
)


class CommandTimeout(BackendError):
    """A program did not answer within command_timeout_seconds: what it was asked to do may
    have been done all the same."""


class SlurmCommands:
    """Slurm's programs as the settings say to run them (commands_dir, slurm_conf,
    run_as_command, command_timeout_seconds)."""

    def __init__(self, settings: SlurmSettings) -> None:
        self._settings = settings
        self._env = dict(os.environ)
        if settings.slurm_conf is not None:
            self._env["SLURM_CONF"] = str(settings.slurm_conf)

    def run(
        self,
        command: str,
        args: list[str],
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        as_user: str | None = None,
    ) -> Completed:
        """Run a program to its end, whatever its exit status; one that cannot be started or
        does not answer in time raises."""
        program = command
        if self._settings.commands_dir is not None:
            program = str(self._settings.commands_dir / command)
        argv = [program, *args]
        if as_user is not None:
            # sudo resets the environment: SLURM_CONF goes on the command line
            conf = [f"SLURM_CONF={self._settings.slurm_conf}"] if self._settings.slurm_conf else []
            prefix = [part.replace("{user}", as_user) for part in self._settings.run_as_command]
            argv = [*prefix, "env", *conf, *argv]
        timeout = self._settings.command_timeout_seconds
        try:
            return subprocess.run(
                argv,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**self._env, **(env or {})},
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            # Slurm retries what it cannot reach (munge, slurmctld) and says so as it goes:
            # its words tell a retry from a hang.
            said = _partial(exc.stderr)
            raise CommandTimeout(
                f"{command} did not answer within {timeout:g} s: "
                + (f"Slurm said: {said}" if said else "no word from it (is slurmctld reachable?)")
            ) from exc
        except OSError as exc:
            if as_user is not None:  # the run-as wrapper itself: the probe is misconfigured
                raise ProbeError(f"cannot run {argv[0]}: {exc}") from exc
            raise BackendError(f"cannot run {program}: {exc}") from exc

    def run_as_tenant(
        self, user: str, command: str, args: list[str], check: bool = True
    ) -> Completed:
        """Run a Slurm command as a tenant's user. A failure of the run-as wrapper itself is a
        ProbeError (the probe cannot run as configured); an unreachable Slurm a BackendError;
        another failure too when `check`, since then an empty answer would prove nothing."""
        done = self.run(command, args, as_user=user)
        if done.returncode == 0:
            return done
        words = slurm_words(done.stderr)
        wrapper = (
            Path(self._settings.run_as_command[0]).name if self._settings.run_as_command else ""
        )
        if wrapper and any(line.startswith(f"{wrapper}:") for line in done.stderr.splitlines()):
            raise ProbeError(f"cannot run {command} as {user}: {words}")
        if unreachable(words) or check:
            raise BackendError(f"{command} as {user} failed: {words}")
        return done

    def queue(self) -> dict[str, Any]:
        """`squeue --json` of every job slurmctld holds, the ended ones within MinJobAge
        included: 22.05 lists them all along, 23.02 on only when asked (--states=all)."""
        return self.json("squeue", "--states=all")

    def json(self, command: str, *args: str) -> dict[str, Any]:
        """What `<command> --json <args>` printed, once it is sure slurmctld answered."""
        said = " ".join([command, "--json", *args])
        done = self.run(command, ["--json", *args])
        if done.returncode != 0:
            words = slurm_words(done.stderr)
            if unreachable(words):  # 23.02 on: an exit status and the words, no document
                raise BackendError(f"{command} could not read slurmctld: {words}")
            raise BackendError(f"{said} failed: {words}")
        try:
            data = document(done.stdout, said)
        except ShapeError as exc:
            raise BackendError(str(exc)) from None
        if data.get("errors"):  # 22.05 exits 0 and answers empty when slurmctld is unreachable
            # The list says "Unspecified error" where the cause (munge) is on standard error.
            words = f" ({slurm_words(done.stderr)})" if done.stderr.strip() else ""
            raise BackendError(
                f"{command} could not read slurmctld: {_error_words(data['errors'])}{words}"
            )
        return data


def slurm_words(stderr: str) -> str:
    """A program's error output as one line, without the "<program>: error: " prefixes."""
    lines = [re.sub(r"^\w+: error: ", "", line).strip() for line in stderr.splitlines()]
    return "; ".join(line for line in lines if line) or "no message"


def _partial(output: str | bytes | None) -> str:
    """What a program killed at its timeout had written, as one line; "" for nothing."""
    if isinstance(output, bytes):
        output = output.decode(errors="replace")
    return slurm_words(output) if output and output.strip() else ""


def unreachable(words: str) -> bool:
    """Whether Slurm's words say slurmctld could not be reached, rather than a refusal."""
    return any(marker in words for marker in _UNREACHABLE)


def _error_words(errors: Iterable[Mapping[str, Any]]) -> str:
    return "; ".join(
        " ".join(str(e[k]) for k in ("source", "description", "error") if e.get(k)) for e in errors
    )
