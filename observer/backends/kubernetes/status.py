"""A job's status, read the way kubectl shows it: a Job's from its conditions, its pods'
container states, the scheduler's PodScheduled condition and Warning events; other tenants'
work is a group of pods with the id "<namespace>/<owner kind>/<owner name>"
("<namespace>/pod/<pod name>" for a bare pod). A job its queue holds (Kueue's Workload
without quota, Volcano's PodGroup not enqueued) waits for the queue, in the queue's words,
with the quota and usage of the queue that holds it (a ClusterQueue, a Volcano Queue:
queues.py). Pure translation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from observer.backends.base import RUN_ID_LABEL
from observer.backends.kubernetes import wire
from observer.backends.kubernetes.manifests import QUEUE_LABEL, SERVICE_LABEL
from observer.backends.kubernetes.objects import (
    NEVER,
    Meta,
    Owner,
    controller_of,
    is_deleting,
    labels_of,
    namespace_of,
    object_name,
    pod_spec_gpus,
    utc,
)
from observer.backends.kubernetes.queues import CustomObject, quota_words
from observer.domain import Attempt, JobPhase, JobStatus, QueueQuota
from observer.probes.outcome import KUEUE_QUOTA_HOLD, VOLCANO_QUEUE_HOLD

_SUCCEEDED_CONDITIONS = frozenset({"Complete", "SuccessCriteriaMet"})
_FAILED_CONDITIONS = frozenset({"Failed", "FailureTarget"})  # FailureTarget: 1.31+, before Failed
_FINAL_CONDITIONS = _SUCCEEDED_CONDITIONS | _FAILED_CONDITIONS
# Waiting reasons that are a normal step of starting, not a reason for waiting.
_STARTING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})

# Volcano's annotation naming a pod's PodGroup (volcano-sh/apis pkg/apis/scheduling/v1beta1
# labels.go, KubeGroupNameAnnotationKey); its controller puts it on every pod it schedules.
POD_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"

EventReader = Callable[[], list[wire.CoreEvent]]
PodsByJob = dict[str, list[tuple[str, wire.Pod]]]  # Job name -> (owner uid, pod)


@dataclass(frozen=True, slots=True)
class QueueHold:
    """Why a job's queue holds it, in the queue's words, and the queue's name."""

    reason: str
    message: str
    queue: str | None


def job_status(
    job: wire.Job,
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
    condition = final_condition(job)
    # A pod that failed under a Job still running was replaced (its node lost, evicted): an
    # ended attempt of the Job, which goes on in its other pods.
    replaced = [p for p in pods if condition is None and _pod_phase(p) == "Failed"]
    current = [p for p in pods if _pod_phase(p) != "Failed"] if replaced else pods
    started = [moment for moment in map(_started_at, current) if moment is not None]
    status = JobStatus(
        job_id=f"{namespace}/{name}",
        run_id=labels.get(RUN_ID_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL) or (hold.queue if hold else None),
        phase=JobPhase.PENDING,
        gpus=pod_spec_gpus(pod_template(job), gpu) * expected,
        submitted_at=utc(meta.creation_timestamp if meta else None),
        # A job of several pods starts when its last pod does: that ends its wait.
        started_at=max(started) if len(started) >= expected else None,
        nodes=_nodes(current),
        owner_ids=_uids(pods),
        priority=_priority_class(pod_template(job)),
        restarts=len(replaced),
        attempts=tuple(sorted(map(_attempt, replaced), key=lambda a: a.started_at or NEVER)),
        eligible_at=_created(current) if replaced else None,
        # No expected start: neither the API server nor Kueue (a Workload's position in its
        # ClusterQueue at most, no time) nor Volcano estimates when a pending job will start.
        expected_start_at=None,
    )
    if is_deleting(meta):
        return replace(
            status,
            phase=JobPhase.CANCELLED,
            finished_at=utc(meta.deletion_timestamp if meta else None),
            reason="Deleted",
            message="the Job is being deleted",
        )
    if condition is None:
        if status.started_at is not None:
            return replace(status, phase=JobPhase.RUNNING)
        reason, message = _pending_reason(pods, events, job, hold)
        return replace(status, reason=reason, message=message)
    status = replace(status, started_at=max(started, default=None))
    ended = [state for pod in pods if (state := _terminated(pod)) is not None]
    last_finish = max((t for state in ended if (t := utc(state.finished_at))), default=None)
    if condition.type in _SUCCEEDED_CONDITIONS:
        completion = utc(job.status.completion_time) if job.status else None
        return replace(
            status,
            phase=JobPhase.SUCCEEDED,
            finished_at=completion or last_finish or utc(condition.last_transition_time),
            exit_code=0,
        )
    failures = [state for state in ended if state.exit_code != 0]
    failure = min(failures, key=lambda state: utc(state.finished_at) or NEVER, default=None)
    return replace(
        status,
        phase=JobPhase.FAILED,
        finished_at=utc(condition.last_transition_time) or last_finish,
        # The container's words (OOMKilled, StartError) say more than BackoffLimitExceeded.
        reason=(failure.reason if failure else None) or condition.reason,
        message=(failure.message if failure else None) or condition.message,
        exit_code=failure.exit_code if failure else None,
    )


def pod_group_status(
    group_id: str, namespace: str, pods: list[wire.Pod], events: EventReader, gpu: str
) -> JobStatus:
    started = [moment for moment in map(_started_at, pods) if moment is not None]
    status = replace(
        _pods_status(group_id, namespace, pods, gpu),
        started_at=max(started) if len(started) == len(pods) else None,
        priority=_priority_class(pods[0].spec),
    )
    if status.started_at is not None:
        return replace(status, phase=JobPhase.RUNNING)
    reason, message = _pending_reason(pods, events, None, None)
    return replace(status, reason=reason, message=message)


def ending_status(group_id: str, namespace: str, pods: list[wire.Pod], gpu: str) -> JobStatus:
    """Pods being deleted and still bound to their node: the scheduler counts their GPUs
    until the kubelet has stopped them. Ending since the deletion's deadline (deletionTimestamp
    is the request plus the pod's grace period)."""
    deadline = min(
        ts for pod in pods if pod.metadata and (ts := utc(pod.metadata.deletion_timestamp))
    )
    started = [moment for moment in map(_started_at, pods) if moment is not None]
    status = _pods_status(group_id, namespace, pods, gpu)
    return replace(
        status,
        phase=JobPhase.CANCELLED,
        started_at=max(started, default=None),
        finished_at=deadline,
        reason="Terminating",
        message=f"{len(pods)} pod(s) Terminating on {', '.join(status.nodes)}, to be gone by "
        f"{deadline.isoformat()}",
        ending_since=deadline,
    )


def _pods_status(group_id: str, namespace: str, pods: list[wire.Pod], gpu: str) -> JobStatus:
    """What a group of pods says of itself before their state is read: the first pod's
    labels, the pods' GPUs, nodes and UIDs, and the earliest creation."""
    labels = labels_of(pods[0].metadata)
    created = [utc(pod.metadata.creation_timestamp) for pod in pods if pod.metadata]
    return JobStatus(
        job_id=group_id,
        run_id=labels.get(RUN_ID_LABEL),
        service=labels.get(SERVICE_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL),
        phase=JobPhase.PENDING,
        gpus=sum(pod_spec_gpus(pod.spec, gpu) for pod in pods),
        submitted_at=min((moment for moment in created if moment), default=None),
        nodes=_nodes(pods),
        owner_ids=_uids(pods),
    )


def _pending_reason(
    pods: list[wire.Pod],
    events: EventReader,
    job: wire.Job | None,
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


def owner_uid(obj: CustomObject) -> str | None:
    """The uid of the object's controlling owner (a Workload's Job)."""
    references = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((ref.get("uid") for ref in references if ref.get("controller")), None)


def pod_group_of(pod: wire.Pod) -> str | None:
    return ((pod.metadata.annotations if pod.metadata else None) or {}).get(POD_GROUP_ANNOTATION)


def _latest_event(
    events: list[wire.CoreEvent], kind: str, meta: Meta | None, reason: str
) -> wire.CoreEvent | None:
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


def _event_time(event: wire.CoreEvent) -> datetime:
    moments = (
        event.last_timestamp,
        event.event_time,
        event.metadata.creation_timestamp if event.metadata else None,
        event.first_timestamp,
    )
    return next((moment for moment in map(utc, moments) if moment is not None), NEVER)


def pod_group_id(namespace: str, pod: wire.Pod, owner: Owner | None) -> str:
    """A Job's pods under the Job's own id, others under their controller or themselves."""
    if owner is not None and owner.kind == "Job":
        return f"{namespace}/{owner.name}"
    key = f"{owner.kind.lower()}/{owner.name}" if owner else f"pod/{object_name(pod.metadata)}"
    return f"{namespace}/{key}"


def group_by_job(pods: list[wire.Pod]) -> PodsByJob:
    """Pods by the name of the Job that controls them (label selectors are only a hint)."""
    by_job: PodsByJob = {}
    for pod in pods:
        owner = controller_of(pod.metadata)
        if owner is not None and owner.kind == "Job":
            by_job.setdefault(owner.name, []).append((owner.uid, pod))
    return by_job


def owned_pods(job: wire.Job, pods_by_job: PodsByJob) -> list[wire.Pod]:
    # The owner's uid tells this Job's pods from those of an earlier namesake.
    uid = job_uid(job)
    return [
        pod for owner, pod in pods_by_job.get(object_name(job.metadata), []) if uid in (None, owner)
    ]


def job_uid(job: wire.Job) -> str | None:
    return job.metadata.uid if job.metadata else None


def final_condition(job: wire.Job) -> wire.JobCondition | None:
    conditions = (job.status.conditions if job.status else None) or []
    return next((c for c in conditions if c.status == "True" and c.type in _FINAL_CONDITIONS), None)


def pod_template(job: wire.Job) -> wire.PodSpec | None:
    return job.spec.template.spec if job.spec else None


def _nodes(pods: list[wire.Pod]) -> tuple[str, ...]:
    return tuple(sorted({pod.spec.node_name for pod in pods if pod.spec and pod.spec.node_name}))


def _uids(pods: list[wire.Pod]) -> tuple[str, ...]:
    """The pods' UIDs: what the agents read from their cgroup paths as their owner."""
    return tuple(sorted({pod.metadata.uid for pod in pods if pod.metadata and pod.metadata.uid}))


def _started_at(pod: wire.Pod) -> datetime | None:
    """When the pod's first container really started; None if none could."""
    moments = []
    for container in (pod.status.container_statuses if pod.status else None) or []:
        state = container.state
        if state is not None and state.running is not None:
            moments.append(utc(state.running.started_at))
        elif state is not None and state.terminated is not None:
            moments.append(utc(state.terminated.started_at))
    # A container that failed to start reports the zero time (1970) as its start.
    return min((m for m in moments if m is not None and m.timestamp() > 0), default=None)


def _pod_phase(pod: wire.Pod) -> str | None:
    return pod.status.phase if pod.status else None


def _created(pods: list[wire.Pod]) -> datetime | None:
    return min(
        (t for p in pods if p.metadata and (t := utc(p.metadata.creation_timestamp))), default=None
    )


def _attempt(pod: wire.Pod) -> Attempt:
    """A replaced pod as an attempt of its Job, in the kubelet's and the pod's words."""
    terminated = _terminated(pod)
    return Attempt(
        eligible_at=utc(pod.metadata.creation_timestamp if pod.metadata else None),
        started_at=_started_at(pod),
        ended_at=utc(terminated.finished_at) if terminated else None,
        nodes=_nodes([pod]),
        state="Failed",
        reason=(pod.status.reason if pod.status else None)
        or (terminated.reason if terminated else None),
    )


def _terminated(pod: wire.Pod) -> wire.ContainerStateTerminated | None:
    for container in (pod.status.container_statuses if pod.status else None) or []:
        if container.state is not None and container.state.terminated is not None:
            return container.state.terminated
    return None


def _priority_class(spec: wire.PodSpec | None) -> str | None:
    return (spec.priority_class_name if spec else None) or None
