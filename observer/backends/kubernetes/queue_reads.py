"""What the backend reads of the queues' own objects (caches.py watches them through the
custom-objects API): Kueue's Workloads, LocalQueues and ClusterQueues, Volcano's PodGroups and
Queues; a cluster without Kueue or Volcano has none of theirs. From them, what the queues say
of the jobs they hold and every queue's quota with the tenants it serves (queues.py and
status.py translate).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import NamedTuple

from observer.backends.kubernetes import wire
from observer.backends.kubernetes.queues import (
    CustomObject,
    cluster_queue_quota,
    local_queue,
    volcano_queue_quota,
)
from observer.backends.kubernetes.status import (
    PodsByJob,
    QueueHold,
    job_uid,
    kueue_hold,
    owned_pods,
    owner_uid,
    pod_group_of,
    volcano_hold,
)
from observer.domain import JobStatus, LocalQueue, QueueQuota


class CustomResource(NamedTuple):
    group: str
    version: str
    plural: str
    namespaced: bool = True


# The queues' objects the backend watches: the chart's Role grants listing and watching the
# namespaced ones, its ClusterRole the cluster-scoped queues.
WORKLOADS = CustomResource("kueue.x-k8s.io", "v1beta1", "workloads")
LOCAL_QUEUES = CustomResource("kueue.x-k8s.io", "v1beta1", "localqueues")
CLUSTER_QUEUES = CustomResource("kueue.x-k8s.io", "v1beta1", "clusterqueues", namespaced=False)
POD_GROUPS = CustomResource("scheduling.volcano.sh", "v1beta1", "podgroups")
VOLCANO_QUEUES = CustomResource("scheduling.volcano.sh", "v1beta1", "queues", namespaced=False)


Read = Callable[[CustomResource, str | None], list[CustomObject]]  # (kind, namespace) -> objects


class QueueReads:
    """What the queues' objects say, read from `read` (the informers' caches)."""

    def __init__(self, read: Read, gpu: str) -> None:
        self.objects = read
        self._gpu = gpu

    def holds(self, namespace: str, jobs: list[wire.Job], pods: PodsByJob) -> dict[str, QueueHold]:
        """What the namespace's queues say of the jobs they hold, by Job uid, with the quota of
        the queue holding them; read only when a job may be held: Kueue keeps a Job it has
        not admitted suspended, Volcano keeps the pods of a PodGroup it has not enqueued
        unscheduled."""
        holds: dict[str, QueueHold] = {}
        suspended = {uid for job in jobs if job.spec and job.spec.suspend and (uid := job_uid(job))}
        if suspended:
            workloads = [
                workload
                for workload in self.objects(WORKLOADS, namespace)
                if owner_uid(workload) in suspended
            ]
            if workloads:
                local_queues = self.local_queues([namespace])
                cluster_queues = {queue.name: queue.cluster_queue for queue in local_queues}
                quotas = self._cluster_queues(local_queues)
                for workload in workloads:
                    if hold := kueue_hold(workload, cluster_queues, quotas):
                        holds[str(owner_uid(workload))] = hold
        grouped = {
            uid: group
            for job in jobs
            if (uid := job_uid(job)) and uid not in holds
            for pod in owned_pods(job, pods)
            if pod.spec and not pod.spec.node_name and (group := pod_group_of(pod))
        }
        if grouped:
            pod_groups = {
                group["metadata"]["name"]: group for group in self.objects(POD_GROUPS, namespace)
            }
            queues = self._volcano_queues({})
            for uid, name in grouped.items():
                pod_group = pod_groups.get(name)
                if pod_group is not None and (hold := volcano_hold(pod_group, queues)):
                    holds[uid] = hold
        return holds

    def quotas(self, namespaces: Collection[str], jobs: list[JobStatus]) -> tuple[QueueQuota, ...]:
        """Every Kueue ClusterQueue and Volcano Queue, with the tenants they serve: a
        ClusterQueue's, those of `namespaces` whose LocalQueues feed it; a Volcano Queue's,
        those whose `jobs` were seen in it."""
        local_queues = self.local_queues(namespaces)
        seen: dict[str, set[str]] = {}
        for job in jobs:
            if job.queue:
                seen.setdefault(job.queue, set()).add(job.tenant)
        tenants = {queue: tuple(sorted(names)) for queue, names in seen.items()}
        kueue = self._cluster_queues(local_queues)
        volcano = self._volcano_queues(tenants)
        return tuple(kueue[name] for name in sorted(kueue)) + tuple(
            volcano[name] for name in sorted(volcano)
        )

    def local_queues(self, namespaces: Collection[str]) -> list[LocalQueue]:
        return [
            local_queue(queue)
            for namespace in namespaces
            for queue in self.objects(LOCAL_QUEUES, namespace)
        ]

    def _cluster_queues(self, local_queues: Collection[LocalQueue]) -> dict[str, QueueQuota]:
        quotas = (
            cluster_queue_quota(queue, local_queues, self._gpu)
            for queue in self.objects(CLUSTER_QUEUES, None)
        )
        return {quota.name: quota for quota in quotas}

    def _volcano_queues(self, tenants: Mapping[str, tuple[str, ...]]) -> dict[str, QueueQuota]:
        quotas = (
            volcano_queue_quota(queue, tenants.get(queue["metadata"]["name"], ()), self._gpu)
            for queue in self.objects(VOLCANO_QUEUES, None)
        )
        return {quota.name: quota for quota in quotas}
