"""The isolation probe: reads of another account's job with squeue, scontrol and sacct as a
tenant's own user, and the judgement of each answer.

Under `PrivateData=jobs` (slurm.conf for squeue and scontrol, slurmdbd.conf for sacct) an
ordinary user's squeue and sacct leave other users' jobs out with no error, and
`scontrol show job <id>` says "Invalid job id specified"; without it every user sees every
job. The probe runs these as each tenant's user (`tenant_users`) through `run_as_command`
(runuser as root by default), and judges by what comes back: a job of the other account in
the answer is a breach, whatever the exit status.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from observer.backends.slurm.commands import SlurmCommands, slurm_words, unreachable
from observer.backends.slurm.parse import sbatch_job_id, squeue_jobs
from observer.clock import Clock
from observer.domain import AccessAttempt
from observer.errors import BackendError, ProbeError
from observer.settings.controller import SlurmSettings

# The job the probe places in the other account when that account has none to try to read:
# held, so it never runs, and cancelled once tried. Its comment is not a run id.
ISOLATION_TARGET_NAME = "observer-isolation-target"
ACCOUNTING_WAIT_SECONDS = 30.0  # slurmdbd records a new job seconds after slurmctld
POLL_SECONDS = 0.2


class IsolationProbe:
    """Tries one account's reads of another's jobs; `cancel` ends a job it placed."""

    def __init__(
        self,
        commands: SlurmCommands,
        settings: SlurmSettings,
        clock: Clock,
        cancel: Callable[[str], None],
    ) -> None:
        self._commands = commands
        self._settings = settings
        self._clock = clock
        self._cancel = cancel

    def probe(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        user = self._settings.tenant_users.get(as_tenant)
        if user is None:
            raise ProbeError(
                f"no user of account {as_tenant} in controller.slurm.tenant_users: "
                "its isolation cannot be tried"
            )
        # First that the user can ask slurmctld at all: nothing is placed for a probe that
        # cannot run, and an empty answer later means hidden, not failed.
        self._commands.run_as_tenant(user, "squeue", ["--noheader", "--me", "--format=%i"])
        target, placed = self._target(other_tenant)
        try:
            self._await_accounting(target)
            return [
                self._try_squeue(user, other_tenant, target),
                self._try_scontrol(user, other_tenant, target),
                self._try_sacct(user, other_tenant, target),
            ]
        finally:
            if placed:
                self._cancel(target)

    def _target(self, account: str) -> tuple[str, bool]:
        """A job of `account` to try to read: its newest unfinished one, or else a held job
        placed there now (True: placed, to be cancelled), as the account's own user when
        tenant_users names one."""
        listed = squeue_jobs(self._commands.queue())
        theirs = [int(s.job_id) for s in listed if s.tenant == account and not s.phase.finished]
        if theirs:
            return str(max(theirs)), False
        done = self._commands.run(
            "sbatch",
            [
                "--parsable",
                "--hold",
                f"--job-name={ISOLATION_TARGET_NAME}",
                f"--comment={ISOLATION_TARGET_NAME}",
                f"--account={account}",
                "--time=1",
                "--output=/dev/null",
                "--chdir=/",
                "--wrap=true",
            ],
            as_user=self._settings.tenant_users.get(account),
        )
        words = slurm_words(done.stderr)
        if done.returncode != 0:
            if unreachable(words):
                raise BackendError(f"sbatch could not reach slurmctld: {words}")
            raise ProbeError(f"cannot place a job in account {account} to try to read: {words}")
        return sbatch_job_id(done.stdout), True

    def _await_accounting(self, job_id: str) -> None:
        """Wait until slurmdbd has the job: only then does a sacct without it mean a denial."""
        deadline = self._clock.monotonic() + ACCOUNTING_WAIT_SECONDS
        while not self._sacct_ids(None, ["--jobs", job_id]):
            if self._clock.monotonic() >= deadline:
                raise BackendError(
                    f"slurmdbd has no record of job {job_id} after "
                    f"{ACCOUNTING_WAIT_SECONDS:g} s: sacct cannot be tried against it"
                )
            self._clock.sleep(POLL_SECONDS, threading.Event())

    def _try_squeue(self, user: str, account: str, target: str) -> AccessAttempt:
        done = self._commands.run_as_tenant(
            user,
            "squeue",
            ["--noheader", "--all", "--states=all", f"--accounts={account}", "--format=%i|%a"],
        )
        rows = [line.split("|") for line in done.stdout.splitlines() if line.strip()]
        seen = sorted({row[0] for row in rows if row[-1] == account}, key=int)
        action = "list jobs with squeue"
        if seen:
            detail = f"squeue as {user} listed {len(seen)} job(s) of {account}: {','.join(seen)}"
            return AccessAttempt(action, account, True, detail)
        return AccessAttempt(
            action,
            account,
            False,
            f"squeue --accounts={account} as {user} listed no job (slurmctld holds job {target})",
        )

    def _try_scontrol(self, user: str, account: str, target: str) -> AccessAttempt:
        done = self._commands.run_as_tenant(user, "scontrol", ["show", "job", target], check=False)
        shown = f"JobId={target} " in done.stdout and f"Account={account} " in done.stdout
        action, where = "show job with scontrol", f"{account}/{target}"
        if shown:
            return AccessAttempt(
                action, where, True, f"scontrol show job {target} as {user}: shown"
            )
        return AccessAttempt(action, where, False, slurm_words(done.stderr))

    def _try_sacct(self, user: str, account: str, target: str) -> AccessAttempt:
        seen = self._sacct_ids(user, ["--jobs", target, f"--accounts={account}"])
        action, where = "list jobs with sacct", f"{account}/{target}"
        if target in seen:
            return AccessAttempt(
                action, where, True, f"sacct as {user} listed job {target} of {account}"
            )
        return AccessAttempt(
            action,
            where,
            False,
            f"sacct --accounts={account} --jobs={target} as {user} listed no job "
            "(slurmdbd holds it)",
        )

    def _sacct_ids(self, user: str | None, args: list[str]) -> set[str]:
        """Job ids sacct lists (allocations only), as `user` or as the controller."""
        common = ["--allusers", "--allocations", "--parsable2", "--noheader"]
        args = [*common, *args, "--format=JobIDRaw"]
        if user is None:
            done = self._commands.run("sacct", args)
            if done.returncode != 0:
                raise BackendError(f"sacct failed: {slurm_words(done.stderr)}")
        else:
            done = self._commands.run_as_tenant(user, "sacct", args)
        return {line.strip() for line in done.stdout.splitlines() if line.strip()}
