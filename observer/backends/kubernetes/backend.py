"""The real SchedulerBackend over the Kubernetes API with the official client: the calls.

A probe's job id is "<namespace>/<job name>" (manifests.py says what is created). What the
API returns is translated by status.py (a job's status and why it waits), queues.py (the
queues and their quotas), quota_history.py (quota changes) and objects.py (nodes and the
rest). What it reads it reads from the informers' caches (caches.py: nodes, pods, and in the
probe namespaces Jobs, Warning events, ResourceQuotas and the queues' objects), never by
listing: only a Job not yet in its cache (just created) is read by a call, and a job's log.
queue_reads.py reads the queues' own objects, inference_service.py makes the calls of the
inference probe's service (the ServiceBackend calls, delegated), isolation.py those of the
isolation probe, with a tenant's token. A job a queue may hold (suspended: Kueue; pods in a
PodGroup: Volcano) is explained by the queue's own objects and by the quota of the queue that
holds it. The snapshot reads the queues themselves (Kueue's ClusterQueues and the tenants'
LocalQueues, Volcano's Queues): their quotas, usage, pending work and each tenant's guarantee.
Kubernetes errors stop here: an API server that cannot be reached or read, or a view the read
needs whose watch is down, raises BackendError; a submission it refuses (quota, admission,
validation, RBAC) raises ProbeError with its words.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any

from observer.backends.base import (
    RUN_ID_LABEL,
    FinishedJobs,
    QuotaChange,
    ServicesOf,
    queue_states,
    with_guarantees,
)
from observer.backends.kubernetes import isolation, wire
from observer.backends.kubernetes.audit import AuditLog, AuditWrite
from observer.backends.kubernetes.caches import Caches, connections
from observer.backends.kubernetes.client import (
    Apis,
    ApiStatusError,
    api,
    done_already,
    observer_configuration,
)
from observer.backends.kubernetes.inference_service import KubernetesServices
from observer.backends.kubernetes.informer import View
from observer.backends.kubernetes.manifests import job_manifest, job_name
from observer.backends.kubernetes.objects import (
    TERMINAL_POD_PHASES,
    controller_of,
    creation_then_name,
    has_gpus,
    is_deleting,
    is_ours,
    labels_of,
    namespace_of,
    object_name,
    pod_phase,
    pod_spec_gpus,
    scheduler_node,
)
from observer.backends.kubernetes.queue_reads import CLUSTER_QUEUES, QueueReads
from observer.backends.kubernetes.quota_history import cluster_queue_changes, quota_changes
from observer.backends.kubernetes.status import (
    EventReader,
    PodsByJob,
    ending_status,
    final_condition,
    group_by_job,
    job_status,
    job_uid,
    owned_pods,
    pod_group_id,
    pod_group_status,
    pod_template,
)
from observer.clock import Clock
from observer.domain import AccessAttempt, JobPhase, JobRequest, JobStatus, SchedulerSnapshot
from observer.errors import BackendError, ProbeError
from observer.settings.controller import KubernetesSettings

JOB_NAME_LABEL = "job-name"  # the job controller puts it on its pods (every release so far)


_CANCELLED_REMEMBERED = 1024  # a cancelled Job vanishes from the API; its outcome is kept here


class KubernetesBackend(ServicesOf):
    """SchedulerBackend and ServiceBackend over the Kubernetes API; see KubernetesSettings for
    what it needs."""

    def __init__(self, settings: KubernetesSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._timeout = settings.request_timeout_seconds
        self._gpu = settings.gpu_resource
        configuration = observer_configuration(settings)
        # Every informer's watch holds a connection; the calls beside them need a few more.
        configuration.connection_pool_maxsize = max(
            configuration.connection_pool_maxsize, connections(settings.namespaces) + 4
        )
        self._apis = Apis(configuration)
        self._core, self._batch = self._apis.core, self._apis.batch
        self._services = KubernetesServices(self._apis, settings, clock)
        self._cancelled: OrderedDict[str, JobStatus] = OrderedDict()
        # (subject, manager, time) -> the change as first read
        self._read_changes: dict[
            tuple[tuple[tuple[str, str], ...], str, datetime], QuotaChange
        ] = {}
        path = settings.audit_log_path
        self._audit = AuditLog(path) if path is not None else None
        self._caches = Caches(self._apis, settings.namespaces, clock, self._timeout)

    def close(self) -> None:
        self._caches.stop()
        self._apis.close()

    def __enter__(self) -> KubernetesBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- SchedulerBackend ------------------------------------------------------------------

    def submit(self, request: JobRequest) -> str:
        namespace, name = request.tenant, job_name(request.probe, request.run_id)
        job_id = f"{namespace}/{name}"
        try:
            with api(f"create job {job_id}"):
                self._batch.create_namespaced_job(
                    namespace,
                    job_manifest(self._settings, request, name),
                    _request_timeout=self._timeout,
                )
        except ApiStatusError as exc:
            if exc.status == 409 and self._submitted_before(namespace, name, request.run_id):
                return job_id  # an earlier attempt did create it: submitting is idempotent
            if 400 <= exc.status < 500 and exc.status != 429:
                raise ProbeError(exc.message) from None
            raise
        self._cancelled.pop(job_id, None)  # the run's Job exists again: read it, not the past
        return job_id

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        found: dict[str, JobStatus] = {}
        names_by_namespace: dict[str, list[str]] = {}
        for job_id in job_ids:
            if job_id in self._cancelled:
                found[job_id] = self._cancelled[job_id]
            else:
                namespace, name = _split_job_id(job_id)
                names_by_namespace.setdefault(namespace, []).append(name)
        reads = QueueReads(self._caches.custom, self._gpu)
        for namespace, names in names_by_namespace.items():
            watched = namespace in self._settings.namespaces  # the others are read by a call
            listed = self._caches.jobs(namespace) if watched else []
            cached = {object_name(job.metadata): job for job in listed}
            # A Job created a moment ago may not have reached the cache yet: read it once.
            jobs = [
                job
                for name in names
                if (job := cached.get(name) or self._read_job(namespace, name))
            ]
            if jobs:
                wanted = set(names)
                pods = group_by_job(
                    [
                        pod
                        for pod in self._pods_in(namespace)
                        if labels_of(pod.metadata).get(JOB_NAME_LABEL) in wanted
                    ]
                )
                for status in self._job_statuses(namespace, jobs, pods, reads):
                    found[status.job_id] = status
        return found

    def cancel(self, job_id: str) -> None:
        status = self.jobs([job_id]).get(job_id)
        if status is None or status.phase.finished:
            return
        namespace, name = _split_job_id(job_id)
        with done_already(404), api(f"delete job {job_id}"):
            self._batch.delete_namespaced_job(
                name, namespace, propagation_policy="Background", _request_timeout=self._timeout
            )
        # With Background propagation the Job is gone at once and the garbage collector
        # deletes its pods after; the API soon knows nothing of it, so the outcome is kept.
        self._cancelled[job_id] = replace(
            status,
            phase=JobPhase.CANCELLED,
            finished_at=self._clock.now(),
            reason="Deleted",
            message="deleted by the observer (propagationPolicy=Background)",
        )
        while len(self._cancelled) > _CANCELLED_REMEMBERED:
            self._cancelled.popitem(last=False)

    def logs(self, job_id: str) -> str:
        namespace, name = _split_job_id(job_id)
        job = self._read_job(namespace, name)
        if job is None:
            raise BackendError(f"logs of {job_id}: no such job")
        pods = owned_pods(job, group_by_job(self._list_pods(namespace, f"{JOB_NAME_LABEL}={name}")))
        if not pods:
            raise BackendError(f"logs of {job_id}: the job has no pods")
        parts = []
        for pod in sorted(pods, key=creation_then_name):
            pod_name = object_name(pod.metadata)
            containers = pod.spec.containers if pod.spec else []
            with api(f"read log of pod {namespace}/{pod_name}"):
                parts.append(
                    self._core.read_namespaced_pod_log(
                        pod_name,
                        namespace,
                        container=containers[0].name if containers else None,
                        _request_timeout=self._timeout,
                    )
                )
        return "".join(parts)

    def probe_jobs(self) -> list[JobStatus]:
        # Per namespace: the observer needs no cluster-wide right to read Jobs.
        statuses: list[JobStatus] = []
        reads = QueueReads(self._caches.custom, self._gpu)
        for namespace in self._settings.namespaces:
            listed = self._caches.jobs(namespace)
            jobs = [job for job in listed if is_ours(job.metadata) and not final_condition(job)]
            if jobs:
                pods = group_by_job(
                    [pod for pod in self._pods_in(namespace) if is_ours(pod.metadata)]
                )
                statuses += self._job_statuses(namespace, jobs, pods, reads)
        return [status for status in statuses if not status.phase.finished]

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        # The Jobs of the tenants' namespaces that reached Complete or Failed; one being
        # deleted (its TTL ran out, or someone deleted it) is on its way out and not read.
        ended: list[JobStatus] = []
        for namespace in self._settings.namespaces:
            listed = self._caches.jobs(namespace)
            final = [j for j in listed if final_condition(j) and not is_deleting(j.metadata)]
            if final:
                pods = group_by_job(self._pods_in(namespace))
                events = self._warning_events(namespace)
                ended += [job_status(job, pods, events, self._gpu) for job in final]
        return FinishedJobs(
            since,
            until,
            tuple(s for s in ended if s.finished_at is not None and since <= s.finished_at < until),
            complete=False,
            note="the API server deletes finished Jobs ttlSecondsAfterFinished after they "
            "end, and a deleted Job or a bare pod is never listed",
        )

    def snapshot(self) -> SchedulerSnapshot:
        now = self._clock.now()
        nodes, pods = self._caches.nodes(), self._caches.pods()
        by_namespace: dict[str, list[wire.Pod]] = {n: [] for n in self._settings.namespaces}
        # As the scheduler counts: a pod holds its GPUs until it is gone, Terminating or not.
        # Every pod, not only the tenants': a node's GPUs are held by whoever runs there.
        allocated: Counter[str] = Counter()
        for pod in pods.objects():
            if (tenant := by_namespace.get(namespace_of(pod))) is not None:
                tenant.append(pod)
            if pod.spec and pod.spec.node_name and pod_phase(pod) not in TERMINAL_POD_PHASES:
                allocated[pod.spec.node_name] += pod_spec_gpus(pod.spec, self._gpu)
        jobs: list[JobStatus] = []
        reads = QueueReads(self._caches.custom, self._gpu)
        for namespace, tenant_pods in by_namespace.items():
            jobs += self._unfinished_work(namespace, tenant_pods, reads)
        quotas = reads.quotas(self._settings.namespaces, jobs)
        return SchedulerSnapshot(
            at=now,
            queues=with_guarantees(queue_states(jobs, now, self._settings.namespaces), quotas),
            nodes=tuple(
                scheduler_node(
                    node,
                    allocated[object_name(node.metadata)],
                    self._gpu,
                    self._settings.pool_label,
                )
                for node in sorted(nodes.objects(), key=lambda node: object_name(node.metadata))
                if has_gpus(node, self._gpu)
            ),
            jobs=tuple(jobs),
            quotas=quotas,
        )

    def watched(self) -> tuple[View[Any], ...]:
        """The informers' latest views (none before the first read): what they hold and how
        fresh it is."""
        return self._caches.views()

    def quota_changes(self, since: datetime, until: datetime) -> list[QuotaChange]:
        # Each manager's latest write of each tenant namespace's ResourceQuotas and of the
        # ClusterQueues their LocalQueues feed: the API server keeps no history, so a manager
        # that changed one twice in a period shows its last change. The audit log, where it
        # is read, names the user behind each write.
        writes = self._audit.writes(since) if self._audit else None

        def of(resource: str, namespace: str, name: str) -> list[AuditWrite]:
            return [
                w
                for w in writes or ()
                if (w.resource, w.namespace, w.name) == (resource, namespace, name)
            ]

        changes: list[QuotaChange] = []
        for namespace in self._settings.namespaces:
            for quota in self._caches.quotas(namespace):
                mine = of("resourcequotas", namespace, object_name(quota.metadata))
                changes += quota_changes(quota, mine)
        reads = QueueReads(self._caches.custom, self._gpu)
        local_queues = reads.local_queues(self._settings.namespaces)
        for queue in reads.objects(CLUSTER_QUEUES, None):
            name = str(queue["metadata"]["name"])
            tenants = sorted({q.namespace for q in local_queues if q.cluster_queue == name})
            mine = of("clusterqueues", "", name)
            changes += cluster_queue_changes(queue, tenants, self._gpu, mine)
        return self._as_first_read([c for c in changes if since <= c.at < until], since)

    def _as_first_read(self, changes: list[QuotaChange], since: datetime) -> list[QuotaChange]:
        """Each write as it was first read: read again, a manager's entry shows only the limits
        it still owns (another may have taken some over since), yet it is the same change;
        those before `since` are forgotten."""
        self._read_changes = {k: c for k, c in self._read_changes.items() if c.at >= since}
        first = [
            self._read_changes.setdefault(
                (tuple(sorted(c.subject.items())), c.manager or c.actor, c.at), c
            )
            for c in changes
        ]
        return sorted(first, key=lambda c: c.at)

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        return isolation.probe(self._settings, as_tenant, other_tenant)

    # --- reading ---------------------------------------------------------------------------

    def _read_job(self, namespace: str, name: str) -> wire.Job | None:
        what = f"read job {namespace}/{name}"
        try:
            with api(what):
                response = self._batch.read_namespaced_job(
                    name, namespace, _preload_content=False, _request_timeout=self._timeout
                )
        except ApiStatusError as exc:
            if exc.status == 404:
                return None
            raise
        return wire.decoded(wire.JOBS.object, response.data, what)

    def _pods_in(self, namespace: str) -> list[wire.Pod]:
        return [pod for pod in self._caches.pods().objects() if namespace_of(pod) == namespace]

    def _list_pods(self, namespace: str, selector: str) -> list[wire.Pod]:
        what = f"list pods in {namespace}"
        with api(what):
            response = self._core.list_namespaced_pod(
                namespace,
                label_selector=selector,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        return wire.decoded(wire.PODS.page, response.data, what).items or []

    def _job_statuses(
        self,
        namespace: str,
        jobs: list[wire.Job],
        pods: PodsByJob,
        reads: QueueReads,
        events: EventReader | None = None,
    ) -> list[JobStatus]:
        holds = reads.holds(namespace, jobs, pods)
        events = events or self._warning_events(namespace)
        return [
            job_status(job, pods, events, self._gpu, holds.get(job_uid(job) or "")) for job in jobs
        ]

    def _warning_events(self, namespace: str) -> EventReader:
        """A namespace's Warning events from their cache, taken once and only if a pending job
        needs them (a down watch of events blinds only the reads that need them)."""
        read: list[list[wire.CoreEvent]] = []

        def events() -> list[wire.CoreEvent]:
            if not read:
                read.append(self._caches.events(namespace))
            return read[0]

        return events

    def _submitted_before(self, namespace: str, name: str, run_id: str) -> bool:
        job = self._read_job(namespace, name)
        return job is not None and labels_of(job.metadata).get(RUN_ID_LABEL) == run_id

    def _unfinished_work(
        self, namespace: str, pods: list[wire.Pod], reads: QueueReads
    ) -> list[JobStatus]:
        """Every unfinished Job that asks for GPUs, and every other group of live pods using
        GPUs, grouped by their controller (a ReplicaSet, an MPIJob's launcher, ...); pods being
        deleted that still hold GPUs, outside a live Job, as ending work."""
        listed = self._caches.jobs(namespace)
        events, by_job = self._warning_events(namespace), group_by_job(pods)
        gpu_jobs = [
            job
            for job in listed
            if not final_condition(job) and pod_spec_gpus(pod_template(job), self._gpu) > 0
        ]
        statuses = self._job_statuses(namespace, gpu_jobs, by_job, reads, events)
        groups: dict[str, list[wire.Pod]] = {}
        ending: dict[str, list[wire.Pod]] = {}
        for pod in pods:
            if pod_phase(pod) in TERMINAL_POD_PHASES or pod_spec_gpus(pod.spec, self._gpu) == 0:
                continue
            owner = controller_of(pod.metadata)
            if is_deleting(pod.metadata):
                if pod.spec and pod.spec.node_name:  # still holding its node's GPUs
                    ending.setdefault(pod_group_id(namespace, pod, owner), []).append(pod)
            elif owner is None or owner.kind != "Job":  # a live Job's pods are the Job's
                groups.setdefault(pod_group_id(namespace, pod, owner), []).append(pod)
        statuses += [
            pod_group_status(group_id, namespace, members, events, self._gpu)
            for group_id, members in sorted(groups.items())
        ]
        unfinished = [status for status in statuses if not status.phase.finished]
        live = {status.job_id for status in unfinished}
        return unfinished + [
            ending_status(group_id, namespace, members, self._gpu)
            for group_id, members in sorted(ending.items())
            if group_id not in live
        ]


def _split_job_id(job_id: str) -> tuple[str, str]:
    namespace, _, name = job_id.partition("/")
    if not namespace or not name or "/" in name:
        raise ProbeError(f"not a Kubernetes job id (<namespace>/<job name>): {job_id!r}")
    return namespace, name
