"""The Kubernetes translation of jobs, queues and nodes (status.py, queues.py, objects.py), on
API documents recorded as the API server returns them (tests/backends/kubernetes_api/), read
as the backend reads them: what it watches by wire.py's decoder, the rest by the client's own
deserializer."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient

from observer.backends.kubernetes import wire
from observer.backends.kubernetes.objects import controller_of, has_gpus, scheduler_node
from observer.backends.kubernetes.queues import (
    cluster_queue_quota,
    local_queue,
    quota_words,
    volcano_queue_quota,
)
from observer.backends.kubernetes.status import (
    QueueHold,
    ending_status,
    group_by_job,
    job_status,
    kueue_hold,
    pod_group_id,
    pod_group_status,
    volcano_hold,
)
from observer.domain import Attempt, JobPhase, JobStatus, LocalQueue, QueueQuota
from observer.probes.outcome import is_quota_reason
from tests.support.times import on_day

RECORDED = Path(__file__).parent / "kubernetes_api"
WIRE: dict[str, Callable[[str], Any]] = {
    "V1Pod": wire.PODS.object.decode,
    "V1Node": wire.NODES.object.decode,
    "V1Job": wire.JOBS.object.decode,
    "CoreV1EventList": wire.EVENTS.page.decode,
}
GPU = "nvidia.com/gpu"
POOL_LABEL = "nvidia.com/gpu.product"
UNSCHEDULABLE = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
    "available: 3 No preemption victims found for incoming pod."
)


def recorded(name: str, model: str, edit: Callable[[dict[str, Any]], None] | None = None) -> Any:
    """The document `name`.json as the client reads it from the API, `edit`ed first if given."""
    document = json.loads((RECORDED / f"{name}.json").read_text())
    if edit is not None:
        edit(document)
    if model in WIRE:
        return WIRE[model](json.dumps(document))
    return ApiClient().deserialize(json.dumps(document), model, "application/json")


def no_events() -> list[wire.CoreEvent]:
    return []


def warning_events() -> list[wire.CoreEvent]:
    return recorded("events_failed_scheduling", "CoreV1EventList").items


at = on_day(datetime(2025, 3, 4, tzinfo=UTC))


def pending_job_status(
    events: Callable[[], list[wire.CoreEvent]] = no_events,
    edit_pod: Callable[[dict[str, Any]], None] | None = None,
) -> JobStatus:
    job = recorded("job_pending", "V1Job")
    pod = recorded("pod_pending_unschedulable", "V1Pod", edit_pod)
    return job_status(job, group_by_job([pod]), events, GPU)


def drop_conditions(document: dict[str, Any]) -> None:
    del document["status"]["conditions"]


# --- Jobs waiting ---------------------------------------------------------------------------------


def test_a_job_is_known_by_its_namespace_name_and_the_observers_labels() -> None:
    status = pending_job_status()

    assert status.job_id == "research/observer-hold-3f1c2a9b7d"
    assert status.tenant == "research"
    assert status.run_id == "run-0042"
    assert status.queue == "research-gpu"
    assert status.submitted_at == at(10, 15, 0)


def test_a_job_asks_for_its_pod_templates_gpus_and_its_pods_are_its_owners() -> None:
    status = pending_job_status()

    assert status.gpus == 4
    assert status.owner_ids == ("6a2e9d14-0b7c-4c3f-a1e8-52f0c9d7b311",)
    assert status.nodes == ()


def test_a_job_whose_pod_the_scheduler_cannot_place_waits_for_podscheduled_false() -> None:
    status = pending_job_status()

    assert status.phase is JobPhase.PENDING
    assert status.started_at is None
    assert (status.reason, status.message) == ("Unschedulable", UNSCHEDULABLE)


def test_the_events_are_not_read_when_the_pods_condition_says_why_it_waits() -> None:
    def events() -> list[wire.CoreEvent]:
        raise AssertionError("events read")

    assert pending_job_status(events).reason == "Unschedulable"


def test_a_pod_without_a_podscheduled_condition_yet_waits_for_its_failedscheduling_event() -> None:
    status = pending_job_status(warning_events, drop_conditions)

    assert status.phase is JobPhase.PENDING
    assert (status.reason, status.message) == ("FailedScheduling", UNSCHEDULABLE)


def test_the_pods_of_an_earlier_job_of_the_same_name_are_not_the_jobs() -> None:
    def earlier_owner(document: dict[str, Any]) -> None:
        document["metadata"]["ownerReferences"][0]["uid"] = "11111111-2222-4333-8444-555555555555"

    status = pending_job_status(edit_pod=earlier_owner)

    assert status.owner_ids == ()
    assert (status.reason, status.message) == (None, None)


# --- other tenants' pods --------------------------------------------------------------------------


def test_a_bare_pod_is_work_under_its_own_name() -> None:
    pod = recorded("pod_image_pull_backoff", "V1Pod")

    assert pod_group_id("prod", pod, controller_of(pod.metadata)) == "prod/pod/cuda-smoke"


def test_a_pod_that_cannot_pull_its_image_waits_for_imagepullbackoff() -> None:
    pod = recorded("pod_image_pull_backoff", "V1Pod")

    status = pod_group_status("prod/pod/cuda-smoke", "prod", [pod], no_events, GPU)

    assert status.phase is JobPhase.PENDING
    assert status.reason == "ImagePullBackOff"
    assert status.message is not None
    assert status.message.startswith(
        'Back-off pulling image "registry.invalid/prod/cuda-smoke:1.0"'
    )
    assert (status.nodes, status.gpus, status.run_id) == (("gpu-node-2",), 1, None)


def test_a_replicasets_pod_is_work_under_its_replicaset() -> None:
    pod = recorded("pod_running", "V1Pod")

    assert (
        pod_group_id("prod", pod, controller_of(pod.metadata)) == "prod/replicaset/triton-7c9d8f6b5"
    )


def test_a_running_pod_runs_since_its_container_started_on_its_node() -> None:
    pod = recorded("pod_running", "V1Pod")

    status = pod_group_status("prod/replicaset/triton-7c9d8f6b5", "prod", [pod], no_events, GPU)

    assert status.phase is JobPhase.RUNNING
    assert (status.submitted_at, status.started_at) == (at(9, 40, 3), at(9, 41, 12))
    assert status.nodes == ("gpu-node-1",)
    assert status.owner_ids == ("2c7b1e9d-8f3a-4d6c-9e2b-5a4f3c1d0e97",)
    assert status.gpus == 2


def _lost_pod(document: dict[str, Any]) -> None:
    """The Job's first pod, run on gpu-node-2 until the node was lost under it."""
    document["spec"]["nodeName"] = "gpu-node-2"
    document["status"] = {
        "phase": "Failed",
        "reason": "NodeLost",
        "message": "Node gpu-node-2 which was running pod is unresponsive",
        "containerStatuses": [
            {
                "name": "probe",
                "ready": False,
                "restartCount": 0,
                "image": "observer:0",
                "imageID": "",
                "state": {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "Error",
                        "startedAt": "2025-03-04T10:15:30Z",
                        "finishedAt": "2025-03-04T10:20:00Z",
                    }
                },
            }
        ],
    }


def _replacement(document: dict[str, Any]) -> None:
    """The pod the job controller made in its place, running on gpu-node-1."""
    document["metadata"].update(
        name="observer-hold-3f1c2a9b7d-r9t4m",
        uid="9b8c7d6e-0000-4c3f-a1e8-52f0c9d7b312",
        creationTimestamp="2025-03-04T10:20:05Z",
    )
    document["spec"]["nodeName"] = "gpu-node-1"
    document["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "probe",
                "ready": True,
                "restartCount": 0,
                "image": "observer:0",
                "imageID": "",
                "state": {"running": {"startedAt": "2025-03-04T10:21:00Z"}},
            }
        ],
    }


def test_a_pod_replaced_under_a_running_job_is_an_ended_attempt_of_it() -> None:
    job = recorded("job_pending", "V1Job")
    lost = recorded("pod_pending_unschedulable", "V1Pod", _lost_pod)
    replacement = recorded("pod_pending_unschedulable", "V1Pod", _replacement)

    status = job_status(job, group_by_job([lost, replacement]), no_events, GPU)

    assert status.phase is JobPhase.RUNNING
    assert (status.nodes, status.started_at) == (("gpu-node-1",), at(10, 21, 0))
    assert (status.restarts, status.eligible_at) == (1, at(10, 20, 5))
    assert status.attempts == (
        Attempt(
            at(10, 15, 1), at(10, 15, 30), at(10, 20, 0), ("gpu-node-2",), "Failed", "NodeLost"
        ),
    )
    assert len(status.owner_ids) == 2  # the lost pod's processes may linger on its node


def test_a_terminating_pod_holds_its_gpus_until_its_deletion_deadline() -> None:
    pod = recorded("pod_terminating", "V1Pod")

    status = ending_status("prod/replicaset/triton-7c9d8f6b5", "prod", [pod], GPU)

    assert status.phase is JobPhase.CANCELLED
    assert status.ending_since == status.finished_at == at(11, 30, 30)
    assert (status.gpus, status.nodes) == (2, ("gpu-node-2",))
    assert status.owner_ids == ("5e3d1c9b-7a8f-4e2d-b1c0-9f8e7d6c5b4a",)
    assert (status.reason, status.message) == (
        "Terminating",
        "1 pod(s) Terminating on gpu-node-2, to be gone by 2025-03-04T11:30:30+00:00",
    )


# --- Jobs ended -----------------------------------------------------------------------------------


def test_a_complete_job_succeeded_at_its_completion_time() -> None:
    job = recorded("job_complete", "V1Job")

    status = job_status(job, {}, no_events, GPU)

    assert status.phase is JobPhase.SUCCEEDED
    assert (status.finished_at, status.exit_code) == (at(10, 25, 8), 0)
    assert (status.reason, status.message) == (None, None)


def test_a_job_past_its_backoff_limit_without_pods_fails_in_the_job_controllers_words() -> None:
    job = recorded("job_failed_backoff_limit", "V1Job")

    status = job_status(job, {}, no_events, GPU)

    assert status.phase is JobPhase.FAILED
    assert (status.reason, status.message) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    assert status.exit_code is None


def test_a_failed_job_ends_when_the_job_controller_set_failuretarget() -> None:
    job = recorded("job_failed_backoff_limit", "V1Job")

    assert job_status(job, {}, no_events, GPU).finished_at == at(10, 30, 4)


def test_a_failed_jobs_container_says_more_than_backofflimitexceeded() -> None:
    job = recorded("job_failed_backoff_limit", "V1Job")
    pod = recorded("pod_failed_start_error", "V1Pod")

    status = job_status(job, group_by_job([pod]), no_events, GPU)

    assert status.phase is JobPhase.FAILED
    assert (status.reason, status.exit_code) == ("StartError", 128)
    assert status.message is not None
    assert 'exec: "observer-no-such-command": executable file not found' in status.message
    assert status.nodes == ("gpu-node-2",)


def test_a_container_that_never_started_gives_its_job_no_start_time() -> None:
    job = recorded("job_failed_backoff_limit", "V1Job")
    pod = recorded("pod_failed_start_error", "V1Pod")

    assert job_status(job, group_by_job([pod]), no_events, GPU).started_at is None


# --- nodes ----------------------------------------------------------------------------------------


def test_a_ready_node_counts_its_allocatable_gpus_in_its_pool() -> None:
    node = recorded("node_gpu_tainted", "V1Node")

    translated = scheduler_node(node, 3, GPU, POOL_LABEL)

    assert has_gpus(node, GPU)
    assert (translated.name, translated.pool, translated.state) == (
        "gpu-node-2",
        "NVIDIA-H200",
        "Ready",
    )
    assert (translated.gpus_total, translated.gpus_allocated) == (8, 3)


def test_a_noschedule_taint_is_a_nodes_reason_and_a_prefernoschedule_taint_is_not() -> None:
    node = recorded("node_gpu_tainted", "V1Node")

    assert scheduler_node(node, 0, GPU, POOL_LABEL).reason == (
        "taint nvidia.com/gpu=present:NoSchedule"
    )


# --- Jobs their queue holds (Kueue, Volcano) -----------------------------------------------------

KUEUE_WORDS = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
    "flavor default-flavor, 4 more needed"
)
GANG_WORDS = "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable"


def workload(edit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((RECORDED / "workload_quota_pending.json").read_text())
    if edit is not None:
        edit(document)
    return document


def pod_group(phase: str = "Pending") -> dict[str, Any]:
    document: dict[str, Any] = json.loads((RECORDED / "podgroup_pending.json").read_text())
    document["status"]["phase"] = phase
    return document


def suspend(document: dict[str, Any]) -> None:
    document["spec"]["suspend"] = True


def held_job_status(hold: QueueHold | None, *, pods: bool) -> JobStatus:
    job = recorded("job_pending", "V1Job", suspend if not pods else None)
    listed = [recorded("pod_pending_unschedulable", "V1Pod")] if pods else []
    return job_status(job, group_by_job(listed), no_events, GPU, hold)


def test_a_job_kueue_has_no_quota_for_waits_in_kueues_words_naming_both_queues() -> None:
    hold = kueue_hold(workload(), {"research-gpu": "gpu-pool"})

    status = held_job_status(hold, pods=False)

    assert (status.phase, status.reason) == (JobPhase.PENDING, "QuotaReserved=False: Pending")
    assert (
        status.message == f"LocalQueue research/research-gpu (ClusterQueue gpu-pool): {KUEUE_WORDS}"
    )
    assert is_quota_reason(status.reason)


def test_a_workload_waiting_for_its_admission_checks_is_not_a_quota_hold() -> None:
    def reserved(document: dict[str, Any]) -> None:
        document["status"]["conditions"] = [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
            {"type": "Admitted", "status": "False", "reason": "Pending", "message": "checks"},
        ]

    hold = kueue_hold(workload(reserved), {"research-gpu": "gpu-pool"})

    assert hold is not None and hold.reason == "Admitted=False: Pending"
    assert not is_quota_reason(hold.reason)


def test_an_admitted_workload_holds_nothing() -> None:
    def admitted(document: dict[str, Any]) -> None:
        document["status"]["conditions"] = [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
            {"type": "Admitted", "status": "True", "reason": "Admitted"},
        ]

    assert kueue_hold(workload(admitted), {}) is None


def test_a_pod_group_volcano_has_not_enqueued_speaks_before_the_pods_scheduler() -> None:
    status = held_job_status(volcano_hold(pod_group()), pods=True)

    assert status.reason == "PodGroup Pending: NotEnoughResources"
    name = pod_group()["metadata"]["name"]
    assert status.message == f"Queue research-q: PodGroup {name}: {GANG_WORDS}"
    assert is_quota_reason(status.reason)


def test_once_enqueued_the_pods_own_conditions_say_why_they_wait() -> None:
    assert volcano_hold(pod_group("Inqueue")) is None
    assert held_job_status(None, pods=True).reason == "Unschedulable"


def document(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())
    return loaded


def test_a_cluster_queue_sums_its_gpu_flavors_quota_and_usage():
    team_a = local_queue(document("localqueue_team_a"))
    assert team_a == LocalQueue("research", "team-a", "team-a", 3, 4)
    elsewhere = LocalQueue("prod", "other", "elsewhere")
    quota = cluster_queue_quota(document("clusterqueue_team_a"), [elsewhere, team_a], GPU)

    assert quota == QueueQuota(
        system="kueue",
        name="team-a",
        resource=GPU,
        tenants=("research",),
        local_queues=(team_a,),
        nominal_gpus=8,
        borrowing_limit_gpus=2,
        used_gpus=10,
        reserved_gpus=10,
        borrowed_gpus=2,
        pending_workloads=3,
        admitted_workloads=4,
        cohort="gpu-cohort",
    )
    assert quota_words(quota) == (
        "10 of 8 nvidia.com/gpu nominal in use, borrowing limit 2, 2 borrowed, 3 workloads pending"
    )


def test_a_flavor_without_a_borrowing_limit_borrows_without_limit_and_no_cohort_none():
    def edit(cohort: str | None) -> dict[str, Any]:
        queue = document("clusterqueue_team_a")
        for flavor in queue["spec"]["resourceGroups"][0]["flavors"]:
            for resource in flavor["resources"]:
                resource.pop("borrowingLimit", None)
        queue["spec"]["cohort"] = cohort
        return queue

    assert cluster_queue_quota(edit("gpu-cohort"), {}, GPU).borrowing_limit_gpus is None
    assert cluster_queue_quota(edit(None), {}, GPU).borrowing_limit_gpus == 0


def test_a_volcano_queue_reads_its_weight_deserved_capability_state_and_podgroups():
    quota = volcano_queue_quota(document("volcano_queue"), ("research",), GPU)

    assert quota == QueueQuota(
        system="volcano",
        name="research-q",
        resource=GPU,
        tenants=("research",),
        nominal_gpus=4,
        borrowing_limit_gpus=4,
        used_gpus=4,
        pending_workloads=2,
        admitted_workloads=1,
        weight=2,
        state="Open",
    )
    assert quota_words(quota) == (
        "Open, weight 2, 4 of 4 nvidia.com/gpu deserved allocated, capability 8, "
        "2 PodGroups pending, 1 running"
    )
