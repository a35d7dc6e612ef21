"""Plain readings of API objects, the way kubectl shows them: an object's name, labels,
controller and deletion; the GPUs a pod holds; a node as the scheduler sees it (its Ready
condition, cordon, taints and GPUs); a Deployment's pod as a replica of the inference probe's
service. Pure translation.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client

from observer.backends.base import MANAGED_BY, MANAGED_BY_LABEL, Replica
from observer.backends.kubernetes import wire
from observer.domain import SchedulerNode
from observer.errors import BackendError

TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
REVISION_LABEL = "pod-template-hash"  # the Deployment controller's, on each pod of a revision
NEVER = datetime.min.replace(tzinfo=UTC)  # before any moment the API gives

# An object's metadata as the client's models read it (a Deployment's pods) or as wire.py
# decodes it (what the informers watch).
Meta = client.V1ObjectMeta | wire.ObjectMeta
Owner = client.V1OwnerReference | wire.OwnerReference


def object_name(meta: Meta | None) -> str:
    if meta is None or not meta.name:
        raise BackendError("the API returned an object without a name")
    return meta.name


def namespace_of(obj: wire.Job | wire.Pod) -> str:
    return (obj.metadata.namespace if obj.metadata else None) or ""


def labels_of(meta: Meta | None) -> dict[str, str]:
    return (meta.labels if meta else None) or {}


def is_ours(meta: Meta | None) -> bool:
    return labels_of(meta).get(MANAGED_BY_LABEL) == MANAGED_BY


def is_deleting(meta: Meta | None) -> bool:
    return meta is not None and meta.deletion_timestamp is not None


def controller_of(meta: Meta | None) -> Owner | None:
    references = (meta.owner_references if meta else None) or []
    return next((ref for ref in references if ref.controller), None)


def creation_then_name(pod: client.V1Pod | wire.Pod) -> tuple[datetime, str]:
    created = utc(pod.metadata.creation_timestamp if pod.metadata else None)
    return created or NEVER, object_name(pod.metadata)


def pod_phase(pod: wire.Pod) -> str | None:
    return pod.status.phase if pod.status else None


def pod_spec_gpus(spec: client.V1PodSpec | wire.PodSpec | None, gpu: str) -> int:
    """GPUs a pod holds: its containers' sum, or its largest init container's if more."""
    if spec is None:
        return 0
    main = sum(_container_gpus(container, gpu) for container in spec.containers)
    init = max((_container_gpus(c, gpu) for c in spec.init_containers or []), default=0)
    return max(main, init)


def _container_gpus(container: client.V1Container | wire.Container, gpu: str) -> int:
    resources = container.resources
    if resources is None:
        return 0
    # Extended resources are given as limits; requests, when given, must equal them.
    return gpu_quantity((resources.limits or {}).get(gpu) or (resources.requests or {}).get(gpu))


def gpu_quantity(value: str | None) -> int:
    """A quantity of GPUs as the API writes it (a whole number); none given is 0."""
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        raise BackendError(f"not a whole number of GPUs: {value!r}") from None


def utc(moment: datetime | None) -> datetime | None:
    return moment.astimezone(UTC) if moment is not None else None


def scheduler_node(node: wire.Node, allocated: int, gpu: str, pool_label: str) -> SchedulerNode:
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
        gpus_total=gpu_quantity((status.allocatable or {}).get(gpu) if status else None),
        gpus_allocated=allocated,
        state=state,
        reason="; ".join(reason for reason in reasons if reason) or None,
    )


def has_gpus(node: wire.Node, gpu: str) -> bool:
    # A node whose device plugin died keeps its capacity but allocates no GPU: it stays listed.
    status = node.status
    return status is not None and any(
        gpu_quantity((resources or {}).get(gpu)) > 0
        for resources in (status.capacity, status.allocatable)
    )


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
        created_at=utc(pod.metadata.creation_timestamp if pod.metadata else None),
        pending_reason=(unscheduled.message or unscheduled.reason or "Unschedulable")
        if unscheduled is not None and not (pod.spec and pod.spec.node_name)
        else None,
    )
