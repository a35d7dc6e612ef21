"""The Slurm backend: the scheduler boundary over Slurm's own command-line tools.

Every call runs a CLI (sbatch, squeue, sacct, sinfo, scancel) with a timeout. The JSON
readers follow the shapes of Slurm 22.05 (`openapi/v0.0.38`); another shape is reported as a
BackendError rather than misread. Facts of 22.05 this relies on:

- `squeue --json` lists every job slurmctld still holds (finished ones for MinJobAge,
  default 300 s) and ignores `--jobs`/`--states`; its `exit_code` is the raw wait status.
- `squeue --json` and `sinfo --json` exit 0 with an `errors` list when slurmctld cannot be
  reached (after ~9 s of retries); the list is what says so.
- `sacct --json` reports `{"status": "SUCCESS", "return_code": 0}` for a job that exited 3,
  so accounting is read from `sacct --parsable2` with `SLURM_TIME_FORMAT=%s` instead.
- `sacct --state=<final states> -S -E` lists the jobs that ended in the period, bounds
  included (slurmdbd compares their end time); sacct reads -S/-E in its own timezone, so
  they are given in UTC with TZ=UTC.
- The run id travels in `--comment`; sacct keeps comments only with
  `AccountingStoreFlags=job_comment`.
- Under `PrivateData=jobs` (slurm.conf for squeue and scontrol, slurmdbd.conf for sacct) an
  ordinary user's squeue and sacct leave other users' jobs out with no error, and
  `scontrol show job <id>` says "Invalid job id specified"; without it every user sees every
  job. The isolation probe runs these as each tenant's user (`tenant_users`) through
  `run_as_command` (runuser as root by default), and judges by what comes back: a job of the
  other account in the answer is a breach, whatever the exit status.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import threading
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from observer.backends.base import FinishedJobs, queue_states
from observer.clock import Clock
from observer.domain import (
    CANARY_MARK,
    AccessAttempt,
    Behaviour,
    JobPhase,
    JobRequest,
    JobStatus,
    SchedulerNode,
    SchedulerSnapshot,
    Workload,
    canary_padding,
)
from observer.errors import BackendError, ProbeError
from observer.settings import SlurmSettings

RUN_ID_COMMENT_PREFIX = "observer-run:"
JOB_NAME_PREFIX = "observer-"
# The job the isolation probe places in the other account when that account has none to try
# to read: held, so it never runs, and cancelled once tried. Its comment is not a run id.
ISOLATION_TARGET_NAME = "observer-isolation-target"
ACCOUNTING_WAIT_SECONDS = 30.0  # slurmdbd records a new job seconds after slurmctld
POLL_SECONDS = 0.2


_PHASES = {
    "PENDING": JobPhase.PENDING,
    "CONFIGURING": JobPhase.PENDING,
    "REQUEUED": JobPhase.PENDING,
    "REQUEUE_FED": JobPhase.PENDING,
    "REQUEUE_HOLD": JobPhase.PENDING,
    "RESV_DEL_HOLD": JobPhase.PENDING,
    "RUNNING": JobPhase.RUNNING,
    # ended, its GPUs not yet released (epilog, unkillable processes): running until
    # released, with `ending_since` its end
    "COMPLETING": JobPhase.RUNNING,
    "SUSPENDED": JobPhase.RUNNING,
    "STOPPED": JobPhase.RUNNING,
    "SIGNALING": JobPhase.RUNNING,
    "STAGE_OUT": JobPhase.RUNNING,
    "RESIZING": JobPhase.RUNNING,
    "COMPLETED": JobPhase.SUCCEEDED,
    "FAILED": JobPhase.FAILED,
    "OUT_OF_MEMORY": JobPhase.FAILED,
    "NODE_FAIL": JobPhase.FAILED,
    "TIMEOUT": JobPhase.FAILED,
    "BOOT_FAIL": JobPhase.FAILED,
    "DEADLINE": JobPhase.FAILED,
    "PREEMPTED": JobPhase.FAILED,
    "SPECIAL_EXIT": JobPhase.FAILED,
    "CANCELLED": JobPhase.CANCELLED,
    "REVOKED": JobPhase.CANCELLED,
}

# Phases with an exit code of the job's own. A cancelled job has none: squeue shows
# slurmstepd's SIGTERM, sacct 0:0, and the answer must not change between the two.
_EXITED = (JobPhase.SUCCEEDED, JobPhase.FAILED)

# squeue shows these reasons on ended jobs; sacct mostly says "None", so they are derived
_END_REASONS = {
    "TIMEOUT": "TimeLimit",
    "OUT_OF_MEMORY": "OutOfMemory",
    "NODE_FAIL": "NodeDown",
    "BOOT_FAIL": "BootFail",
    "DEADLINE": "DeadLine",
    "PREEMPTED": "Preempted",
}

# squeue(1) JOB REASON CODES, for the message a person reads
_REASON_TEXT = {
    "Resources": "the job is waiting for resources to become available",
    "Priority": "one or more higher priority jobs exist for this partition",
    "Dependency": "the job is waiting for a dependent job to complete",
    "BeginTime": "the job's earliest start time has not yet been reached",
    "JobHeldUser": "the job is held by the user",
    "JobHeldAdmin": "the job is held by a system administrator",
    "PartitionTimeLimit": "the job's time limit exceeds its partition's time limit",
    "PartitionDown": "the partition required by this job is in a DOWN state",
    "ReqNodeNotAvail": "some node required by the job is not currently available",
    "Reservation": "the job is waiting for its advanced reservation to become available",
    "NonZeroExitCode": "the job terminated with a non-zero exit code",
    "RaisedSignal": "the job terminated with a signal",
    "JobLaunchFailure": "the job could not be launched or its batch step was killed",
    "TimeLimit": "the job exhausted its time limit",
    "OutOfMemory": "the job ran out of memory",
    "NodeDown": "a node required by the job is down",
    "BadConstraints": "the job's constraints can not be satisfied",
}

# how sbatch words a controller it cannot reach, as opposed to refusing the job
_UNREACHABLE = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Communication connection failure",
    "Zero Bytes were transmitted",
    "backup controller in standby mode",
)

# sacct's short names of every final state, for --state
_FINAL_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,RV,TO"

_SACCT_FIELDS = (
    "JobIDRaw",
    "Account",
    "Partition",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "Reason",
    "NodeList",
    "AllocTRES",
    "ReqTRES",
    "Comment",  # last: the only field that may contain the separator
)


class SlurmBackend:
    """SchedulerBackend over Slurm's CLIs; see SlurmSettings for what it needs."""

    def __init__(self, settings: SlurmSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._output_dir = settings.output_dir.absolute()
        self._env = dict(os.environ)
        if settings.slurm_conf is not None:
            self._env["SLURM_CONF"] = str(settings.slurm_conf)

    # --- SchedulerBackend ---------------------------------------------------------------

    def submit(self, request: JobRequest) -> str:
        work = request.workload
        args = [
            "--parsable",
            f"--job-name={JOB_NAME_PREFIX}{request.probe}",
            f"--comment={RUN_ID_COMMENT_PREFIX}{request.run_id}",
            f"--account={request.tenant}",
            f"--nodes={work.nodes}",
            f"--time={_time_limit_minutes(work, self._settings.time_limit_headroom_minutes)}",
            f"--output={self._output_dir}/{JOB_NAME_PREFIX}%j.out",
            f"--chdir={self._output_dir}",
        ]
        if request.queue:
            args.append(f"--partition={request.queue}")
        if request.priority:
            args.append(f"--qos={request.priority}")
        if work.gpus_per_node:
            args.append(f"--gres=gpu:{work.gpus_per_node}")
        if work.behaviour is Behaviour.OOM:
            args.append(f"--mem={self._settings.oom_memory_mebibytes}M")
        args.extend(self._settings.sbatch_extra_args)

        script = batch_script(request, self._settings.oom_memory_mebibytes)
        self._output_dir.mkdir(parents=True, exist_ok=True)
        try:
            done = self._run("sbatch", args, stdin=script)
        except BackendError as exc:
            if isinstance(exc.__cause__, subprocess.TimeoutExpired):
                raise BackendError(
                    f"{exc}; the job may have been submitted: probe_jobs() finds it by its run id"
                ) from exc
            raise
        if done.returncode != 0:
            words = _slurm_words(done.stderr)
            if any(marker in words for marker in _UNREACHABLE):
                raise BackendError(f"sbatch could not reach slurmctld: {words}")
            raise ProbeError(f"Slurm refused the job: {words}")
        job_id = done.stdout.strip().split(";")[0]  # "<id>" or "<id>;<cluster>"
        if not job_id.isdigit():
            raise BackendError(f"sbatch --parsable printed {done.stdout.strip()!r}, not a job id")
        return job_id

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        wanted = {job_id for job_id in job_ids if job_id.isdigit()}
        if not wanted:
            return {}
        found = {s.job_id: s for s in self._squeue() if s.job_id in wanted}
        forgotten = wanted - found.keys()  # slurmctld drops a job MinJobAge after it ends
        if forgotten:
            found.update(self.accounting(forgotten))
        return found

    def cancel(self, job_id: str) -> None:
        if not job_id.isdigit():
            return  # not a Slurm job id, so no job of Slurm's
        # scancel exits 0 for a finished or unknown job id
        done = self._run("scancel", [job_id])
        if done.returncode != 0:
            raise BackendError(f"scancel {job_id} failed: {_slurm_words(done.stderr)}")

    def logs(self, job_id: str) -> str:
        path = self._output_dir / f"{JOB_NAME_PREFIX}{job_id}.out"
        try:
            return path.read_text(errors="replace")
        except OSError as exc:
            raise BackendError(f"no output of job {job_id} at {path}: {exc.strerror}") from exc

    def probe_jobs(self) -> list[JobStatus]:
        return [s for s in self._squeue() if s.run_id is not None and not s.phase.finished]

    def close(self) -> None:
        return None  # every call is its own process: nothing is held open

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        user = self._settings.tenant_users.get(as_tenant)
        if user is None:
            raise ProbeError(
                f"no user of account {as_tenant} in controller.slurm.tenant_users: "
                "its isolation cannot be tried"
            )
        # First that the user can ask slurmctld at all: nothing is placed for a probe that
        # cannot run, and an empty answer later means hidden, not failed.
        self._run_as_tenant(user, "squeue", ["--noheader", "--me", "--format=%i"])
        target, placed = self._isolation_target(other_tenant)
        try:
            self._await_accounting(target)
            return [
                self._try_squeue(user, other_tenant, target),
                self._try_scontrol(user, other_tenant, target),
                self._try_sacct(user, other_tenant, target),
            ]
        finally:
            if placed:
                self.cancel(target)

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        # slurmdbd keeps every job of every user: the listing is complete
        jobs = self._sacct(
            [
                "--allusers",
                f"--state={_FINAL_STATES}",
                f"--starttime={_sacct_time(since)}",
                f"--endtime={_sacct_time(until)}",
            ]
        )
        ended = [
            s
            for s in jobs.values()
            if s.phase.finished and s.finished_at is not None and since <= s.finished_at < until
        ]
        return FinishedJobs(since, until, tuple(ended), complete=True)

    def snapshot(self) -> SchedulerSnapshot:
        at = self._clock.now()
        active = [s for s in self._squeue() if not s.phase.finished]
        return SchedulerSnapshot(
            at=at, queues=queue_states(active, at), nodes=tuple(self._sinfo()), jobs=tuple(active)
        )

    # --- beyond the protocol ------------------------------------------------------------

    def accounting(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        """These jobs as slurmdbd recorded them: what jobs() falls back to once slurmctld
        has forgotten a job. Records lag slurmctld by a moment."""
        ids = sorted({job_id for job_id in job_ids if job_id.isdigit()}, key=int)
        if not ids:
            return {}
        return self._sacct([f"--jobs={','.join(ids)}"])

    def _sacct(self, selection: list[str]) -> dict[str, JobStatus]:
        """The job allocations sacct selects, by job id."""
        done = self._run(
            "sacct",
            [
                "--allocations",
                "--parsable2",
                "--noheader",
                *selection,
                f"--format={','.join(_SACCT_FIELDS)}",
            ],
            env={"SLURM_TIME_FORMAT": "%s", "TZ": "UTC"},
        )
        if done.returncode != 0:
            raise BackendError(f"sacct failed: {_slurm_words(done.stderr)}")
        return parse_sacct(done.stdout)

    # --- isolation ----------------------------------------------------------------------

    def _isolation_target(self, account: str) -> tuple[str, bool]:
        """A job of `account` to try to read: its newest unfinished one, or else a held job
        placed there now (True: placed, to be cancelled), as the account's own user when
        tenant_users names one."""
        theirs = [
            int(s.job_id) for s in self._squeue() if s.tenant == account and not s.phase.finished
        ]
        if theirs:
            return str(max(theirs)), False
        done = self._run(
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
        words = _slurm_words(done.stderr)
        if done.returncode != 0:
            if any(marker in words for marker in _UNREACHABLE):
                raise BackendError(f"sbatch could not reach slurmctld: {words}")
            raise ProbeError(f"cannot place a job in account {account} to try to read: {words}")
        job_id = done.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise BackendError(f"sbatch --parsable printed {done.stdout.strip()!r}, not a job id")
        return job_id, True

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
        done = self._run_as_tenant(
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
        done = self._run_as_tenant(user, "scontrol", ["show", "job", target], check=False)
        shown = f"JobId={target} " in done.stdout and f"Account={account} " in done.stdout
        action, where = "show job with scontrol", f"{account}/{target}"
        if shown:
            return AccessAttempt(
                action, where, True, f"scontrol show job {target} as {user}: shown"
            )
        return AccessAttempt(action, where, False, _slurm_words(done.stderr))

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
            done = self._run("sacct", args)
            if done.returncode != 0:
                raise BackendError(f"sacct failed: {_slurm_words(done.stderr)}")
        else:
            done = self._run_as_tenant(user, "sacct", args)
        return {line.strip() for line in done.stdout.splitlines() if line.strip()}

    def _run_as_tenant(
        self, user: str, command: str, args: list[str], check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command as a tenant's user. A failure of the run-as wrapper itself is a
        ProbeError (the probe cannot run as configured); an unreachable Slurm a BackendError;
        another failure too when `check`, since then an empty answer would prove nothing."""
        done = self._run(command, args, as_user=user)
        if done.returncode == 0:
            return done
        words = _slurm_words(done.stderr)
        wrapper = (
            Path(self._settings.run_as_command[0]).name if self._settings.run_as_command else ""
        )
        if wrapper and any(line.startswith(f"{wrapper}:") for line in done.stderr.splitlines()):
            raise ProbeError(f"cannot run {command} as {user}: {words}")
        if any(marker in words for marker in _UNREACHABLE) or check:
            raise BackendError(f"{command} as {user} failed: {words}")
        return done

    # --- the commands -------------------------------------------------------------------

    def _run(
        self,
        command: str,
        args: list[str],
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        as_user: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
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
            raise BackendError(
                f"{command} did not answer within {timeout:g} s (is slurmctld reachable?)"
            ) from exc
        except OSError as exc:
            if as_user is not None:  # the run-as wrapper itself: the probe is misconfigured
                raise ProbeError(f"cannot run {argv[0]}: {exc}") from exc
            raise BackendError(f"cannot run {program}: {exc}") from exc

    def _json(self, command: str) -> dict[str, Any]:
        done = self._run(command, ["--json"])
        if done.returncode != 0:
            raise BackendError(f"{command} --json failed: {_slurm_words(done.stderr)}")
        try:
            data = json.loads(done.stdout)
        except json.JSONDecodeError as exc:
            raise BackendError(f"{command} --json printed no JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise BackendError(f"{command} --json printed {type(data).__name__}, not an object")
        if data.get("errors"):  # 22.05 exits 0 and answers empty when slurmctld is unreachable
            raise BackendError(
                f"{command} could not read slurmctld: {_error_words(data['errors'])}"
            )
        return data

    def _squeue(self) -> list[JobStatus]:
        data = self._json("squeue")
        try:
            return [_from_squeue(job) for job in data["jobs"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(
                f"unexpected squeue --json shape ({exc!r}); {_version(data)}"
            ) from exc

    def _sinfo(self) -> list[SchedulerNode]:
        data = self._json("sinfo")
        try:
            return [_node(node) for node in data["nodes"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(
                f"unexpected sinfo --json shape ({exc!r}); {_version(data)}"
            ) from exc


# --- what a job runs ----------------------------------------------------------------------


def batch_script(request: JobRequest, oom_memory_mebibytes: int) -> str:
    """The batch script for a probe. No behaviour needs a GPU library: the probe proves
    that the scheduler gives and takes back GPUs; the agent watches what happens on them."""
    work = request.workload
    hold = f"sleep {work.duration_seconds:g}"
    padding = canary_padding(request.run_id, work)
    body = {
        Behaviour.SLEEP: [hold],
        # no GPU code ships with the observer: the GPUs are allocated and held for the
        # duration, a known busy interval for the agent
        Behaviour.GPU_BUSY: [hold],
        # the padding is letters, digits, '=' and ':': safe in printf's format and in quotes
        Behaviour.LOG_CANARY: [
            f"for seq in $(seq 0 {work.log_lines - 1}); do",
            f"  printf '{CANARY_MARK} run=%s seq=%d ts=%s{padding}\\n' "
            f'{shlex.quote(request.run_id)} "$seq" "$(date +%s.%N)"',
            *([f"  sleep {work.log_interval_seconds:g}"] if work.log_interval_seconds else []),
            "done",
        ],
        # exec of a missing command ends the shell with 127 (command not found)
        Behaviour.BAD_COMMAND: ["exec observer-probe-no-such-command"],
        # Slurm has no images: a container entrypoint that does not exist stands in for an
        # image that cannot be pulled (with pyxis it would be --container-image); exits 127
        Behaviour.BAD_IMAGE: ["exec /nonexistent/observer-probe-image/entrypoint"],
        # four times --mem, held in a shell variable; slurmstepd kills the step if memory
        # is enforced (cgroups, or JobAcctGatherParams=OverMemoryKill): the job ends FAILED
        # by signal 9 or OUT_OF_MEMORY; unenforced, it holds the memory and exits normally
        Behaviour.OOM: [
            f"hog=$(head -c {4 * oom_memory_mebibytes * 1024 * 1024} /dev/zero | tr '\\0' x)",
            hold,
        ],
    }[work.behaviour]
    return "\n".join(["#!/bin/bash", *body, f"exit {work.exit_code}"]) + "\n"


def _time_limit_minutes(work: Workload, headroom_minutes: int) -> int:
    busy_seconds = max(work.duration_seconds, work.log_lines * work.log_interval_seconds)
    return math.ceil(busy_seconds / 60) + headroom_minutes


# --- reading Slurm's answers --------------------------------------------------------------


def _from_squeue(job: Mapping[str, Any]) -> JobStatus:
    state = str(job["job_state"])
    phase = _phase(state)
    exit_status = _wait_status(int(job["exit_code"])) if phase in _EXITED else None
    nodes = expand_hostlist(str(job["nodes"] or ""))
    reason = _reason(state, phase, str(job["state_reason"]), exit_status)
    return JobStatus(
        job_id=str(job["job_id"]),
        run_id=_run_id(str(job["comment"] or "")),
        tenant=str(job["account"]),
        queue=str(job["partition"]) or None,
        phase=phase,
        gpus=_gpus(job["tres_alloc_str"]) or _gpus(job["tres_req_str"]),
        submitted_at=_time(job["submit_time"]),
        started_at=_time(job["start_time"]) if _started(phase, nodes) else None,
        finished_at=_time(job["end_time"]) if phase.finished else None,
        reason=reason,
        message=str(job["state_description"] or "") or _message(state, reason, exit_status),
        exit_code=_exit_code(exit_status),
        nodes=nodes,
        owner_ids=(str(job["job_id"]),),  # the agents read it from the job's cgroup
        ending_since=_time(job["end_time"]) if state == "COMPLETING" else None,
    )


def parse_sacct(output: str) -> dict[str, JobStatus]:
    """`sacct --parsable2 --noheader --format=<_SACCT_FIELDS>` (SLURM_TIME_FORMAT=%s), by
    job id; a state or shape this reader does not know is a BackendError, not a guess."""
    lines = [line for line in output.splitlines() if line.strip()]
    try:
        return {s.job_id: s for s in map(_from_sacct, lines)}
    except ValueError as exc:
        raise BackendError(f"unexpected sacct output ({exc})") from exc


def _sacct_time(at: datetime) -> str:
    """An instant as sacct's -S/-E read it under TZ=UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _from_sacct(line: str) -> JobStatus:
    row = dict(zip(_SACCT_FIELDS, line.split("|", len(_SACCT_FIELDS) - 1), strict=True))
    state = row["State"].split()[0]  # "CANCELLED by 0"
    phase = _phase(state)
    code, _, signal = row["ExitCode"].partition(":")
    exit_status = (int(code), int(signal or 0)) if phase in _EXITED else None
    nodes = () if row["NodeList"] == "None assigned" else expand_hostlist(row["NodeList"])
    reason = _reason(state, phase, row["Reason"], exit_status)
    return JobStatus(
        job_id=row["JobIDRaw"],
        run_id=_run_id(row["Comment"]),
        tenant=row["Account"],
        queue=row["Partition"] or None,
        phase=phase,
        gpus=_gpus(row["AllocTRES"]) or _gpus(row["ReqTRES"]),
        submitted_at=_time(row["Submit"]),
        started_at=_time(row["Start"]) if _started(phase, nodes) else None,
        finished_at=_time(row["End"]) if phase.finished else None,
        reason=reason,
        message=_message(state, reason, exit_status),
        exit_code=_exit_code(exit_status),
        nodes=nodes,
        owner_ids=(row["JobIDRaw"],),
        ending_since=_time(row["End"]) if state == "COMPLETING" else None,
    )


def _node(node: Mapping[str, Any]) -> SchedulerNode:
    flags = {str(flag) for flag in node["state_flags"]}
    state = str(node["state"]).lower()
    if "DRAIN" in flags:
        # sinfo's words: draining while jobs still run on it, drained once empty
        busy = state in ("mixed", "allocated") or "COMPLETING" in flags
        state = "draining" if busy else "drained"
    if "NOT_RESPONDING" in flags:
        state += "*"  # sinfo marks a node that does not answer slurmctld's pings so
    partitions = [str(p) for p in node["partitions"]]
    return SchedulerNode(
        name=str(node["name"]),
        pool=",".join(partitions) or None,
        gpus_total=_gpus(node["tres"]),
        gpus_allocated=_gpus(node["tres_used"]),
        state=state,
        reason=str(node["reason"] or "") or None,
    )


def expand_hostlist(expression: str) -> tuple[str, ...]:
    """Slurm's hostlist syntax: 'n[1-3],gpu[01,05-06]' -> n1 n2 n3 gpu01 gpu05 gpu06."""
    names: list[str] = []
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", expression):
        names.extend(_expand_item(item))
    return tuple(names)


def _expand_item(item: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", item)
    if match is None:
        return [item]
    prefix, rest = item[: match.start()], item[match.end() :]
    names = []
    for part in match.group(1).split(","):
        first, _, last = part.partition("-")
        width = len(first)
        for number in range(int(first), int(last or first) + 1):
            names.extend(_expand_item(f"{prefix}{number:0{width}d}{rest}"))
    return names


def _started(phase: JobPhase, nodes: tuple[str, ...]) -> bool:
    # a pending job's start time is the backfill estimate; one that ended without nodes
    # (cancelled while pending, refused) carries start == end == that moment
    return phase is JobPhase.RUNNING or (phase.finished and bool(nodes))


def _phase(state: str) -> JobPhase:
    try:
        return _PHASES[state]
    except KeyError:
        raise ValueError(f"unknown Slurm job state {state!r}") from None


def _reason(
    state: str, phase: JobPhase, slurm_reason: str, exit_status: tuple[int, int] | None
) -> str | None:
    if slurm_reason and slurm_reason != "None":
        return slurm_reason
    if state == "FAILED" and exit_status is not None:
        return "RaisedSignal" if exit_status[1] else "NonZeroExitCode"
    if phase is JobPhase.FAILED:
        return _END_REASONS.get(state, state)
    return None


def _message(state: str, reason: str | None, exit_status: tuple[int, int] | None) -> str:
    text = state
    if reason:
        text += f", {reason}"
        explained = _REASON_TEXT.get(reason) or _limit_text(reason)
        if explained:
            text += f": {explained}"
    if exit_status is not None and exit_status != (0, 0):
        code, signal = exit_status
        text += f" (killed by signal {signal})" if signal else f" (exit code {code})"
    return text


def _limit_text(reason: str) -> str | None:
    # QOSMaxGRESPerJob, AssocGrpGRES...: a limit of the QOS or of the account's association
    if reason.startswith("QOS"):
        return f"held by a limit of the job's QOS ({reason[3:]})"
    if reason.startswith("Assoc"):
        return f"held by a limit of the job's account ({reason[5:]})"
    return None


def _wait_status(status: int) -> tuple[int, int]:
    """(return code, signal) from a raw wait status as squeue --json gives it."""
    return (status >> 8) & 0xFF, status & 0x7F


def _exit_code(exit_status: tuple[int, int] | None) -> int | None:
    """A shell's convention: a signal n reads as 128 + n."""
    if exit_status is None:
        return None
    code, signal = exit_status
    return 128 + signal if signal else code


def _run_id(comment: str) -> str | None:
    if comment.startswith(RUN_ID_COMMENT_PREFIX):
        return comment[len(RUN_ID_COMMENT_PREFIX) :] or None
    return None


def _gpus(tres: object) -> int:
    """The gres/gpu count of a TRES string such as 'cpu=1,node=1,gres/gpu=4'."""
    for item in str(tres or "").split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu":
            return int(value)
    return 0


def _time(value: object) -> datetime | None:
    """Slurm's unix seconds; 0, 'None' and 'Unknown' mean unset."""
    if isinstance(value, str) and not value.isdigit():
        return None
    seconds = int(str(value))
    return datetime.fromtimestamp(seconds, UTC) if seconds > 0 else None


def _slurm_words(stderr: str) -> str:
    lines = [re.sub(r"^\w+: error: ", "", line).strip() for line in stderr.splitlines()]
    return "; ".join(line for line in lines if line) or "no message"


def _error_words(errors: Iterable[Mapping[str, Any]]) -> str:
    return "; ".join(
        " ".join(str(e[k]) for k in ("source", "description", "error") if e.get(k)) for e in errors
    )


def _version(data: Mapping[str, Any]) -> str:
    meta = data.get("meta", {})
    return f"read as Slurm 22.05 openapi/v0.0.38, got {meta.get('plugin', {}).get('type', '?')}"
