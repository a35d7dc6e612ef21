"""Each failed task classed by its cause from the evidence around it: what its nodes and GPUs
went through while it ran (the agents' Xid and GPU health findings, the node drained or not
responding), and the platform's own words (OOM, image pull, admission, preemption, quota,
deadline). A task is a probe run or any tenant's job of the platform's listing; one the
platform names no node for is classed by its words alone. The acceptance guides ask that
every failure be judged a problem of the code, the driver, the node, the scheduling policy
or the platform's configuration; an outage of the platform's own infrastructure (its
authentication, its controller) is apart from its configuration. Pure."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from observer.detectors.gpu_health import ECC_UNCORRECTED, GPU_XID, ROW_REMAP_FAILED
from observer.detectors.scheduler_terms import in_service
from observer.domain import (
    Attempt,
    Finding,
    JobPhase,
    JobStatus,
    Outcome,
    ProbeRun,
    SchedulerNode,
)
from observer.probes.outcome import (
    OOM_EXIT_CODE,
    OOM_MARKS,
    START_FAILURE_REASONS,
    cancelled_by_observer,
    is_quota_reason,
)
from observer.records import StoredNodeChange
from observer.reports.compute.notes import Note


class Cause(StrEnum):
    APPLICATION = "application"  # the job's own code or data: non-zero exit, OOM, app Xid
    GPU_DRIVER = "gpu_driver"  # the GPU or its driver: fatal Xid, GPU lost, ECC, no GPU
    NODE = "node"  # the node: drained or not responding while it ran, node failure
    SCHEDULING = "scheduling"  # preempted, held by quota or pending until the deadline
    PLATFORM_CONFIGURATION = "platform_configuration"  # image, admission, missing secret
    # the platform's own infrastructure out: authentication (munge, an expired token, TLS),
    # its controller unreachable; nothing to fix in the job or the platform's settings
    PLATFORM_OUTAGE = "platform_outage"
    UNEXPLAINED = "unexplained"


# GPU findings of the agents that put the GPU or its driver at fault; an Xid whose class is
# the application's is the job's own.
_GPU_FAULTS = frozenset({ROW_REMAP_FAILED, ECC_UNCORRECTED, "gpu_lost", "nvml_unavailable"})
_APPLICATION_XID = "application"
_NODE_REASONS = (
    "NodeFail",
    "NODE_FAIL",
    "NodeLost",
    "NodeNotReady",
    "NodeShutdown",
    "node failure",
    "NodeDown",  # Slurm's NODE_FAIL
    "BootFail",  # Slurm's BOOT_FAIL: the node could not be booted for it
)
_PREEMPTION = ("Preempt", "PREEMPT", "Evicted")
# How the platforms word their infrastructure or authentication failing, as opposed to a
# request refused: Slurm's munge and slurmctld, the API server's 401 and TLS.
_OUTAGE_MARKS = (
    "Munge",
    "munge",
    "Invalid authentication credential",
    "Unable to contact slurm controller",
    "Socket timed out",
    "Communication connection failure",
    "Zero Bytes were transmitted",
    "Unauthorized",
    "x509:",
    "tls:",
    "CERTIFICATE_VERIFY_FAILED",
)
_CONFIG_REASONS = frozenset(
    {*START_FAILURE_REASONS, "CreateContainerConfigError", "FailedMount", "Forbidden"}
)
# The job's own time limit or deadline (Slurm's TIMEOUT and DEADLINE, a Kubernetes Job's
# activeDeadlineSeconds): reached running, it ran longer than it asked for; never started,
# it was held until then.
_DEADLINES = frozenset({"TimeLimit", "DeadLine", "DeadlineExceeded"})
# Findings a little before a run's start or after its end are still its evidence (an Xid
# logged as the job dies, a drain just before the platform noticed).
MARGIN = timedelta(minutes=2)


@dataclass(frozen=True, slots=True)
class Classified:
    cause: Cause
    # What decided it, with its ids, codes and the platform's words as they are: findings
    # ("Xid 79 on node-3"), nodes gone out of service, reasons, exit codes.
    evidence: tuple[Note, ...]


@dataclass(frozen=True, slots=True)
class _Task:
    """What the rules read of a task that did not pass, a probe run or any tenant's job."""

    ended: Outcome  # a failed job of the listing ended FAILED
    reason: str  # the platform's; "" when it gave none
    message: str  # the platform's words beside the reason; "" when none
    exit_code: int | None
    nodes: frozenset[str]
    submitted_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    pending_reasons: Mapping[str, float]


def classify(
    run: ProbeRun, findings: Sequence[Finding], node_changes: Sequence[StoredNodeChange]
) -> Classified | None:
    """The cause of a run that did not pass, or that passed after the platform ended an
    attempt of it (a node failure under it: the node's fault all the same). None for a clean
    pass, an unfinished run and one the observer itself cancelled (not the platform's
    doing)."""
    if run.outcome is None or cancelled_by_observer(run):
        return None
    if run.outcome is Outcome.PASSED:
        ended = run.attempts[:1]
        return _classify(_attempt(ended[0]), findings, node_changes) if ended else None
    task = _Task(
        run.outcome,
        run.reason or "",
        run.message or "",
        run.exit_code,
        frozenset(run.node_names),
        run.submitted_at,
        run.started_at,
        run.finished_at,
        run.pending_reasons,
    )
    return _classify(task, findings, node_changes)


def _attempt(attempt: Attempt) -> _Task:
    return _Task(
        Outcome.FAILED,
        attempt.reason or attempt.state,
        "",
        None,
        frozenset(attempt.nodes),
        attempt.eligible_at,
        attempt.started_at,
        attempt.ended_at,
        {},
    )


def classify_job(
    job: JobStatus, findings: Sequence[Finding], node_changes: Sequence[StoredNodeChange]
) -> Classified | None:
    """The cause of a job of the platform's listing that failed (None for any other)."""
    if job.phase is not JobPhase.FAILED:
        return None
    task = _Task(
        Outcome.FAILED,
        job.reason or "",
        job.message or "",
        job.exit_code,
        frozenset(job.nodes),
        job.submitted_at,
        job.started_at,
        job.finished_at,
        {},
    )
    return _classify(task, findings, node_changes)


def _classify(
    task: _Task, findings: Sequence[Finding], node_changes: Sequence[StoredNodeChange]
) -> Classified:
    around = _around(task, findings)
    gpu = [f for f in around if _gpu_fault(f)]
    if gpu or task.ended is Outcome.NO_GPU:
        named = [_name(f) for f in gpu] or [
            Note("cause.ev.no_gpu", {"outcome": Outcome.NO_GPU.value, "exit_code": task.exit_code})
        ]
        return Classified(Cause.GPU_DRIVER, tuple(named))
    reason = task.reason
    left = _out_of_service(task, node_changes)
    if left or any(mark in reason for mark in _NODE_REASONS):
        return Classified(Cause.NODE, tuple(left) or (_said(reason),))
    if outage := next((w for w in (reason, task.message) if _outage(w)), None):
        return Classified(Cause.PLATFORM_OUTAGE, (_said(outage),))
    if reason in _CONFIG_REASONS or task.ended is Outcome.REJECTED:
        said = _said(reason) if reason else Note("cause.ev.outcome", {"outcome": task.ended.value})
        return Classified(Cause.PLATFORM_CONFIGURATION, (said,))
    if any(mark in reason for mark in _PREEMPTION):
        return Classified(Cause.SCHEDULING, (_said(reason),))
    if task.started_at is None and (task.ended is Outcome.TIMED_OUT or reason in _DEADLINES):
        pending = task.pending_reasons
        held = max(pending, key=pending.__getitem__, default=reason)
        words = {"reason_words": held or None}
        why = (
            Note("cause.ev.quota", words)
            if is_quota_reason(held)
            else Note("cause.ev.pending", words)
        )
        return Classified(Cause.SCHEDULING, (why,))
    app = [_name(f) for f in around if f.detector == GPU_XID and not _gpu_fault(f)]
    oom = any(mark in reason for mark in OOM_MARKS) or task.exit_code == OOM_EXIT_CODE
    ran_out = reason in _DEADLINES  # it started (held ones are above): past its own limit
    if task.ended is Outcome.FAILED and (oom or ran_out or app or task.exit_code not in (0, None)):
        decided = [Note("cause.ev.oom")] if oom else [_said(reason)] if ran_out else _exit(task)
        return Classified(Cause.APPLICATION, (*decided, *app))
    return Classified(Cause.UNEXPLAINED, ())


def _outage(words: str) -> bool:
    return any(mark in words for mark in _OUTAGE_MARKS)


def _said(reason: str) -> Note:
    return Note("cause.ev.said", {"words": reason})


def _exit(task: _Task) -> list[Note]:
    return [] if task.exit_code is None else [Note("cause.ev.exit", {"exit_code": task.exit_code})]


def _around(task: _Task, findings: Sequence[Finding]) -> list[Finding]:
    """The findings on the task's nodes while it ran (or, never started, while it waited)."""
    began = task.started_at or task.submitted_at
    ended = task.finished_at or began
    if began is None or ended is None:
        return []
    start, end = began - MARGIN, ended + MARGIN
    return [
        f
        for f in findings
        if f.subject.get("node") in task.nodes
        and f.opened_at <= end
        and (f.closed_at is None or f.closed_at >= start)
    ]


def _gpu_fault(finding: Finding) -> bool:
    if finding.detector == GPU_XID:
        return finding.evidence.get("xid_class") != _APPLICATION_XID
    return finding.detector in _GPU_FAULTS


def _name(finding: Finding) -> Note:
    node = finding.subject.get("node", "?")
    if xid := finding.subject.get("xid"):
        return Note("cause.ev.xid", {"xid": xid, "node": node, "xid_meaning": xid})
    return Note("cause.ev.finding", {"detector": finding.detector, "node": node})


def _out_of_service(task: _Task, changes: Sequence[StoredNodeChange]) -> list[Note]:
    """Its nodes' changes to out of service while it ran ("node-3 drained (reason)");
    `changes` in time order (a week of a large fleet's: only the run's stretch is read)."""
    if task.started_at is None:
        return []
    end = (task.finished_at or task.started_at) + MARGIN
    first = bisect_left(changes, task.started_at, key=_at)
    return [
        _left(c.node)
        for c in changes[first : bisect_right(changes, end, key=_at)]
        if c.node.name in task.nodes and not in_service(c.node)
    ]


def _left(node: SchedulerNode) -> Note:
    params = {"node": node.name, "state": node.state}
    if node.reason:
        return Note("cause.ev.node_left.said", {**params, "reason_words": node.reason})
    return Note("cause.ev.node_left", params)


def _at(change: StoredNodeChange) -> datetime:
    return change.at
