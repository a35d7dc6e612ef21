"""Pure reading of Slurm's answers about jobs and nodes into the observer's words: `squeue
--json` and the node listing (`sinfo --json` of 22.05, `scontrol show nodes --json` from
23.02), in whichever family of shapes its release prints (observer.slurm_json), into
JobStatus and SchedulerNode (and, for the inference probe, into its replicas' jobs and the
nodes' addresses); `sacct --parsable2` and `scontrol --oneliner show job` (one job, read as
its sacct record is) into JobStatus; `sbatch --parsable` into a job id. A shape or state this
reader does not know is a BackendError, not a guess. (sacctmgr's transactions:
transactions.py.)

- `squeue --json` lists every job slurmctld still holds (finished ones for MinJobAge,
  default 300 s); 22.05 ignores `--jobs`/`--states`.
- `sacct --json` reports `{"status": "SUCCESS", "return_code": 0}` for a job that exited 3,
  so accounting is read from `sacct --parsable2` with `SLURM_TIME_FORMAT=%s` instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from observer.backends.slurm.script import RUN_ID_COMMENT_PREFIX, SERVICE_COMMENT_PREFIX
from observer.domain import Attempt, JobPhase, JobStatus, SchedulerNode
from observer.errors import BackendError
from observer.slurm_json import Dialect, ShapeError, dialect

T = TypeVar("T")

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
_OPERATORS = frozenset({"Operator", "Administrator"})  # sacctmgr's AdminLevels above None

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

# what parse_sacct reads, in this order: sacct is asked for --format=<these>
SACCT_FIELDS = (
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
    "QOS",
    "User",
    "Comment",  # last: the only field that may contain the separator
)


# `scontrol --oneliner show job`'s keys by the sacct field each stands for, the first printed
# read: 22.05's TRES is what the job holds once it runs, what it asks for until then
_SCONTROL_KEYS = {
    "JobIDRaw": ("JobId",),
    "Account": ("Account",),
    "Partition": ("Partition",),
    "State": ("JobState",),
    "ExitCode": ("ExitCode",),
    "Submit": ("SubmitTime",),
    "Start": ("StartTime",),
    "End": ("EndTime",),
    "Reason": ("Reason",),
    "NodeList": ("NodeList",),
    # 22.05 prints one TRES=, 23.02 on ReqTRES= and AllocTRES=
    "AllocTRES": ("AllocTRES", "TRES"),
    "ReqTRES": ("ReqTRES", "TRES"),
    "QOS": ("QOS",),
    "User": ("UserId",),  # "alice(1001)"
    "Comment": ("Comment",),
}
_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=")

# what sacct_attempts reads of `sacct --duplicates`: every attempt of a requeued job
ATTEMPT_FIELDS = ("JobIDRaw", "State", "Eligible", "Start", "End", "NodeList", "Reason")


def squeue_jobs(data: Mapping[str, Any]) -> list[JobStatus]:
    """Every job in `squeue --json`'s answer."""
    return _read("squeue --json", data, lambda d: [_from_squeue(job, d) for job in data["jobs"]])


@dataclass(frozen=True, slots=True)
class ReplicaJob:
    """A job of an inference service's replica: its status and what its comment says."""

    status: JobStatus
    service: str
    revision: int
    ordinal: int


def replica_jobs(data: Mapping[str, Any]) -> list[ReplicaJob]:
    """Every job in `squeue --json`'s answer that is a service's replica, oldest first."""

    def replicas(read: Dialect) -> list[ReplicaJob]:
        found = []
        for job in data["jobs"]:
            comment = str(job["comment"] or "")
            if not comment.startswith(SERVICE_COMMENT_PREFIX):
                continue
            service, revision, ordinal = comment[len(SERVICE_COMMENT_PREFIX) :].split("/")
            found.append(ReplicaJob(_from_squeue(job, read), service, int(revision), int(ordinal)))
        return sorted(found, key=lambda r: int(r.status.job_id))

    return _read("squeue --json", data, replicas)


def node_addresses(data: Mapping[str, Any]) -> dict[str, str]:
    """Each node's address in the node listing (NodeAddr, else NodeHostname, else its name):
    where a job on it is reached."""
    return _read(
        "the node listing",
        data,
        lambda _: {
            str(node["name"]): str(node.get("address") or node.get("hostname") or node["name"])
            for node in data["nodes"]
        },
    )


def node_listing(queue: Mapping[str, Any]) -> tuple[str, ...]:
    """The command, and its arguments, that lists the nodes one by one in the release that
    printed `queue` (a `squeue --json` answer)."""
    return _read("squeue --json", queue, lambda d: d.node_listing)


def listed_nodes(data: Mapping[str, Any]) -> list[SchedulerNode]:
    """Every node in the node listing (node_listing)."""
    return _read("the node listing", data, lambda d: [_node(node, d) for node in data["nodes"]])


def _read(what: str, data: Mapping[str, Any], read: Callable[[Dialect], T]) -> T:
    """`read` in the document's dialect; a document, or a field of it, in a shape the
    dialect does not know as one line naming the release and the field."""
    try:
        found = dialect(data)
    except ShapeError as exc:
        raise BackendError(f"{what}: {exc}") from None
    try:
        return read(found)
    except KeyError as exc:
        raise BackendError(f"{what} of {found}: no field {exc}") from None
    except (TypeError, ValueError) as exc:
        raise BackendError(f"{what} of {found}: unexpected shape ({exc})") from None


def parse_sacct(output: str) -> dict[str, JobStatus]:
    """`sacct --parsable2 --noheader --format=<SACCT_FIELDS>` (SLURM_TIME_FORMAT=%s), by
    job id; a state or shape this reader does not know is a BackendError, not a guess."""
    return {s.job_id: s for s in sacct_records(output)}


def sacct_records(output: str) -> list[JobStatus]:
    """The same answer record by record: with `--duplicates`, each attempt of a requeued job
    is a record of its own."""
    lines = [line for line in output.splitlines() if line.strip()]
    try:
        rows = [line.split("|", len(SACCT_FIELDS) - 1) for line in lines]
        return [_from_record(dict(zip(SACCT_FIELDS, row, strict=True))) for row in rows]
    except ValueError as exc:
        raise BackendError(f"unexpected sacct output ({exc})") from exc


def scontrol_job(output: str) -> JobStatus:
    """`scontrol --oneliner show job <id>` (SLURM_TIME_FORMAT=%s) of one job, read as its
    sacct record is, with its requeues (`Restarts`) and, once requeued, when its current
    attempt became eligible."""
    line = next((line for line in output.splitlines() if line.strip()), "")
    keys = list(_SCONTROL_KEY.finditer(line))
    values = {
        key[1]: line[key.end() : after.start() if after else None].strip()
        for key, after in zip(keys, [*keys[1:], None], strict=True)
    }
    try:
        row = {
            field: next((values[key] for key in keys if key in values), "")
            for field, keys in _SCONTROL_KEYS.items()
        }
        status = _from_record({**row, "User": row["User"].partition("(")[0]})
        restarts = int(values["Restarts"])
    except (KeyError, ValueError) as exc:
        raise BackendError(f"unexpected scontrol show job output ({exc}): {line[:200]!r}") from exc
    if not restarts:
        return status
    return replace(status, restarts=restarts, eligible_at=_time(values.get("EligibleTime")))


def sacct_attempts(output: str, restarts: Mapping[str, int]) -> dict[str, tuple[Attempt, ...]]:
    """The attempts that ended in a requeue, by job id, from `sacct --duplicates
    --parsable2 --noheader --format=<ATTEMPT_FIELDS>` (SLURM_TIME_FORMAT=%s): the first
    `restarts[job]` records of each job (slurmdbd lists them oldest first), those that ended."""
    records: dict[str, list[Attempt]] = {}
    try:
        for line in output.splitlines():
            if not line.strip():
                continue
            row = dict(zip(ATTEMPT_FIELDS, line.split("|"), strict=True))
            state = row["State"].split()[0]
            nodes = () if row["NodeList"] == "None assigned" else expand_hostlist(row["NodeList"])
            slurm_reason = row["Reason"] if row["Reason"] != "None" else ""
            records.setdefault(row["JobIDRaw"], []).append(
                Attempt(
                    eligible_at=_time(row["Eligible"]),
                    started_at=_time(row["Start"]) if nodes else None,
                    ended_at=_time(row["End"]),
                    nodes=nodes,
                    state=state,
                    reason=slurm_reason or _END_REASONS.get(state),
                )
            )
    except ValueError as exc:
        raise BackendError(f"unexpected sacct --duplicates output ({exc})") from exc
    return {
        job_id: tuple(a for a in attempts[: restarts.get(job_id, 0)] if a.ended_at)
        for job_id, attempts in records.items()
    }


def sbatch_job_id(stdout: str) -> str:
    """The job id `sbatch --parsable` printed: "<id>" or "<id>;<cluster>"."""
    job_id = stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise BackendError(f"sbatch --parsable printed {stdout.strip()!r}, not a job id")
    return job_id


def expand_hostlist(expression: str) -> tuple[str, ...]:
    """Slurm's hostlist syntax: 'n[1-3],gpu[01,05-06]' -> n1 n2 n3 gpu01 gpu05 gpu06."""
    names: list[str] = []
    for item in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", expression):
        names.extend(_expand_item(item))
    return tuple(names)


def _from_squeue(job: Mapping[str, Any], read: Dialect) -> JobStatus:
    state = read.job_state(job)
    phase = _phase(state)
    exit_status = read.exit_status(job) if phase in _EXITED else None
    nodes = expand_hostlist(str(job["nodes"] or ""))
    reason = _reason(state, phase, str(job["state_reason"]), exit_status)
    restarts = int(job.get("restart_cnt") or 0)
    return JobStatus(
        job_id=str(job["job_id"]),
        run_id=_run_id(str(job["comment"] or "")),
        service=_service(str(job["comment"] or "")),
        tenant=str(job["account"]),
        queue=str(job["partition"]) or None,
        phase=phase,
        gpus=_gpus(job["tres_alloc_str"]) or _gpus(job["tres_req_str"]),
        submitted_at=read.time(job, "submit_time"),
        started_at=read.time(job, "start_time") if _started(phase, nodes) else None,
        finished_at=read.time(job, "end_time") if phase.finished else None,
        reason=reason,
        message=str(job["state_description"] or "") or _message(state, reason, exit_status),
        exit_code=_exit_code(exit_status),
        nodes=nodes,
        owner_ids=(str(job["job_id"]),),  # the agents read it from the job's cgroup
        ending_since=read.time(job, "end_time") if state == "COMPLETING" else None,
        priority=str(job.get("qos") or "") or None,
        user=str(job.get("user_name") or "") or None,
        restarts=restarts,
        eligible_at=read.time(job, "eligible_time") if restarts else None,
        expected_start_at=_expected_start(
            phase, read.time(job, "start_time"), read.time(job, "submit_time")
        ),
    )


def _from_record(row: Mapping[str, str]) -> JobStatus:
    """A job from its SACCT_FIELDS, by name."""
    state = row["State"].split()[0]  # "CANCELLED by 0"
    phase = _phase(state)
    code, _, signal = row["ExitCode"].partition(":")
    exit_status = (int(code), int(signal or 0)) if phase in _EXITED else None
    nodes = () if row["NodeList"] == "None assigned" else expand_hostlist(row["NodeList"])
    reason = _reason(state, phase, row["Reason"], exit_status)
    return JobStatus(
        job_id=row["JobIDRaw"],
        run_id=_run_id(row["Comment"]),
        service=_service(row["Comment"]),
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
        priority=row["QOS"] or None,
        user=row["User"] or None,
        expected_start_at=_expected_start(phase, _time(row["Start"]), _time(row["Submit"])),
    )


def _node(node: Mapping[str, Any], read: Dialect) -> SchedulerNode:
    state, flags = read.node_state(node)
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


# What slurmctld gives a pending job it cannot place (no estimate from the backfill
# scheduler: the jobs ahead have no time limit, or it is beyond the backfill window): a start
# a year after a scheduling pass, whose clock can read a second before the job's submission
# (seen on 24.11). No real estimate lies a year out.
_NO_ESTIMATE_AFTER = timedelta(days=364)


def _expected_start(
    phase: JobPhase, start: datetime | None, submitted: datetime | None
) -> datetime | None:
    """A pending job's start time is the backfill scheduler's estimate; none when unset or
    slurmctld's year-ahead placeholder."""
    if phase is not JobPhase.PENDING or start is None:
        return None
    if submitted is not None and start - submitted >= _NO_ESTIMATE_AFTER:
        return None
    return start


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


def _service(comment: str) -> str | None:
    if comment.startswith(SERVICE_COMMENT_PREFIX):
        return comment[len(SERVICE_COMMENT_PREFIX) :].partition("/")[0] or None
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


def hidden_jobs(config: str, user: str, admin_level: Callable[[str], str]) -> str | None:
    """What slurmctld hides from `user` by its configuration (`scontrol show config`), in
    words, or None when it shows every job: PrivateData=jobs hides other users' jobs from all
    but root, SlurmUser and operators (`admin_level(user)`, sacctmgr's AdminLevel, asked only
    then)."""
    private = _config_value(config, "PrivateData") or "none"
    slurm_user = (_config_value(config, "SlurmUser") or "").partition("(")[0]
    if "jobs" not in private.split(",") or user in ("root", slurm_user):
        return None
    level = admin_level(user)
    if level in _OPERATORS:
        return None
    return (
        f"slurmctld shows {user} only its own jobs (PrivateData={private}, AdminLevel "
        f"{level}): other users' jobs and queues are not seen"
    )


def _config_value(config: str, key: str) -> str | None:
    """`key`'s value in `scontrol show config`'s `Key = value` lines; None when absent."""
    for line in config.splitlines():
        name, equals, value = line.partition("=")
        if equals and name.strip() == key:
            return value.strip()
    return None
