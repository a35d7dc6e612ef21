"""The real SchedulerBackend over Slurm's own command-line tools: the calls.

Every call runs a program (commands.py) and reads its answer (parse.py); script.py says what a
probe submits, isolation.py how another account's jobs are tried, inference_service.py how the
inference probe's service is kept up (the ServiceBackend calls). Facts of Slurm 22.05 this
relies on:

- slurmctld forgets a job MinJobAge after it ends; slurmdbd keeps every job of every user, so
  jobs() falls back to sacct and finished_jobs() asks sacct alone.
- `sacctmgr list transactions Start= End=` lists slurmdbd's changes made in [Start, End),
  to the second, read in sacctmgr's timezone like sacct's -S/-E.
- `sacct --state=<final states> -S -E` lists the jobs that ended in the period, bounds
  included (slurmdbd compares their end time); sacct reads -S/-E in its own timezone, so
  they are given in UTC with TZ=UTC.
- A batch job requeued (its node failed, it was preempted, `scontrol requeue`) keeps its id;
  squeue counts the requeues (`restart_cnt`) and resets its submit time, and slurmdbd keeps
  each attempt as its own record, which sacct lists only with `--duplicates`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from observer.backends.base import (
    FinishedJobs,
    QuotaChange,
    ServicesOf,
    queue_states,
)
from observer.backends.slurm.commands import CommandTimeout, SlurmCommands, slurm_words, unreachable
from observer.backends.slurm.inference_service import SlurmServices
from observer.backends.slurm.isolation import IsolationProbe
from observer.backends.slurm.parse import (
    ATTEMPT_FIELDS,
    SACCT_FIELDS,
    listed_nodes,
    node_listing,
    quota_changes,
    sacct_attempts,
    sacct_records,
    sbatch_job_id,
    squeue_jobs,
)
from observer.backends.slurm.script import batch_script, output_path, sbatch_args
from observer.clock import Clock
from observer.domain import (
    AccessAttempt,
    Attempt,
    JobRequest,
    JobStatus,
    SchedulerSnapshot,
)
from observer.errors import BackendError, ProbeError
from observer.logging_setup import get_logger
from observer.settings.controller import SlurmSettings

_log = get_logger("observer.backends.slurm")

# sacct's short names of every final state, for --state
_FINAL_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,RV,TO"


class SlurmBackend(ServicesOf):
    """SchedulerBackend and ServiceBackend over Slurm's CLIs; see SlurmSettings for what it
    needs."""

    def __init__(self, settings: SlurmSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._output_dir = settings.output_dir.absolute()
        self._commands = SlurmCommands(settings)
        self._isolation = IsolationProbe(self._commands, settings, clock, self.cancel)
        self._services = SlurmServices(self._commands, settings, self._output_dir)

    # --- SchedulerBackend ---------------------------------------------------------------

    def submit(self, request: JobRequest) -> str:
        args = sbatch_args(request, self._settings, self._output_dir)
        script = batch_script(request, self._settings)
        self._output_dir.mkdir(parents=True, exist_ok=True)
        try:
            done = self._commands.run("sbatch", args, stdin=script)
        except CommandTimeout as exc:
            raise BackendError(
                f"{exc}; the job may have been submitted: probe_jobs() finds it by its run id"
            ) from exc
        if done.returncode != 0:
            words = slurm_words(done.stderr)
            if unreachable(words):
                raise BackendError(f"sbatch could not reach slurmctld: {words}")
            raise ProbeError(f"Slurm refused the job: {words}")
        return sbatch_job_id(done.stdout)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        wanted = {job_id for job_id in job_ids if job_id.isdigit()}
        if not wanted:
            return {}
        found = {s.job_id: s for s in self._squeue() if s.job_id in wanted}
        forgotten = wanted - found.keys()  # slurmctld drops a job MinJobAge after it ends
        if forgotten:
            found.update(self.accounting(forgotten))
        requeued = {job_id: s.restarts for job_id, s in found.items() if s.restarts}
        if requeued:
            for job_id, attempts in self._attempts(requeued).items():
                found[job_id] = replace(found[job_id], attempts=attempts)
        return found

    def cancel(self, job_id: str) -> None:
        if not job_id.isdigit():
            return  # not a Slurm job id, so no job of Slurm's
        # scancel exits 0 for a finished or unknown job id
        done = self._commands.run("scancel", [job_id])
        if done.returncode != 0:
            raise BackendError(f"scancel {job_id} failed: {slurm_words(done.stderr)}")

    def logs(self, job_id: str) -> str:
        path = output_path(self._output_dir, job_id)
        try:
            return path.read_text(errors="replace")
        except OSError as exc:
            raise BackendError(f"no output of job {job_id} at {path}: {exc.strerror}") from exc

    def probe_jobs(self) -> list[JobStatus]:
        return [s for s in self._squeue() if s.run_id is not None and not s.phase.finished]

    def close(self) -> None:
        return None  # every call is its own process: nothing is held open

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        return self._isolation.probe(as_tenant, other_tenant)

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        # slurmdbd keeps every job of every user: the listing is complete
        jobs = self._sacct(
            [
                "--allusers",
                "--duplicates",  # each attempt of a requeued job: a node failure counts
                f"--state={_FINAL_STATES}",
                f"--starttime={_sacct_time(since)}",
                f"--endtime={_sacct_time(until)}",
            ]
        )
        ended = [
            s
            for s in jobs
            if s.phase.finished and s.finished_at is not None and since <= s.finished_at < until
        ]
        return FinishedJobs(since, until, tuple(ended), complete=True)

    def quota_changes(self, since: datetime, until: datetime) -> list[QuotaChange]:
        # whole seconds down on both ends: the next period starts where this one stopped
        transactions = self._sacctmgr(
            "transactions",
            f"Start={_sacct_time(since)}",
            f"End={_sacct_time(until)}",
            "format=Time,Action,Actor,Where,Info",
        )
        if not any(f"|Modify {kind}|" in transactions for kind in ("Associations", "QOS")):
            return []
        return quota_changes(
            transactions,
            self._sacctmgr("associations", "withdeleted", "format=ID,Account,User"),
            self._sacctmgr("qos", "withdeleted", "format=ID,Name"),
            self._sacctmgr("tres", "withdeleted", "format=ID,Type,Name"),
        )

    def snapshot(self) -> SchedulerSnapshot:
        at = self._clock.now()
        queue = self._commands.queue()
        active = [s for s in squeue_jobs(queue) if not s.phase.finished]
        nodes = listed_nodes(self._commands.json(*node_listing(queue)))
        return SchedulerSnapshot(
            at=at, queues=queue_states(active, at), nodes=tuple(nodes), jobs=tuple(active)
        )

    # --- beyond the protocol ------------------------------------------------------------

    def accounting(self, job_ids: Iterable[str]) -> dict[str, JobStatus]:
        """These jobs as slurmdbd recorded them: what jobs() falls back to once slurmctld
        has forgotten a job. Records lag slurmctld by a moment."""
        ids = sorted({job_id for job_id in job_ids if job_id.isdigit()}, key=int)
        if not ids:
            return {}
        return {s.job_id: s for s in self._sacct([f"--jobs={','.join(ids)}"])}

    def _attempts(self, restarts: Mapping[str, int]) -> dict[str, tuple[Attempt, ...]]:
        """The ended attempts of these requeued jobs, as slurmdbd recorded them; none while
        it cannot be read (the runner then records each attempt as it saw it)."""
        ids = ",".join(sorted(restarts, key=int))
        try:
            output = self._sacct_text(["--duplicates", f"--jobs={ids}"], ATTEMPT_FIELDS)
        except BackendError as exc:
            _log.warning("attempts of requeued jobs not read", jobs=ids, error=str(exc))
            return {}
        return sacct_attempts(output, restarts)

    def _sacct(self, selection: list[str]) -> list[JobStatus]:
        """The job allocations sacct selects, one record each (an attempt each with
        `--duplicates`)."""
        return sacct_records(self._sacct_text(selection, SACCT_FIELDS))

    def _sacct_text(self, selection: list[str], columns: Sequence[str]) -> str:
        done = self._commands.run(
            "sacct",
            [
                "--allocations",
                "--parsable2",
                "--noheader",
                *selection,
                f"--format={','.join(columns)}",
            ],
            env={"SLURM_TIME_FORMAT": "%s", "TZ": "UTC"},
        )
        if done.returncode != 0:
            raise BackendError(f"sacct failed: {slurm_words(done.stderr)}")
        return done.stdout

    def _sacctmgr(self, entity: str, *options: str) -> str:
        """What `sacctmgr list <entity> <options>` printed, parsable, from slurmdbd."""
        done = self._commands.run(
            "sacctmgr",
            ["--parsable2", "--noheader", "list", entity, *options],
            env={"SLURM_TIME_FORMAT": "%s", "TZ": "UTC"},
        )
        if done.returncode != 0:
            raise BackendError(f"sacctmgr list {entity} failed: {slurm_words(done.stderr)}")
        return done.stdout

    def _squeue(self) -> list[JobStatus]:
        return squeue_jobs(self._commands.queue())


def _sacct_time(at: datetime) -> str:
    """An instant as sacct's -S/-E read it under TZ=UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
