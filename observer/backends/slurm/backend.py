"""The real SchedulerBackend over Slurm's own command-line tools: the calls.

Every call runs a program (commands.py) and reads its answer (parse.py); script.py says what a
probe submits, isolation.py how another account's jobs are tried, inference_service.py how the
inference probe's service is kept up (the ServiceBackend calls). Facts of Slurm 22.05 this
relies on:

- slurmctld forgets a job MinJobAge after it ends; slurmdbd keeps every job of every user, so
  jobs() falls back to sacct and finished_jobs() asks sacct alone.
- A listing of the whole queue (`squeue --json`, REQUEST_JOB_INFO) costs slurmctld a walk of
  every job it holds, and 22.05 ignores `--jobs` in JSON mode; `scontrol show job <id>` asks
  for that job alone (REQUEST_JOB_INFO_SINGLE). So the queue is listed once per snapshot, and
  jobs() reads the probes from that listing while it is fresh, one by one otherwise.
- `sacctmgr list transactions Start= End=` lists slurmdbd's changes made in [Start, End),
  to the second, read in sacctmgr's timezone like sacct's -S/-E.
- `sacct --state=<final states> -S -E` lists the jobs that ended in the period, bounds
  included (slurmdbd compares their end time); sacct reads -S/-E in its own timezone, so
  they are given in UTC with TZ=UTC.
- With `PrivateData=jobs`, slurmctld shows a user who is neither root, SlurmUser nor an
  operator (sacctmgr's AdminLevel Operator or Administrator) only that user's own jobs: every
  listing of the queue is then partial, which partial_view() says.
- A batch job requeued (its node failed, it was preempted, `scontrol requeue`) keeps its id;
  squeue counts the requeues (`restart_cnt`) and resets its submit time, and slurmdbd keeps
  each attempt as its own record, which sacct lists only with `--duplicates`.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from observer.backends.base import (
    FinishedJobs,
    PartialView,
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
    hidden_jobs,
    listed_nodes,
    node_listing,
    sacct_attempts,
    sacct_records,
    sbatch_job_id,
    scontrol_job,
    squeue_jobs,
)
from observer.backends.slurm.script import batch_script, output_path, sbatch_args
from observer.backends.slurm.transactions import quota_changes
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
# PrivateData changes only with a reconfiguration of slurmctld: checked with the snapshots,
# this often, one RPC to slurmctld (and one read of slurmdbd when jobs are private)
_VIEW_CHECK_INTERVAL = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Listing:
    """Every job slurmctld held at `at`, by id, as one listing of the queue showed them."""

    at: datetime
    jobs: Mapping[str, JobStatus]


class SlurmBackend(ServicesOf):
    """SchedulerBackend and ServiceBackend over Slurm's CLIs; see SlurmSettings for what it
    needs. `fresh_listing_seconds`: how old a listing of the queue may be and still answer
    jobs() (the follow interval: what the follow would have read itself); 0, never."""

    def __init__(
        self, settings: SlurmSettings, clock: Clock, fresh_listing_seconds: float = 0.0
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._fresh_listing_seconds = fresh_listing_seconds
        self._last: Listing | None = None  # replaced whole: the snapshot's thread writes it
        self._view: PartialView | None = None
        self._view_checked_at: datetime | None = None
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
        listed = listing.jobs if (listing := self._fresh()) is not None else {}
        found = {job_id: listed[job_id] for job_id in wanted if job_id in listed}
        # not in a fresh listing (none, or submitted since): asked of slurmctld one by one
        for job_id in sorted(wanted - found.keys(), key=int):
            if (status := self._job(job_id)) is not None:
                found[job_id] = status
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
        # listed now: a listing from before a submission that timed out would not show its job
        listing, _ = self._list()
        return [s for s in listing.jobs.values() if s.run_id is not None and not s.phase.finished]

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

    def partial_view(self) -> PartialView | None:
        return self._view

    def snapshot(self) -> SchedulerSnapshot:
        listing, queue = self._list()
        self._check_view()
        active = [s for s in listing.jobs.values() if not s.phase.finished]
        nodes = listed_nodes(self._commands.json(*node_listing(queue)))
        return SchedulerSnapshot(
            at=listing.at,
            queues=queue_states(active, listing.at),
            nodes=tuple(nodes),
            jobs=tuple(active),
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

    def _list(self) -> tuple[Listing, dict[str, Any]]:
        """The whole queue, listed now and kept for jobs(), and the document it was read from."""
        at = self._clock.now()
        queue = self._commands.queue()
        self._last = Listing(at, {s.job_id: s for s in squeue_jobs(queue)})
        return self._last, queue

    def _fresh(self) -> Listing | None:
        """The last listing while it is no older than fresh_listing_seconds. An older one
        answers nothing: a listing that failed leaves the one before to age out, and the reads
        it would have served go to slurmctld, or fail as its blind time."""
        last = self._last
        if last is None:
            return None
        age = (self._clock.now() - last.at).total_seconds()
        return last if age <= self._fresh_listing_seconds else None

    def _check_view(self) -> None:
        """Whether slurmctld hides other users' jobs from the observer's user, checked once
        per _VIEW_CHECK_INTERVAL. An AdminLevel slurmdbd cannot give (down) is asked again at
        the next snapshot, the view kept as it was."""
        now = self._clock.now()
        if self._view_checked_at is not None and now - self._view_checked_at < _VIEW_CHECK_INTERVAL:
            return
        done = self._commands.run("scontrol", ["show", "config"])
        if done.returncode != 0:
            raise BackendError(f"scontrol show config failed: {slurm_words(done.stderr)}")
        user = _user_name(os.geteuid())
        try:
            hidden = hidden_jobs(done.stdout, user, self._admin_level)
        except BackendError as exc:
            _log.warning("the observer's AdminLevel not read", user=user, error=str(exc))
            return
        self._view_checked_at = now
        if hidden is None:
            self._view = None
        elif self._view is None:
            self._view = PartialView(now, hidden)

    def _admin_level(self, user: str) -> str:
        return self._sacctmgr("user", user, "format=AdminLevel").strip() or "None"

    def _job(self, job_id: str) -> JobStatus | None:
        """One job as slurmctld holds it; None once it has forgotten it."""
        # --local: no REQUEST_FED_INFO before each (the observer reads its own cluster)
        done = self._commands.run(
            "scontrol",
            ["--local", "--oneliner", "show", "job", job_id],
            env={"SLURM_TIME_FORMAT": "%s"},
        )
        if done.returncode != 0:
            words = slurm_words(done.stderr)
            if "Invalid job id" in words and not unreachable(words):
                return None
            raise BackendError(f"scontrol show job {job_id} failed: {words}")
        return scontrol_job(done.stdout)


def _sacct_time(at: datetime) -> str:
    """An instant as sacct's -S/-E read it under TZ=UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _user_name(uid: int) -> str:
    """The user slurmctld knows this uid as; its number where the host has no name for it (a
    container's arbitrary uid), which sacctmgr then knows no AdminLevel of."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
