"""Unexplained waits: a pending probe with no reason from the platform, or with a reason the
scheduler's own state contradicts, beyond a grace period (see `unexplained_waits`). Each is a
condition, opened by the tracker."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from observer.detectors.scheduler_terms import QUOTA_REASONS, takes_jobs
from observer.domain import (
    JobPhase,
    JsonValue,
    ProbeRun,
    RunState,
    SchedulerNode,
    SchedulerSnapshot,
    Severity,
    Symptom,
)
from observer.probes.outcome import QUEUE_QUOTA_HOLDS
from observer.settings.detectors import FairnessSettings

UNEXPLAINED_WAIT = "unexplained_wait"

# What schedulers answer when they give no reason: Slurm's "None", a controller's "Unknown".
_NO_REASON = frozenset({"", "none", "unknown"})
# Reasons that claim the job waits for GPUs to free up: Slurm's, and the Kubernetes scheduler's
# (pod condition or FailedScheduling event), the latter only when the message names the GPU.
_RESOURCE_REASONS = frozenset({"Resources"})
_SCHEDULING_REASONS = frozenset({"Unschedulable", "FailedScheduling"})
_INSUFFICIENT_GPU = re.compile(r"insufficient\s+\S*gpu", re.IGNORECASE)
# Kueue's / ResourceQuota's words for a spent quota, in a message (the reasons: QUOTA_REASONS,
# and the Kubernetes backend's QUEUE_QUOTA_HOLDS): "exceeded quota", "insufficient quota",
# Kueue's "insufficient unused quota".
_QUOTA_MESSAGE = re.compile(r"(exceeded|insufficient(\s+unused)?)\s+quota", re.IGNORECASE)
_TAINTED = re.compile(r":(NoSchedule|NoExecute)\b")


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job waiting in the queue, with the platform's reason and how long it has given it
    (None: unknown, the tracker counts from first sight)."""

    job_id: str
    run_id: str | None
    tenant: str
    queue: str | None
    reason: str | None
    message: str | None
    reason_seconds: float | None
    gpus: int
    gpus_per_node: int
    nodes: int


def pending_probe(run: ProbeRun) -> PendingJob | None:
    """A probe run as a PendingJob, if the platform holds it pending. The reason's duration is
    what the runner recorded for it (all stretches together; 'Unknown' for no reason)."""
    if run.state is not RunState.PENDING or run.job_id is None:
        return None
    nodes = max(run.nodes, 1)
    return PendingJob(
        job_id=run.job_id,
        run_id=run.run_id,
        tenant=run.tenant,
        queue=run.queue,
        reason=run.reason,
        message=run.message,
        reason_seconds=run.pending_reasons.get(run.reason or "Unknown"),
        gpus=run.gpus,
        gpus_per_node=-(-run.gpus // nodes),
        nodes=nodes,
    )


def any_node(job: PendingJob, node: SchedulerNode) -> bool:
    return True


def slurm_partition(job: PendingJob, node: SchedulerNode) -> bool:
    """Whether the node is in the job's partition (the Slurm backend's pool lists them)."""
    return job.queue is None or job.queue in (node.pool or "").split(",")


def unexplained_waits(
    job: PendingJob,
    snapshot: SchedulerSnapshot,
    rules: FairnessSettings,
    quotas: Mapping[str, int] | None = None,
    eligible: Callable[[PendingJob, SchedulerNode], bool] = any_node,
) -> list[Symptom]:
    """unexplained_wait symptoms for one pending job against the scheduler's state; each
    holds for the grace period before the tracker opens it.

    Checked, because the snapshot can settle them:
    - no reason at all (none, empty, 'None', 'Unknown');
    - a GPU-shortage reason ('Resources'; 'Unschedulable'/'FailedScheduling' whose message
      says insufficient GPUs) while enough schedulable nodes `eligible` for the job each have
      the job's GPUs per node free;
    - 'Priority' while no other job is pending anywhere: nothing can be ahead of it;
    - a quota reason while the tenant's running GPUs plus this job's stay within its quota.
    Not checked, as the snapshot cannot settle them: CPUs or memory short on a node with free
    GPUs, taints and selectors beyond what node states and reasons show, which job really has
    the higher priority, jobs hidden by the platform (Slurm PrivateData), reservations,
    dependencies, holds and image pulls; those reasons are taken at the platform's word."""
    symptoms = []
    reason = job.reason
    who = f"probe run {job.run_id}" if job.run_id else f"job {job.job_id}"
    base: dict[str, JsonValue] = {
        "job_id": job.job_id,
        "run_id": job.run_id,
        "tenant": job.tenant,
        "queue": job.queue,
        "reason": reason,
        "message": job.message,
        "reason_seconds": job.reason_seconds,
        "gpus": job.gpus,
        "gpus_per_node": job.gpus_per_node,
        "nodes": job.nodes,
    }
    grace = rules.unexplained_wait_grace_seconds

    def symptom(kind: str, summary: str, rule: str, evidence: Mapping[str, JsonValue]) -> Symptom:
        since = None
        if kind == "no_reason" and job.reason_seconds is not None:
            since = snapshot.at - timedelta(seconds=job.reason_seconds)
        return Symptom(
            detector=UNEXPLAINED_WAIT,
            subject={"run_id": job.run_id or job.job_id, "tenant": job.tenant},
            severity=Severity.WARNING,
            summary=summary,
            rule=rule,
            evidence={**base, "kind": kind, **evidence},
            hold_seconds=grace,
            since=since,
        )

    if (reason or "").strip().lower() in _NO_REASON:
        symptoms.append(
            symptom(
                "no_reason",
                f"{who} of {job.tenant} is pending and the platform gives no reason",
                f"pending with no reason from the platform for {grace:g} s",
                {},
            )
        )
        return symptoms
    if _claims_gpu_shortage(job):
        free = [
            node
            for node in snapshot.nodes
            if takes_jobs(node)
            # A tainted node may or may not take the probe: never counted as free for it.
            and not _TAINTED.search(node.reason or "")
            and eligible(job, node)
            and node.gpus_total - node.gpus_allocated >= job.gpus_per_node
        ]
        if len(free) >= job.nodes:
            symptoms.append(
                symptom(
                    "reason_contradicted",
                    f"{who} of {job.tenant} waits for '{reason}' while {len(free)} schedulable "
                    f"node(s) have {job.gpus_per_node} GPU(s) free",
                    f"the reason claims no GPUs while at least {job.nodes} schedulable node(s) "
                    f"each have the job's {job.gpus_per_node} GPU(s) free, for {grace:g} s",
                    {"free_nodes": [_node_evidence(node) for node in free]},
                )
            )
    elif reason == "Priority":
        others = [
            j for j in snapshot.jobs if j.job_id != job.job_id and j.phase is JobPhase.PENDING
        ]
        if not others:
            symptoms.append(
                symptom(
                    "reason_contradicted",
                    f"{who} of {job.tenant} waits for 'Priority' while no other job is pending",
                    f"the reason claims jobs ahead while no other job is pending, for {grace:g} s",
                    {"other_pending_jobs": 0},
                )
            )
    elif _claims_quota(job) and quotas is not None and job.tenant in quotas:
        quota = quotas[job.tenant]
        held = sum(q.running_gpus for q in snapshot.queues if q.tenant == job.tenant)
        if held + job.gpus <= quota:
            symptoms.append(
                symptom(
                    "reason_contradicted",
                    f"{who} of {job.tenant} waits for its quota ('{reason}') while the tenant "
                    f"holds {held} of its {quota} GPUs",
                    f"the reason claims the quota is spent while the tenant's running GPUs plus "
                    f"the job's stay within its quota, for {grace:g} s",
                    {"tenant_running_gpus": held, "quota_gpus": quota},
                )
            )
    return symptoms


def _claims_gpu_shortage(job: PendingJob) -> bool:
    if job.reason in _RESOURCE_REASONS:
        return True
    text = f"{job.reason} {job.message or ''}"
    return job.reason in _SCHEDULING_REASONS and bool(_INSUFFICIENT_GPU.search(text))


def _claims_quota(job: PendingJob) -> bool:
    reason = job.reason or ""
    return (
        reason in QUOTA_REASONS
        or reason.startswith(QUEUE_QUOTA_HOLDS)
        or bool(_QUOTA_MESSAGE.search(job.message or ""))
    )


def _node_evidence(node: SchedulerNode) -> dict[str, JsonValue]:
    return {
        "node": node.name,
        "state": node.state,
        "gpus_total": node.gpus_total,
        "gpus_free": node.gpus_total - node.gpus_allocated,
    }
