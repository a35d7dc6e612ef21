"""The queues as Kueue and Volcano report them: a tenant's LocalQueue, the GPU quota and usage
of a ClusterQueue or a Volcano Queue, and that quota in the words a person checks against
kubectl. Pure translation of the custom objects' JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from observer.backends.kubernetes.objects import gpu_quantity
from observer.domain import LocalQueue, QueueQuota

CustomObject = Mapping[str, Any]  # a Kueue or Volcano object, as the API's JSON


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
    for _, resource in kueue_gpu_quotas(spec, gpu):
        nominal = (nominal or 0) + gpu_quantity(resource.get("nominalQuota"))
        limit = resource.get("borrowingLimit")
        borrowing = None if borrowing is None or limit is None else borrowing + gpu_quantity(limit)
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


def kueue_gpu_quotas(spec: CustomObject, gpu: str) -> Iterator[tuple[CustomObject, CustomObject]]:
    """A ClusterQueue spec's quotas of `gpu`: (flavor, its entry for the GPU) in every
    resource group."""
    for group in spec.get("resourceGroups") or []:
        yield from _gpu_entries(group.get("flavors"), gpu)


def _flavors_gpus(flavors: Any, gpu: str, field: str) -> int:
    return sum(gpu_quantity(resource.get(field)) for _, resource in _gpu_entries(flavors, gpu))


def _gpu_entries(flavors: Any, gpu: str) -> Iterator[tuple[CustomObject, CustomObject]]:
    """(flavor, its entry for `gpu`) of a list of Kueue flavors, each with its resources."""
    for flavor in flavors or []:
        for resource in flavor.get("resources") or []:
            if resource.get("name") == gpu:
                yield flavor, resource


def volcano_queue_quota(queue: CustomObject, tenants: tuple[str, ...], gpu: str) -> QueueQuota:
    """A Volcano Queue: its weight, its deserved GPUs (the capacity plugin's guarantee) as the
    nominal share and what its capability lets it take beyond them, its state and its PodGroup
    counts. `tenants`: the namespaces whose jobs were seen in it. Shape: volcano-sh/apis
    pkg/apis/scheduling/v1beta1/types.go (QueueSpec, QueueStatus)."""
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    deserved = (spec.get("deserved") or {}).get(gpu)
    capability = (spec.get("capability") or {}).get(gpu)
    nominal = gpu_quantity(deserved) if deserved is not None else None
    return QueueQuota(
        system="volcano",
        resource=gpu,
        name=str((queue.get("metadata") or {}).get("name") or ""),
        tenants=tenants,
        nominal_gpus=nominal,
        borrowing_limit_gpus=(
            None if capability is None else max(gpu_quantity(capability) - (nominal or 0), 0)
        ),
        used_gpus=gpu_quantity((status.get("allocated") or {}).get(gpu)),
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
