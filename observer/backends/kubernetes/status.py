"""Pure translation of API objects into the observer's words, read the way kubectl shows them.

A Job's status comes from its conditions, its pods' container states, the scheduler's
PodScheduled condition and Warning events; other tenants' work is a group of pods with the id
"<namespace>/<owner kind>/<owner name>" ("<namespace>/pod/<pod name>" for a bare pod); a node
is its Ready condition, cordon, taints and GPUs; a ResourceQuota's changes are its managers'
latest writes of spec.hard (metadata.managedFields), a ClusterQueue's those of its quotas,
each by the user the API server's audit log names where it is read. A job its queue holds
(Kueue's Workload without quota, Volcano's PodGroup not enqueued) waits for the queue, in the
queue's words, with the quota and usage of the queue that holds it (a ClusterQueue, a
Volcano Queue).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from kubernetes import client

from observer.backends.base import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    RUN_ID_LABEL,
    QuotaChange,
    Replica,
)
from observer.backends.kubernetes.audit import AuditWrite
from observer.backends.kubernetes.manifests import QUEUE_LABEL, SERVICE_LABEL
from observer.domain import JobPhase, JobStatus, LocalQueue, QueueQuota, SchedulerNode
from observer.errors import BackendError
from observer.probes.outcome import KUEUE_QUOTA_HOLD, VOLCANO_QUEUE_HOLD

TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
_SUCCEEDED_CONDITIONS = frozenset({"Complete", "SuccessCriteriaMet"})
_FAILED_CONDITIONS = frozenset({"Failed", "FailureTarget"})  # FailureTarget: 1.31+, before Failed
_FINAL_CONDITIONS = _SUCCEEDED_CONDITIONS | _FAILED_CONDITIONS
# Waiting reasons that are a normal step of starting, not a reason for waiting.
_STARTING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})
_NEVER = datetime.min.replace(tzinfo=UTC)

# Volcano's annotation naming a pod's PodGroup (volcano-sh/apis pkg/apis/scheduling/v1beta1
# labels.go, KubeGroupNameAnnotationKey); its controller puts it on every pod it schedules.
POD_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# Kueue's label naming the Job a Workload was made for (kueue pkg/controller/constants).
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

EventReader = Callable[[], list[client.CoreV1Event]]
PodsByJob = dict[str, list[tuple[str, client.V1Pod]]]  # Job name -> (owner uid, pod)
CustomObject = Mapping[str, Any]  # a Kueue or Volcano object, as the API's JSON


@dataclass(frozen=True, slots=True)
class QueueHold:
    """Why a job's queue holds it, in the queue's words, and the queue's name."""

    reason: str
    message: str
    queue: str | None


def job_status(
    job: client.V1Job,
    pods_by_job: PodsByJob,
    events: EventReader,
    gpu: str,
    hold: QueueHold | None = None,
) -> JobStatus:
    meta, spec = job.metadata, job.spec
    namespace, name, labels = namespace_of(job), object_name(meta), labels_of(meta)
    pods = owned_pods(job, pods_by_job)
    parallelism = spec.parallelism if spec and spec.parallelism is not None else 1
    completions = spec.completions if spec and spec.completions is not None else parallelism
    expected = max(1, min(parallelism, completions))
    started = [moment for moment in map(_started_at, pods) if moment is not None]
    status = JobStatus(
        job_id=f"{namespace}/{name}",
        run_id=labels.get(RUN_ID_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL) or (hold.queue if hold else None),
        phase=JobPhase.PENDING,
        gpus=pod_spec_gpus(pod_template(job), gpu) * expected,
        submitted_at=_utc(meta.creation_timestamp if meta else None),
        # A job of several pods starts when its last pod does: that ends its wait.
        started_at=max(started) if len(started) >= expected else None,
        nodes=_nodes(pods),
        owner_ids=_uids(pods),
        priority=_priority_class(pod_template(job)),
    )
    if is_deleting(meta):
        return replace(
            status,
            phase=JobPhase.CANCELLED,
            finished_at=_utc(meta.deletion_timestamp if meta else None),
            reason="Deleted",
            message="the Job is being deleted",
        )
    condition = final_condition(job)
    if condition is None:
        if status.started_at is not None:
            return replace(status, phase=JobPhase.RUNNING)
        reason, message = _pending_reason(pods, events, job, hold)
        return replace(status, reason=reason, message=message)
    status = replace(status, started_at=max(started, default=None))
    ended = [state for pod in pods if (state := _terminated(pod)) is not None]
    last_finish = max((t for state in ended if (t := _utc(state.finished_at))), default=None)
    if condition.type in _SUCCEEDED_CONDITIONS:
        completion = _utc(job.status.completion_time) if job.status else None
        return replace(
            status,
            phase=JobPhase.SUCCEEDED,
            finished_at=completion or last_finish or _utc(condition.last_transition_time),
            exit_code=0,
        )
    failures = [state for state in ended if state.exit_code != 0]
    failure = min(failures, key=lambda state: _utc(state.finished_at) or _NEVER, default=None)
    return replace(
        status,
        phase=JobPhase.FAILED,
        finished_at=_utc(condition.last_transition_time) or last_finish,
        # The container's words (OOMKilled, StartError) say more than BackoffLimitExceeded.
        reason=(failure.reason if failure else None) or condition.reason,
        message=(failure.message if failure else None) or condition.message,
        exit_code=failure.exit_code if failure else None,
    )


def pod_group_status(
    group_id: str, namespace: str, pods: list[client.V1Pod], events: EventReader, gpu: str
) -> JobStatus:
    labels = labels_of(pods[0].metadata)
    started = [moment for moment in map(_started_at, pods) if moment is not None]
    created = [_utc(pod.metadata.creation_timestamp) for pod in pods if pod.metadata]
    status = JobStatus(
        job_id=group_id,
        run_id=labels.get(RUN_ID_LABEL),
        service=labels.get(SERVICE_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL),
        phase=JobPhase.PENDING,
        gpus=sum(pod_spec_gpus(pod.spec, gpu) for pod in pods),
        submitted_at=min((moment for moment in created if moment), default=None),
        started_at=max(started) if len(started) == len(pods) else None,
        nodes=_nodes(pods),
        owner_ids=_uids(pods),
        priority=_priority_class(pods[0].spec),
    )
    if status.started_at is not None:
        return replace(status, phase=JobPhase.RUNNING)
    reason, message = _pending_reason(pods, events, None, None)
    return replace(status, reason=reason, message=message)


def ending_status(group_id: str, namespace: str, pods: list[client.V1Pod], gpu: str) -> JobStatus:
    """Pods being deleted and still bound to their node: the scheduler counts their GPUs
    until the kubelet has stopped them. Ending since the deletion's deadline (deletionTimestamp
    is the request plus the pod's grace period)."""
    deadline = min(
        ts for pod in pods if pod.metadata and (ts := _utc(pod.metadata.deletion_timestamp))
    )
    started = [moment for moment in map(_started_at, pods) if moment is not None]
    created = [_utc(pod.metadata.creation_timestamp) for pod in pods if pod.metadata]
    nodes = _nodes(pods)
    return JobStatus(
        job_id=group_id,
        run_id=labels_of(pods[0].metadata).get(RUN_ID_LABEL),
        service=labels_of(pods[0].metadata).get(SERVICE_LABEL),
        tenant=namespace,
        queue=labels_of(pods[0].metadata).get(QUEUE_LABEL),
        phase=JobPhase.CANCELLED,
        gpus=sum(pod_spec_gpus(pod.spec, gpu) for pod in pods),
        submitted_at=min((moment for moment in created if moment), default=None),
        started_at=max(started, default=None),
        finished_at=deadline,
        reason="Terminating",
        message=f"{len(pods)} pod(s) Terminating on {', '.join(nodes)}, to be gone by "
        f"{deadline.isoformat()}",
        nodes=nodes,
        owner_ids=_uids(pods),
        ending_since=deadline,
    )


def _pending_reason(
    pods: list[client.V1Pod],
    events: EventReader,
    job: client.V1Job | None,
    hold: QueueHold | None,
) -> tuple[str | None, str | None]:
    """Why a job waits, the most specific first: a container that cannot start (a bad image
    waits forever), its queue's hold (Kueue, Volcano), the scheduler's verdict, then the job
    controller's (quota, suspension)."""
    waiting = [pod for pod in pods if _started_at(pod) is None and _terminated(pod) is None]
    for pod in waiting:
        for container in (pod.status.container_statuses if pod.status else None) or []:
            state = container.state.waiting if container.state else None
            if state is not None and state.reason and state.reason not in _STARTING_REASONS:
                return state.reason, state.message
    if hold is not None:
        return hold.reason, hold.message
    for pod in waiting:
        for condition in (pod.status.conditions if pod.status else None) or []:
            if condition.type == "PodScheduled" and condition.status == "False":
                return condition.reason, condition.message
    for pod in waiting:
        if not (pod.spec and pod.spec.node_name):
            event = _latest_event(events(), "Pod", pod.metadata, "FailedScheduling")
            if event is not None:
                return event.reason, event.message
    if job is not None and job.spec and job.spec.suspend:
        for suspended in (job.status.conditions if job.status else None) or []:
            if suspended.type == "Suspended" and suspended.status == "True":
                return suspended.reason or "Suspended", suspended.message
        return "Suspended", "spec.suspend is true (waiting for admission)"
    if job is not None and not pods:
        event = _latest_event(events(), "Job", job.metadata, "FailedCreate")
        if event is not None:
            return event.reason, event.message
    return None, None


def kueue_hold(
    workload: CustomObject,
    cluster_queues: Mapping[str, str],
    quotas: Mapping[str, QueueQuota] | None = None,
) -> QueueHold | None:
    """What Kueue says of a Workload it has not admitted: no quota reserved in its ClusterQueue
    (QuotaReserved False: "couldn't assign flavors ... insufficient unused quota ..."), or quota
    reserved but its admission checks not yet passed (Admitted False), with the ClusterQueue's
    quota and usage. `cluster_queues`: the namespace's LocalQueues' ClusterQueues; `quotas`:
    the ClusterQueues read, by name. Shapes: kueue apis/kueue/v1beta1/workload_types.go
    (spec.queueName, status.conditions) and localqueue_types.go (spec.clusterQueue)."""
    meta, spec = workload.get("metadata") or {}, workload.get("spec") or {}
    conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}
    local_queue = spec.get("queueName")
    cluster_queue = cluster_queues.get(local_queue or "") or "unknown"
    quota = (quotas or {}).get(cluster_queue)
    said = f": {quota_words(quota)}" if quota is not None else ""
    where = f"LocalQueue {meta.get('namespace')}/{local_queue} (ClusterQueue {cluster_queue}{said})"
    for kind, said in (("QuotaReserved", KUEUE_QUOTA_HOLD), ("Admitted", "Admitted=False")):
        condition = conditions.get(kind)
        if condition is not None and condition.get("status") == "False":
            reason = f"{said}: {condition.get('reason') or 'Pending'}"
            return QueueHold(reason, f"{where}: {condition.get('message') or ''}", local_queue)
    return None  # admitted, or not yet looked at: the Job's own state says why it waits


def volcano_hold(
    pod_group: CustomObject, quotas: Mapping[str, QueueQuota] | None = None
) -> QueueHold | None:
    """What Volcano says of a PodGroup its queue has not enqueued (phase Pending): the
    Unschedulable condition's reason and words. Enqueued (Inqueue) its pods are scheduled and
    their own conditions say why they wait. Shape: volcano-sh/apis
    pkg/apis/scheduling/v1beta1/types.go (spec.queue, status.phase, status.conditions)."""
    spec, status = pod_group.get("spec") or {}, pod_group.get("status") or {}
    if status.get("phase", "Pending") != "Pending":
        return None
    queue = spec.get("queue") or "default"  # Volcano's queue for a PodGroup that names none
    conditions = status.get("conditions") or []
    unschedulable = [
        c for c in conditions if c.get("type") == "Unschedulable" and c.get("status") == "True"
    ]
    latest = max(unschedulable, key=lambda c: c.get("lastTransitionTime") or "", default=None)
    name = (pod_group.get("metadata") or {}).get("name")
    quota = (quotas or {}).get(queue)
    where = f"Queue {queue}" + (f" ({quota_words(quota)})" if quota is not None else "")
    if latest is None:
        return QueueHold(VOLCANO_QUEUE_HOLD, f"{where}: PodGroup {name} is Pending", queue)
    reason = f"{VOLCANO_QUEUE_HOLD}: {latest.get('reason') or 'Unschedulable'}"
    return QueueHold(reason, f"{where}: PodGroup {name}: {latest.get('message') or ''}", queue)


def local_queue(queue: CustomObject) -> LocalQueue:
    """A Kueue LocalQueue: its ClusterQueue and its workloads. Shape: kueue
    apis/kueue/v1beta1/localqueue_types.go (spec.clusterQueue, status.pendingWorkloads,
    status.admittedWorkloads)."""
    meta, status = queue.get("metadata") or {}, queue.get("status") or {}
    return LocalQueue(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        cluster_queue=str((queue.get("spec") or {}).get("clusterQueue") or ""),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
    )


def cluster_queue_quota(
    cluster_queue: CustomObject, local_queues: Iterable[LocalQueue], gpu: str
) -> QueueQuota:
    """A Kueue ClusterQueue's GPUs: nominalQuota and borrowingLimit summed over its flavors
    (a flavor without a borrowingLimit may borrow without limit, within a cohort), what its
    workloads use (flavorsUsage) and reserve (flavorsReservation), its pending and admitted
    workload counts, and the `local_queues` (of those read) that feed it.
    Shape: kueue apis/kueue/v1beta1/clusterqueue_types.go."""
    spec, status = cluster_queue.get("spec") or {}, cluster_queue.get("status") or {}
    name = str((cluster_queue.get("metadata") or {}).get("name") or "")
    nominal: int | None = None
    borrowing: int | None = 0
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") != gpu:
                    continue
                nominal = (nominal or 0) + _quantity(resource.get("nominalQuota"))
                limit = resource.get("borrowingLimit")
                borrowing = (
                    None if borrowing is None or limit is None else borrowing + _quantity(limit)
                )
    cohort = spec.get("cohort") or None
    feeding = sorted(
        (q for q in local_queues if q.cluster_queue == name), key=lambda q: (q.namespace, q.name)
    )
    return QueueQuota(
        system="kueue",
        name=name,
        resource=gpu,
        tenants=tuple(sorted({q.namespace for q in feeding})),
        local_queues=tuple(feeding),
        nominal_gpus=nominal,
        # Without a cohort there is nobody to borrow from.
        borrowing_limit_gpus=borrowing if cohort else 0,
        used_gpus=_flavors_gpus(status.get("flavorsUsage"), gpu, "total"),
        reserved_gpus=_flavors_gpus(status.get("flavorsReservation"), gpu, "total"),
        borrowed_gpus=_flavors_gpus(status.get("flavorsUsage"), gpu, "borrowed"),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
        cohort=cohort,
    )


def volcano_queue_quota(queue: CustomObject, tenants: tuple[str, ...], gpu: str) -> QueueQuota:
    """A Volcano Queue: its weight, its deserved GPUs (the capacity plugin's guarantee) as the
    nominal share and what its capability lets it take beyond them, its state and its PodGroup
    counts. `tenants`: the namespaces whose jobs were seen in it. Shape: volcano-sh/apis
    pkg/apis/scheduling/v1beta1/types.go (QueueSpec, QueueStatus)."""
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    deserved = (spec.get("deserved") or {}).get(gpu)
    capability = (spec.get("capability") or {}).get(gpu)
    nominal = _quantity(deserved) if deserved is not None else None
    return QueueQuota(
        system="volcano",
        resource=gpu,
        name=str((queue.get("metadata") or {}).get("name") or ""),
        tenants=tenants,
        nominal_gpus=nominal,
        borrowing_limit_gpus=(
            None if capability is None else max(_quantity(capability) - (nominal or 0), 0)
        ),
        used_gpus=_quantity((status.get("allocated") or {}).get(gpu)),
        pending_workloads=int(status.get("pending") or 0),
        admitted_workloads=int(status.get("running") or 0),
        weight=int(spec["weight"]) if spec.get("weight") is not None else None,
        state=status.get("state"),
    )


def quota_words(quota: QueueQuota) -> str:
    """The queue's quota and usage as a person checks it against kubectl: "8 of 8 nvidia.com/gpu
    nominal in use, borrowing limit 0"."""
    gpu = quota.resource
    if quota.system == "volcano":
        parts = [quota.state or "state unknown", f"weight {quota.weight or 1}"]
        if quota.nominal_gpus is not None:
            parts.append(f"{quota.used_gpus} of {quota.nominal_gpus} {gpu} deserved allocated")
        if quota.borrowing_limit_gpus is not None:
            parts.append(f"capability {(quota.nominal_gpus or 0) + quota.borrowing_limit_gpus}")
        parts.append(
            f"{quota.pending_workloads} PodGroups pending, {quota.admitted_workloads} running"
        )
        return ", ".join(parts)
    if quota.nominal_gpus is None:
        used = f"no {gpu} quota, {quota.used_gpus} in use"
    else:
        used = f"{quota.used_gpus} of {quota.nominal_gpus} {gpu} nominal in use"
    limit = quota.borrowing_limit_gpus
    borrowing = "borrowing limit none" if limit is None else f"borrowing limit {limit}"
    if quota.borrowed_gpus:
        borrowing += f", {quota.borrowed_gpus} borrowed"
    pending = quota.pending_workloads
    return f"{used}, {borrowing}, {pending} workload{'' if pending == 1 else 's'} pending"


def _flavors_gpus(flavors: Any, gpu: str, field: str) -> int:
    return sum(
        _quantity(resource.get(field))
        for flavor in flavors or []
        for resource in flavor.get("resources") or []
        if resource.get("name") == gpu
    )


def owner_uid(obj: CustomObject) -> str | None:
    """The uid of the object's controlling owner (a Workload's Job)."""
    references = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref.get("uid") for ref in references if ref.get("controller")), None)


def pod_group_of(pod: client.V1Pod) -> str | None:
    return ((pod.metadata.annotations if pod.metadata else None) or {}).get(POD_GROUP_ANNOTATION)


def _latest_event(
    events: list[client.CoreV1Event], kind: str, meta: client.V1ObjectMeta | None, reason: str
) -> client.CoreV1Event | None:
    name, uid = object_name(meta), meta.uid if meta else None
    matching = [
        event
        for event in events
        if event.reason == reason
        and event.involved_object.kind == kind
        and event.involved_object.name == name
        and event.involved_object.uid in (None, uid)
    ]
    return max(matching, key=_event_time, default=None)


def _event_time(event: client.CoreV1Event) -> datetime:
    moments = (
        event.last_timestamp,
        event.event_time,
        event.metadata.creation_timestamp,
        event.first_timestamp,
    )
    return next((moment for moment in map(_utc, moments) if moment is not None), _NEVER)


def scheduler_node(node: client.V1Node, allocated: int, gpu: str, pool_label: str) -> SchedulerNode:
    name, status, spec = object_name(node.metadata), node.status, node.spec
    conditions = (status.conditions if status else None) or []
    ready = next((condition for condition in conditions if condition.type == "Ready"), None)
    state = "Ready" if ready is not None and ready.status == "True" else "NotReady"
    reasons = []
    if ready is None:
        reasons.append("no Ready condition")
    elif ready.status != "True":
        reasons.append(": ".join(part for part in (ready.reason, ready.message) if part))
    if spec and spec.unschedulable:
        state += ",SchedulingDisabled"  # kubectl's word for a cordoned node
        reasons.append("cordoned")
    for taint in (spec.taints if spec else None) or []:
        if taint.effect in ("NoSchedule", "NoExecute"):
            value = f"={taint.value}" if taint.value else ""
            reasons.append(f"taint {taint.key}{value}:{taint.effect}")
    return SchedulerNode(
        name=name,
        pool=labels_of(node.metadata).get(pool_label),
        gpus_total=_quantity((status.allocatable or {}).get(gpu) if status else None),
        gpus_allocated=allocated,
        state=state,
        reason="; ".join(reason for reason in reasons if reason) or None,
    )


def has_gpus(node: client.V1Node, gpu: str) -> bool:
    # A node whose device plugin died keeps its capacity but allocates no GPU: it stays listed.
    status = node.status
    return status is not None and any(
        _quantity((resources or {}).get(gpu)) > 0
        for resources in (status.capacity, status.allocatable)
    )


# --- small readers ---------------------------------------------------------------------------


def object_name(meta: client.V1ObjectMeta | None) -> str:
    if meta is None or not meta.name:
        raise BackendError("the API returned an object without a name")
    return meta.name


def namespace_of(obj: client.V1Job | client.V1Pod) -> str:
    return (obj.metadata.namespace if obj.metadata else None) or ""


def labels_of(meta: client.V1ObjectMeta | None) -> dict[str, str]:
    return (meta.labels if meta else None) or {}


def is_ours(meta: client.V1ObjectMeta | None) -> bool:
    return labels_of(meta).get(MANAGED_BY_LABEL) == MANAGED_BY


def pod_group_id(namespace: str, pod: client.V1Pod, owner: client.V1OwnerReference | None) -> str:
    """A Job's pods under the Job's own id, others under their controller or themselves."""
    if owner is not None and owner.kind == "Job":
        return f"{namespace}/{owner.name}"
    key = f"{owner.kind.lower()}/{owner.name}" if owner else f"pod/{object_name(pod.metadata)}"
    return f"{namespace}/{key}"


def is_deleting(meta: client.V1ObjectMeta | None) -> bool:
    return meta is not None and meta.deletion_timestamp is not None


def controller_of(meta: client.V1ObjectMeta | None) -> client.V1OwnerReference | None:
    references = (meta.owner_references if meta else None) or []
    return next((ref for ref in references if ref.controller), None)


def group_by_job(pods: list[client.V1Pod]) -> PodsByJob:
    """Pods by the name of the Job that controls them (label selectors are only a hint)."""
    by_job: PodsByJob = {}
    for pod in pods:
        owner = controller_of(pod.metadata)
        if owner is not None and owner.kind == "Job":
            by_job.setdefault(owner.name, []).append((owner.uid, pod))
    return by_job


def owned_pods(job: client.V1Job, pods_by_job: PodsByJob) -> list[client.V1Pod]:
    # The owner's uid tells this Job's pods from those of an earlier namesake.
    uid = job.metadata.uid if job.metadata else None
    return [
        pod for owner, pod in pods_by_job.get(object_name(job.metadata), []) if uid in (None, owner)
    ]


def creation_then_name(pod: client.V1Pod) -> tuple[datetime, str]:
    created = _utc(pod.metadata.creation_timestamp if pod.metadata else None)
    return created or _NEVER, object_name(pod.metadata)


def final_condition(job: client.V1Job) -> client.V1JobCondition | None:
    conditions = (job.status.conditions if job.status else None) or []
    return next((c for c in conditions if c.status == "True" and c.type in _FINAL_CONDITIONS), None)


def pod_template(job: client.V1Job) -> client.V1PodSpec | None:
    return job.spec.template.spec if job.spec else None


def pod_phase(pod: client.V1Pod) -> str | None:
    return pod.status.phase if pod.status else None


def _nodes(pods: list[client.V1Pod]) -> tuple[str, ...]:
    return tuple(sorted({pod.spec.node_name for pod in pods if pod.spec and pod.spec.node_name}))


def _uids(pods: list[client.V1Pod]) -> tuple[str, ...]:
    """The pods' UIDs: what the agents read from their cgroup paths as their owner."""
    return tuple(sorted({pod.metadata.uid for pod in pods if pod.metadata and pod.metadata.uid}))


def _started_at(pod: client.V1Pod) -> datetime | None:
    """When the pod's first container really started; None if none could."""
    moments = []
    for container in (pod.status.container_statuses if pod.status else None) or []:
        state = container.state
        if state is not None and state.running is not None:
            moments.append(_utc(state.running.started_at))
        elif state is not None and state.terminated is not None:
            moments.append(_utc(state.terminated.started_at))
    # A container that failed to start reports the zero time (1970) as its start.
    return min((m for m in moments if m is not None and m.timestamp() > 0), default=None)


def _terminated(pod: client.V1Pod) -> client.V1ContainerStateTerminated | None:
    for container in (pod.status.container_statuses if pod.status else None) or []:
        if container.state is not None and container.state.terminated is not None:
            return container.state.terminated
    return None


def _priority_class(spec: client.V1PodSpec | None) -> str | None:
    return (spec.priority_class_name if spec else None) or None


def pod_spec_gpus(spec: client.V1PodSpec | None, gpu: str) -> int:
    """GPUs a pod holds: its containers' sum, or its largest init container's if more."""
    if spec is None:
        return 0
    main = sum(_container_gpus(container, gpu) for container in spec.containers)
    init = max((_container_gpus(c, gpu) for c in spec.init_containers or []), default=0)
    return max(main, init)


def _container_gpus(container: client.V1Container, gpu: str) -> int:
    resources = container.resources
    if resources is None:
        return 0
    # Extended resources are given as limits; requests, when given, must equal them.
    return _quantity((resources.limits or {}).get(gpu) or (resources.requests or {}).get(gpu))


def _quantity(value: str | None) -> int:
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise BackendError(f"not a whole number of GPUs: {value!r}") from None


def _utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None


REVISION_LABEL = "pod-template-hash"  # the Deployment controller's, on each pod of a revision


def replica_of(pod: client.V1Pod, port: int) -> Replica:
    """A Deployment's pod as a replica: its address once it has an IP, ready as its Ready
    condition says, and while unscheduled the scheduler's words (PodScheduled False)."""
    status = pod.status
    conditions = (status.conditions if status else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    unscheduled = next(
        (c for c in conditions if c.type == "PodScheduled" and c.status == "False"), None
    )
    ip = status.pod_ip if status else None
    return Replica(
        name=object_name(pod.metadata),
        address=f"{ip}:{port}" if ip else None,
        ready=ready,
        revision=labels_of(pod.metadata).get(REVISION_LABEL, ""),
        created_at=_utc(pod.metadata.creation_timestamp if pod.metadata else None),
        pending_reason=(unscheduled.message or unscheduled.reason or "Unschedulable")
        if unscheduled is not None and not (pod.spec and pod.spec.node_name)
        else None,
    )


def quota_changes(
    quota: client.V1ResourceQuota, writes: Sequence[AuditWrite] = ()
) -> list[QuotaChange]:
    """Who last set which of the quota's hard limits, and when: one change per manager whose
    latest write (an Update or Apply of the object, not of its status) owns some of them,
    with the values it owns now. The API server keeps no history: a manager's earlier
    writes are gone, as are limits another manager has since taken over. `writes`: the
    audit log's of this quota, which name the user behind a manager's write."""
    meta = quota.metadata or client.V1ObjectMeta()
    hard = (quota.spec.hard if quota.spec else None) or {}
    subject = {"tenant": meta.namespace or "", "quota": meta.name or ""}
    changes = []
    for entry in meta.managed_fields or []:
        owned = ((entry.fields_v1 or {}).get("f:spec") or {}).get("f:hard") or {}
        limits = sorted(key.removeprefix("f:") for key in owned if key.removeprefix("f:") in hard)
        if entry.subresource or entry.time is None or not limits:
            continue
        words = partial(_hard_words, limits=limits)
        now = words({"spec": {"hard": hard}})
        changes.append(
            _attributed(QuotaChange(entry.time, entry.manager or "", subject, now), writes, words)
        )
    return sorted(changes, key=lambda c: c.at)


def _hard_words(written: CustomObject, limits: list[str]) -> str:
    hard = (written.get("spec") or {}).get("hard") or {}
    return " ".join(f"{key}={hard[key]}" for key in limits if key in hard)


def cluster_queue_changes(
    cluster_queue: CustomObject,
    tenants: Iterable[str],
    gpu: str,
    writes: Sequence[AuditWrite] = (),
) -> list[QuotaChange]:
    """Who last set a Kueue ClusterQueue's quotas, and when: the manager whose latest write of
    the object (not of its status) owns spec.resourceGroups, with its GPU quotas as they are
    now; one change for each of the `tenants` it serves. resourceGroups is an atomic list
    (managedFields `f:resourceGroups: {}`): whoever writes it owns all of it. `writes`: the
    audit log's of this ClusterQueue. Shape: kueue apis/kueue/v1beta1/clusterqueue_types.go."""
    meta = cluster_queue.get("metadata") or {}
    name = str(meta.get("name") or "")

    def words(written: CustomObject) -> str:
        return kueue_quota_words(written.get("spec") or {}, gpu)

    now = words(cluster_queue)
    changes = []
    for entry in meta.get("managedFields") or []:
        owns = "f:resourceGroups" in ((entry.get("fieldsV1") or {}).get("f:spec") or {})
        if entry.get("subresource") or not entry.get("time") or not owns or not now:
            continue
        at = datetime.fromisoformat(entry["time"])
        change = _attributed(QuotaChange(at, entry.get("manager") or "", {}, now), writes, words)
        changes += [replace(change, subject={"tenant": t, "queue": name}) for t in tenants]
    return sorted(changes, key=lambda c: c.at)


def kueue_quota_words(spec: CustomObject, gpu: str) -> str:
    """A ClusterQueue's GPU quotas as its spec sets them, flavor by flavor, each limit named
    as Kueue names it: "nominalQuota[h200/nvidia.com/gpu]=8 borrowingLimit[h200/nvidia.com/gpu]=4"
    (a limit left unset, no limit, is not named)."""
    words = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") != gpu:
                    continue
                where = f"[{flavor.get('name')}/{gpu}]"
                words += [
                    f"{limit}{where}={resource[limit]}"
                    for limit in ("nominalQuota", "borrowingLimit", "lendingLimit")
                    if resource.get(limit) is not None
                ]
    return " ".join(words)


def _attributed(
    change: QuotaChange, writes: Sequence[AuditWrite], words: Callable[[CustomObject], str]
) -> QuotaChange:
    """The change by the user the audit log names for the write behind it (the manager kept),
    in the object's words as that write left it where the log records it."""
    write = max((w for w in writes if w.made(change.at)), key=lambda w: w.at, default=None)
    if write is None:
        return change
    said = words(write.written) if write.written is not None else ""
    return replace(change, actor=write.user, manager=change.actor, change=said or change.change)
