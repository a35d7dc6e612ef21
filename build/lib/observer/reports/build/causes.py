"""Each failed task classed by its cause from the evidence around it: what its nodes and GPUs
went through while it ran (the agents' Xid and GPU health findings, the node drained or not
responding), and the platform's own words (OOM, image pull, admission, preemption, quota,
deadline). A task is a probe run or any tenant's job of the platform's listing; one the
platform names no node for is classed by its words alone. The acceptance guides ask that
every failure be judged a problem of the code, the driver, the node, the scheduling policy
or the platform's configuration. Pure."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from observer.detectors.gpu_health import ECC_UNCORRECTED, GPU_XID, ROW_REMAP_FAILED
from observer.detectors.scheduler_terms import in_service
from observer.domain import Finding, JobPhase, JobStatus, Outcome, ProbeRun
from observer.probes.outcome import (
    OOM_EXIT_CODE,
    OOM_MARKS,
    START_FAILURE_REASONS,
    is_quota_reason,
)
from observer.records import StoredNodeChange


class Cause(StrEnum):
    APPLICATION = "application"  # the job's own code or data: non-zero exit, OOM, app Xid
    GPU_DRIVER = "gpu_driver"  # the GPU or its driver: fatal Xid, GPU lost, ECC, no GPU
    NODE = "node"  # the node: drained or not responding while it ran, node failure
    SCHEDULING = "scheduling"  # preempted, held by quota or pending until the deadline
    PLATFORM_CONFIGURATION = "platform_configuration"  # image, admission, missing secret
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
    # What decided it, in ids and the platform's words (no sentence: reports of either
    # language show it as it is): findings ("gpu_xid 79 on node-3"), reasons, exit codes.
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Task:
    """What the rules read of a task that did not pass, a probe run or any tenant's job."""

    ended: Outcome  # a failed job of the listing ended FAILED
    reason: str  # the platform's; "" when it gave none
    exit_code: int | None
    nodes: frozenset[str]
    submitted_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    pending_reasons: Mapping[str, float]


def classify(
    run: ProbeRun, findings: Sequence[Finding], node_changes: Sequence[StoredNodeChange]
) -> Classified | None:
    """The cause of a run that did not pass (None for a pass or an unfinished run)."""
    if run.outcome is None or run.outcome is Outcome.PASSED:
        return None
    task = _Task(
        run.outcome,
        run.reason or "",
        run.exit_code,
        frozenset(run.node_names),
        run.submitted_at,
        run.started_at,
        run.finished_at,
        run.pending_reasons,
    )
    return _classify(task, findings, node_changes)


def classify_job(
    job: JobStatus, findings: Sequence[Finding], node_changes: Sequence[StoredNodeChange]
) -> Classified | None:
    """The cause of a job of the platform's listing that failed (None for any other)."""
    if job.phase is not JobPhase.FAILED:
        return None
    task = _Task(
        Outcome.FAILED,
        job.reason or "",
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
        named = [_name(f) for f in gpu] or [f"{Outcome.NO_GPU.value} (exit {task.exit_code})"]
        return Classified(Cause.GPU_DRIVER, tuple(named))
    reason = task.reason
    left = _out_of_service(task, node_changes)
    if left or any(mark in reason for mark in _NODE_REASONS):
        return Classified(Cause.NODE, tuple(left) or (reason,))
    if reason in _CONFIG_REASONS or task.ended is Outcome.REJECTED:
        return Classified(Cause.PLATFORM_CONFIGURATION, (reason or task.ended.value,))
    if any(mark in reason for mark in _PREEMPTION):
        return Classified(Cause.SCHEDULING, (reason,))
    if task.started_at is None and (task.ended is Outcome.TIMED_OUT or reason in _DEADLINES):
        pending = task.pending_reasons
        held = max(pending, key=pending.__getitem__, default=reason)
        why = "quota" if is_quota_reason(held) else "pending"
        return Classified(Cause.SCHEDULING, (f"{why}: {held or '—'}",))
    app = [_name(f) for f in around if f.detector == GPU_XID and not _gpu_fault(f)]
    oom = any(mark in reason for mark in OOM_MARKS) or task.exit_code == OOM_EXIT_CODE
    ran_out = reason in _DEADLINES  # it started (held ones are above): past its own limit
    if task.ended is Outcome.FAILED and (oom or ran_out or app or task.exit_code not in (0, None)):
        said = "OOM" if oom else reason if ran_out else _exit(task.exit_code)
        return Classified(Cause.APPLICATION, tuple(w for w in (said, *app) if w))
    return Classified(Cause.UNEXPLAINED, ())


def _exit(code: int | None) -> str:
    return "" if code is None else f"exit {code}"


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


def _name(finding: Finding) -> str:
    xid = finding.subject.get("xid")
    what = f"{finding.detector} {xid}" if xid else finding.detector
    return f"{what} on {finding.subject.get('node', '?')}"


def _out_of_service(task: _Task, changes: Sequence[StoredNodeChange]) -> list[str]:
    """Its nodes' changes to out of service while it ran, as "node-3 drained (reason)";
    `changes` in time order (a week of a large fleet's: only the run's stretch is read)."""
    if task.started_at is None:
        return []
    end = (task.finished_at or task.started_at) + MARGIN
    first = bisect_left(changes, task.started_at, key=_at)
    return [
        f"{c.node.name} {c.node.state}" + (f" ({c.node.reason})" if c.node.reason else "")
        for c in changes[first : bisect_right(changes, end, key=_at)]
        if c.node.name in task.nodes and not in_service(c.node)
    ]


def _at(change: StoredNodeChange) -> datetime:
    return change.at
