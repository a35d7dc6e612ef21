"""Unexplained waits: a pending probe with no reason, or with a reason the scheduler's own
state contradicts, beyond the grace period."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from observer.backends.kubernetes.status import QueueHold, kueue_hold, volcano_hold
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.detectors.unexplained_wait import (
    PendingJob,
    pending_probe,
    slurm_partition,
    unexplained_waits,
)
from observer.domain import (
    Expectation,
    JobPhase,
    JobStatus,
    ProbeRun,
    QueueState,
    RunState,
    SchedulerNode,
    SchedulerSnapshot,
)
from observer.settings.detectors import FairnessSettings

RULES = FairnessSettings()
T0 = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)


def pending(
    reason: str | None,
    message: str | None = None,
    *,
    gpus_per_node: int = 1,
    nodes: int = 1,
    tenant: str = "research",
    seconds: float | None = None,
) -> PendingJob:
    return PendingJob(
        job_id="4242",
        run_id="run-1",
        tenant=tenant,
        queue="gpu",
        reason=reason,
        message=message,
        reason_seconds=seconds,
        gpus=gpus_per_node * nodes,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
    )


def snapshot(
    *nodes: SchedulerNode, jobs: tuple[JobStatus, ...] = (), queues: tuple[QueueState, ...] = ()
) -> SchedulerSnapshot:
    return SchedulerSnapshot(at=T0, queues=queues, nodes=nodes, jobs=jobs)


FULL = (SchedulerNode("n1", "gpu", 4, 4, "allocated"), SchedulerNode("n2", "gpu", 4, 4, "mixed"))
ONE_FREE = (
    SchedulerNode("n1", "gpu", 4, 4, "allocated"),
    SchedulerNode("n2", "gpu", 4, 3, "mixed"),
)


def job(job_id: str, phase: JobPhase, tenant: str = "prod") -> JobStatus:
    return JobStatus(job_id, None, tenant, "gpu", phase, 1, reason="Priority")


def unstarted_probe(tenant: str, submitted: datetime) -> ProbeRun:
    return ProbeRun(
        run_id=f"{tenant}-{submitted:%H%M}-0",
        probe="fairness",
        tenant=tenant,
        queue=None,
        window="night",
        expectation=Expectation.SUCCEED,
        gpus=1,
        nodes=1,
        state=RunState.PENDING,
        job_id=f"job-{tenant}-{submitted:%H%M}",
        submitted_at=submitted,
    )


@pytest.mark.parametrize("reason", [None, "", "None", "Unknown"])
def test_a_probe_pending_with_no_reason_is_an_unexplained_wait(reason: str | None):
    [symptom] = unexplained_waits(pending(reason, seconds=300), snapshot(*FULL), RULES)
    assert symptom.detector == "unexplained_wait"
    assert symptom.subject == {"run_id": "run-1", "tenant": "research"}
    assert symptom.evidence["kind"] == "no_reason"
    assert symptom.hold_seconds == RULES.unexplained_wait_grace_seconds
    assert symptom.since == T0 - timedelta(seconds=300)  # as long as the runner has recorded


def test_no_reason_opens_only_after_the_grace_period():
    tracker = ConditionTracker()
    job_ = pending(None)
    for seconds in (0, 60, 119):
        now = T0 + timedelta(seconds=seconds)
        snap = replace(snapshot(*FULL), at=now)
        assert tracker.update(unexplained_waits(job_, snap, RULES), now, covers_all) == []
    now = T0 + timedelta(seconds=120)
    [opened] = tracker.update(
        unexplained_waits(job_, replace(snapshot(*FULL), at=now), RULES), now, covers_all
    )
    assert opened.detector == "unexplained_wait"


def test_resources_while_a_schedulable_node_has_the_gpus_free_is_unexplained():
    [symptom] = unexplained_waits(pending("Resources"), snapshot(*ONE_FREE), RULES)
    assert symptom.evidence["kind"] == "reason_contradicted"
    assert symptom.evidence["free_nodes"] == [
        {"node": "n2", "state": "mixed", "gpus_total": 4, "gpus_free": 1}
    ]
    assert "waits for 'Resources' while 1 schedulable node(s) have 1 GPU(s) free" in (
        symptom.summary
    )


def test_resources_with_no_free_gpus_is_explained():
    assert unexplained_waits(pending("Resources"), snapshot(*FULL), RULES) == []


@pytest.mark.parametrize(
    "node",
    [
        SchedulerNode("n3", "gpu", 4, 0, "drained", "bad gpu"),
        SchedulerNode("n3", "gpu", 4, 0, "down*"),
        SchedulerNode("n3", "gpu", 4, 0, "Ready,SchedulingDisabled", "cordoned"),
        SchedulerNode("n3", "gpu", 4, 0, "Ready", "taint nvidia.com/gpu=bad:NoSchedule"),
        SchedulerNode("n3", "gpu", 4, 2, "allocated"),  # its CPUs are taken
    ],
)
def test_free_gpus_on_a_node_that_takes_no_jobs_explain_a_resources_wait(node: SchedulerNode):
    assert unexplained_waits(pending("Resources"), snapshot(*FULL, node), RULES) == []


def test_free_gpus_must_fit_the_jobs_shape():
    # 1 GPU free on each of two nodes does not host a 2-GPU-per-node job, nor a 2-node one
    # needing 2 GPUs on each
    spread = (SchedulerNode("n1", "gpu", 4, 3, "mixed"), SchedulerNode("n2", "gpu", 4, 3, "mixed"))
    assert unexplained_waits(pending("Resources", gpus_per_node=2), snapshot(*spread), RULES) == []
    two_free = (
        SchedulerNode("n1", "gpu", 4, 2, "mixed"),
        SchedulerNode("n2", "gpu", 4, 4, "mixed"),
    )
    assert (
        unexplained_waits(
            pending("Resources", gpus_per_node=2, nodes=2), snapshot(*two_free), RULES
        )
        == []
    )


def test_only_nodes_the_job_may_use_count():
    other_partition = SchedulerNode("d1", "debug", 4, 0, "idle")
    job_ = pending("Resources")
    assert (
        unexplained_waits(job_, snapshot(*FULL, other_partition), RULES, eligible=slurm_partition)
        == []
    )
    assert unexplained_waits(job_, snapshot(*FULL, other_partition), RULES) != []


def test_kubernetes_unschedulable_is_checked_only_when_it_claims_insufficient_gpus():
    gpus = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    taints = "0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: infer}."
    nodes = (SchedulerNode("k1", "h200", 8, 7, "Ready"),)
    assert unexplained_waits(pending("Unschedulable", gpus), snapshot(*nodes), RULES) != []
    assert unexplained_waits(pending("Unschedulable", taints), snapshot(*nodes), RULES) == []


def test_priority_with_no_other_job_pending_is_unexplained():
    me = job("4242", JobPhase.PENDING, "research")
    running = job("1", JobPhase.RUNNING)
    [symptom] = unexplained_waits(pending("Priority"), snapshot(*FULL, jobs=(me, running)), RULES)
    assert "no other job is pending" in symptom.summary
    ahead = job("2", JobPhase.PENDING)
    assert unexplained_waits(pending("Priority"), snapshot(*FULL, jobs=(me, ahead)), RULES) == []


def test_a_quota_reason_is_checked_against_a_known_quota():
    queues = (QueueState("prod", "gpu", 1, 1, 2, 2, 60.0),)
    snap = snapshot(*FULL, queues=queues)
    waiting = pending("QuotaExceeded", tenant="prod")
    [symptom] = unexplained_waits(waiting, snap, RULES, quotas={"prod": 6})
    assert symptom.evidence["tenant_running_gpus"] == 2
    assert "holds 2 of its 6 GPUs" in symptom.summary
    assert unexplained_waits(waiting, snap, RULES, quotas={"prod": 2}) == []  # spent: explained
    assert unexplained_waits(waiting, snap, RULES) == []  # no quota known: not checked


def kueue_quota_hold() -> QueueHold | None:
    """The Kubernetes backend's words for a Workload Kueue has no quota for."""
    workload = {
        "metadata": {"name": "job-observer-hold-1a2b3", "namespace": "prod"},
        "spec": {"queueName": "prod-q"},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient unused "
                    "quota for nvidia.com/gpu in flavor default-flavor, 4 more needed",
                }
            ]
        },
    }
    return kueue_hold(workload, {"prod-q": "gpu-pool"})


def volcano_queue_hold() -> QueueHold | None:
    """The Kubernetes backend's words for a PodGroup Volcano's queue has not enqueued."""
    unschedulable = {
        "type": "Unschedulable",
        "status": "True",
        "reason": "NotEnoughResources",
        "message": "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable",
    }
    return volcano_hold(
        {
            "metadata": {"name": "podgroup-1", "namespace": "prod"},
            "spec": {"queue": "prod-q"},
            "status": {"phase": "Pending", "conditions": [unschedulable]},
        }
    )


@pytest.mark.parametrize("hold", [kueue_quota_hold(), volcano_queue_hold()])
def test_a_queue_holding_a_job_for_quota_is_a_quota_hold(hold: QueueHold | None):
    assert hold is not None
    queues = (QueueState("prod", "prod-q", 1, 4, 1, 4, 60.0),)
    snap = snapshot(*FULL, queues=queues)
    waiting = pending(hold.reason, hold.message, gpus_per_node=4, tenant="prod")
    assert unexplained_waits(waiting, snap, RULES, quotas={"prod": 4}) == []  # spent: explained
    [symptom] = unexplained_waits(waiting, snap, RULES, quotas={"prod": 8})
    assert symptom.evidence["kind"] == "reason_contradicted"
    assert "waits for its quota" in symptom.summary
    assert unexplained_waits(waiting, snap, RULES) == []  # no quota known: taken at its word


def test_kueues_words_for_a_spent_quota_are_a_quota_claim_whatever_the_reason():
    queues = (QueueState("prod", "gpu", 0, 0, 0, 0, 60.0),)
    words = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu"
    [symptom] = unexplained_waits(
        pending("Inadmissible", words, tenant="prod"),
        snapshot(*FULL, queues=queues),
        RULES,
        {"prod": 8},
    )
    assert "waits for its quota" in symptom.summary


@pytest.mark.parametrize(
    "reason", ["Dependency", "JobHeldUser", "ReqNodeNotAvail", "ImagePullBackOff", "BeginTime"]
)
def test_reasons_the_snapshot_cannot_settle_are_taken_at_the_platforms_word(reason: str):
    empty = (SchedulerNode("n1", "gpu", 4, 0, "idle"),)
    assert unexplained_waits(pending(reason), snapshot(*empty), RULES) == []


def test_a_pending_probe_run_carries_its_reason_and_how_long_it_was_given():
    run = replace(
        unstarted_probe("research", T0),
        gpus=8,
        nodes=2,
        queue="gpu",
        reason="Resources",
        pending_reasons={"Unknown": 3.0, "Resources": 95.0},
    )
    job_ = pending_probe(run)
    assert job_ is not None
    assert (job_.reason, job_.reason_seconds, job_.gpus_per_node, job_.nodes) == (
        "Resources",
        95.0,
        4,
        2,
    )
    assert pending_probe(replace(run, state=RunState.RUNNING)) is None
