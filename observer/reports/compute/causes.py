"""Each failed task classed by its cause from the evidence around it: what its nodes and GPUs
went through while it ran (the agents' Xid and GPU health findings, the node drained or not
responding), and the platform's own words (OOM, image pull, admission, preemption, quota,
deadline). A task is a probe run or any tenant's job of the platform's listing; one the
platform names no node for is classed by its words alone. The acceptance guides ask that
every failure be judged a problem of the code, the driver, the node, the scheduling policy
or the platform's configuration; an outage of the platform's own infrastructure (its
authentication, its controller) is apart from its configuration. Pure.

The gpu-comm probe ending with its own status for pairs of its GPUs that could not reach each
other at their link's rate is a GPU fault (the GPUs or the links between them), named as such.

A probe that failed the way it is meant to (a fail-exit probe's non-zero exit, an OOM probe's
OOM: `probes.outcome.judge`) failed as designed, whatever happened around it: no one's fault.

A GPU finding on a task's node is the task's only where it was on a GPU the task held. No task
carries a list of GPUs: the findings name who held their GPU (the owner ids of its processes
when last seen, `gpu_owner_ids`, and an Xid's own process's, `owner_id`), and a task is known
by the owner ids its platform gave (`owner_ids`: Slurm's job id, the UIDs of a Kubernetes
Job's pods). So a finding on one GPU:
- names the task among its holders: the task's (GPU / driver, or its own application Xid);
- names only others: not the task's, left out;
- names no holder, or the task has no owner ids: it cannot be told, and a failure nothing
  else explains is unexplained, with that finding named as a possible cause; never GPU /
  driver, never the application's.
A finding on the whole node (NVML unavailable: its driver) is the task's. A node that failed
under the task is the node's fault (its drain, its state, the platform's NodeFail)."""

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
    Expectation,
    Finding,
    JobPhase,
    JobStatus,
    Outcome,
    ProbeRun,
    SchedulerNode,
)
from observer.errors import GpuCommunicationError
from observer.probes.catalog import GPU_COMM_PROBE
from observer.probes.outcome import (
    EXPECTED_FAILURES,
    OOM_EXIT_CODE,
    OOM_MARKS,
    START_FAILURE_REASONS,
    cancelled_by_observer,
    is_quota_reason,
    judge,
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
    # a probe that failed the way it is meant to: no platform fault, counted in no share
    AS_DESIGNED = "as_designed"


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
    owners: frozenset[str]  # the owner ids of its GPU processes, as its platform gave them
    submitted_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    pending_reasons: Mapping[str, float]


def classify(
    run: ProbeRun, findings: Sequence[Finding], node_changes: Sequence[StoredNodeChange]
) -> Classified | None:
    """The cause of a run that did not pass, or that passed after the platform ended an
    attempt of it (a node failure under it: the node's fault all the same); a run that passed
    by failing as its probe expects failed as designed. None for a clean pass, an unfinished
    run and one the observer itself cancelled (not the platform's doing)."""
    if run.outcome is None or cancelled_by_observer(run):
        return None
    if run.outcome is Outcome.PASSED:
        if run.attempts:
            return _classify(_attempt(run.attempts[0], run.owner_ids), findings, node_changes)
        if run.expectation in EXPECTED_FAILURES:
            return _as_designed(run.expectation, run.reason, run.exit_code)
        return None
    task = _Task(
        run.outcome,
        run.reason or "",
        run.message or "",
        run.exit_code,
        frozenset(run.node_names),
        frozenset(run.owner_ids),
        run.submitted_at,
        run.started_at,
        run.finished_at,
        run.pending_reasons,
    )
    if run.probe == GPU_COMM_PROBE and run.exit_code == GpuCommunicationError.exit_code:
        held = [_name(f) for f in _around(task, findings) if _gpu_fault(f) and _holds(task, f)]
        said = Note("cause.ev.gpu_comm", {"exit_code": run.exit_code})
        words = [_said(run.message)] if run.message else []  # the program's: the pairs
        return Classified(Cause.GPU_DRIVER, (said, *words, *held))
    return _classify(task, findings, node_changes)


def _attempt(attempt: Attempt, owners: Sequence[str]) -> _Task:
    return _Task(
        Outcome.FAILED,
        attempt.reason or attempt.state,
        "",
        None,
        frozenset(attempt.nodes),
        frozenset(owners),
        attempt.eligible_at,
        attempt.started_at,
        attempt.ended_at,
        {},
    )


def classify_job(
    job: JobStatus,
    findings: Sequence[Finding],
    node_changes: Sequence[StoredNodeChange],
    expectation: Expectation | None = None,
) -> Classified | None:
    """The cause of a job of the platform's listing that failed (None for any other).
    `expectation`: the probe's, for one of the observer's probes the controller still knows;
    its job failing as that expects failed as designed."""
    if job.phase is not JobPhase.FAILED:
        return None
    if expectation is not None and judge(expectation, job) is Outcome.PASSED:
        return _as_designed(expectation, job.reason, job.exit_code)
    task = _Task(
        Outcome.FAILED,
        job.reason or "",
        job.message or "",
        job.exit_code,
        frozenset(job.nodes),
        frozenset(job.owner_ids),
        job.submitted_at,
        job.started_at,
        job.finished_at,
        {},
    )
    return _classify(task, findings, node_changes)


def _as_designed(expectation: Expectation, reason: str | None, exit_code: int | None) -> Classified:
    """Its expectation and the platform's words on how it ended."""
    said = [_said(reason)] if reason else []
    ended = [] if exit_code is None else [Note("cause.ev.exit", {"exit_code": exit_code})]
    expected = Note("cause.ev.as_designed", {"expectation": expectation.value})
    return Classified(Cause.AS_DESIGNED, (expected, *said, *ended))


def _classify(
    task: _Task, findings: Sequence[Finding], node_changes: Sequence[StoredNodeChange]
) -> Classified:
    around = _around(task, findings)
    gpu = [f for f in around if _gpu_fault(f)]
    ours = [f for f in gpu if _holds(task, f)]
    if ours or task.ended is Outcome.NO_GPU:
        named = [_name(f) for f in ours] or [
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
    app = [
        _name(f) for f in around if f.detector == GPU_XID and not _gpu_fault(f) and _holds(task, f)
    ]
    failed = task.ended is Outcome.FAILED
    oom = any(mark in reason for mark in OOM_MARKS) or task.exit_code == OOM_EXIT_CODE
    ran_out = reason in _DEADLINES  # it started (held ones are above): past its own limit
    if failed and (oom or ran_out):
        decided = Note("cause.ev.oom") if oom else _said(reason)
        return Classified(Cause.APPLICATION, (decided, *app))
    # A GPU fault that may have been on its GPUs: an exit code alone does not rule it out.
    if maybe := [_name(f) for f in gpu if _holds(task, f) is None]:
        return Classified(Cause.UNEXPLAINED, (*maybe, Note("cause.ev.holder_unknown")))
    if failed and (app or task.exit_code not in (0, None)):
        return Classified(Cause.APPLICATION, (*_exit(task), *app))
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


def _holds(task: _Task, finding: Finding) -> bool | None:
    """Whether `finding` was on a GPU the task held; None where that cannot be told (the
    finding names no holder of its GPU, or the task has no owner ids)."""
    if set(finding.subject) <= {"node"}:
        return True  # the whole node's: every GPU of it, the task's among them
    held = holders(finding)
    if not held or not task.owners:
        return None
    return not held.isdisjoint(task.owners)


def holders(finding: Finding) -> frozenset[str]:
    """The owner ids a finding names on its GPU: its processes' when last seen, and the
    process an Xid names."""
    seen, named = finding.evidence.get("gpu_owner_ids"), finding.evidence.get("owner_id")
    held = [str(i) for i in seen] if isinstance(seen, list) else []
    return frozenset([*held, named] if isinstance(named, str) and named else held)


def _gpu_fault(finding: Finding) -> bool:
    if finding.detector == GPU_XID:
        return finding.evidence.get("xid_class") != _APPLICATION_XID
    return finding.detector in _GPU_FAULTS


def _name(finding: Finding) -> Note:
    """The finding, by its Xid or detector, its node and its GPU where it names one."""
    node, gpu = finding.subject.get("node", "?"), _gpu(finding)
    if xid := finding.subject.get("xid"):
        said = {"xid": xid, "node": node, "xid_meaning": xid}
        return Note("cause.ev.xid.gpu", {**said, "gpu": gpu}) if gpu else Note("cause.ev.xid", said)
    named = {"detector": finding.detector, "node": node}
    if gpu:
        return Note("cause.ev.finding.gpu", {**named, "gpu": gpu})
    return Note("cause.ev.finding", named)


def _gpu(finding: Finding) -> str | None:
    """The GPU a finding is on, by index where it says, else by uuid."""
    index = finding.evidence.get("gpu_index")
    if isinstance(index, int):
        return str(index)
    return finding.subject.get("gpu") or finding.subject.get("gpu_uuid")


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
