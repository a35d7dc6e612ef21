"""An emulated Kubernetes control plane for the Kubernetes backend: kmock's API server over
real HTTP on 127.0.0.1, and this harness playing the controllers around it, one `step()` at a
time on a manual clock: the job controller (Job -> pods, Job status), the scheduler (first
fit on GPUs, the real FailedScheduling words), the kubelets (image pull, start, run for the
probe's duration, exit as the probe says), the Deployment controller (a revision per pod
template, a rolling update of one surge and none unavailable), the garbage collector and the
TTL controller.

A pod with a readiness probe (the inference probe's) runs the real `observer probe serve`,
its command line read by the real CLI, in process, bound to its own loopback address
(127.B.0.1, 127.B.0.2, ..., B of this process), which is its podIP; its kubelet probes the
real /healthz every periodSeconds of the harness's clock and sets Ready from the answer.

    with KubernetesHarness() as harness:
        job_id = harness.backend.submit(request)
        harness.settle(lambda: harness.backend.jobs([job_id])[job_id].phase.finished, 60)

Every controller speaks to the API server through the official client, as real ones do.

The API server authenticates bearer tokens as real ones do: a request without one is the
cluster's administrator (the harness's controllers and the backend under test), each tenant has
a ServiceAccount token (`tenant_token_files`) that RBAC confines to its own namespace, with
Kubernetes' own 401 and 403 words. `grant_cross_namespace()` is a RoleBinding too many.

One tenant namespace (`restricted`, the second tenant unless told) is labelled
`pod-security.kubernetes.io/enforce: restricted`, and the API server admits a pod there only
if it passes that profile (`pod_security.py`), as shared GPU clusters commonly require.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.client
import json
import os
import secrets
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path
from time import monotonic, sleep
from types import TracebackType
from typing import Any

import kmock
import pytest
from kubernetes import client

from observer.backends.base import FinishedJobs, QuotaChange
from observer.backends.kubernetes.backend import KubernetesBackend
from observer.backends.kubernetes.client import USER_AGENT
from observer.backends.kubernetes.manifests import (
    ENV_BEHAVIOUR,
    ENV_DURATION_SECONDS,
    ENV_EXIT_CODE,
    ENV_LOG_INTERVAL_SECONDS,
    ENV_LOG_LINES,
    ENV_RUN_ID,
    QUEUE_LABEL,
)
from observer.cli import _parser
from observer.clock import ManualClock
from observer.domain import Behaviour, JobStatus, SchedulerSnapshot
from observer.settings.controller import KubernetesSettings
from observer.workloads import serve
from tests.backends.admission import (
    LimitRange,
    compute_quota_refusal,
    limit_range_defaults,
    limit_range_refusal,
    webhook_refusal,
)
from tests.backends.pod_security import (
    ENFORCE_LABEL,
    PRIVILEGED,
    RESTRICTED,
    pod_security_refusal,
)
from tests.backends.watches import VersionedEmulator

GPU = "nvidia.com/gpu"
POOL_LABEL = "nvidia.com/gpu.product"
POOLS = ("NVIDIA-H200", "NVIDIA-A100-SXM4-80GB")
# A bound pod leaves the API only when its kubelet has stopped it; kmock keeps an object with
# a finalizer, marked with a deletionTimestamp, which is what Terminating is.
KUBELET_FINALIZER = "harness.observer/kubelet"
# What the probe image can run; anything else fails to start, as runc says.
EXECUTABLES = frozenset({"observer", "/bin/sh", "sh", "sleep", "tail", "timeout"})
# Namespaces are not among them: kmock's URL parser fails on POST /api/v1/namespaces.
RESOURCES = (
    "v1/nodes",
    "v1/pods",
    "v1/events",
    "v1/secrets",
    "v1/services",
    "v1/resourcequotas",
    "v1/limitranges",
    "batch/v1/jobs",
    "apps/v1/deployments",
)
REVISION_LABEL = "pod-template-hash"
# The queues' custom resources, served only when a test installs Kueue or Volcano
# (`install_queues`): without their CRDs the API server answers 404, as a real one does.
KUEUE, VOLCANO = ("kueue.x-k8s.io", "v1beta1"), ("scheduling.volcano.sh", "v1beta1")
QUEUE_RESOURCES = (
    "kueue.x-k8s.io/v1beta1/workloads",
    "kueue.x-k8s.io/v1beta1/localqueues",
    "scheduling.volcano.sh/v1beta1/podgroups",
)
CLUSTER_QUEUE_RESOURCES = (  # cluster-scoped: Kueue's ClusterQueues, Volcano's Queues
    "kueue.x-k8s.io/v1beta1/clusterqueues",
    "scheduling.volcano.sh/v1beta1/queues",
)
# Example documents of the queues' objects (their CRDs' shapes), which the harness plays.
RECORDED = Path(__file__).parent / "kubernetes_api"
POD_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # Volcano's, on each pod of a PodGroup
SERVICE_ACCOUNT = "tenant"  # each tenant's ServiceAccount, whose token the isolation probe uses
READ_VERBS = frozenset({"get", "list", "watch"})
TENANT_READABLE = ("jobs", "pods", "pods/log", "secrets")
_VERBS = {
    kmock.action.LIST: "list",
    kmock.action.WATCH: "watch",
    kmock.action.FETCH: "get",
    kmock.action.CREATE: "create",
    kmock.action.UPDATE: "patch",
    kmock.action.DELETE: "delete",
}
EPOCH = "1970-01-01T00:00:00Z"  # what a container that never started reports as its start
# What a tenant's own pod sets to be admitted where `restricted` is enforced.
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # metav1.MicroTime


# The spec fields whose managers the server records, by plural, as paths below f:spec: each of
# a ResourceQuota's spec.hard limits is a field of its own; a ClusterQueue's resourceGroups is
# an atomic list (+listType=atomic), one field whoever writes any of it.
MANAGED_FIELDS: dict[str, Callable[[dict[str, Any]], frozenset[tuple[str, ...]]]] = {
    "resourcequotas": lambda spec: frozenset(("f:hard", f"f:{k}") for k in spec.get("hard") or {}),
    "clusterqueues": lambda spec: frozenset(
        [("f:resourceGroups",)] if "resourceGroups" in spec else []
    ),
}
ADMIN = "kubernetes-admin"  # who a request without a token is (kubeadm's administrator)


def _fields_v1(owned: frozenset[tuple[str, ...]]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(owned):
        node = tree
        for key in path:
            node = node.setdefault(key, {})
    return {"f:spec": tree}


@dataclass(frozen=True)
class Quota:
    """A ResourceQuota the emulated API server enforces at admission."""

    name: str
    gpus: int | None = None  # requests.nvidia.com/gpu of live pods
    jobs: int | None = None  # count/jobs.batch
    # requests.cpu, limits.memory, ...: each pod must state what these cover (their usage is
    # not counted)
    compute: tuple[tuple[str, str], ...] = ()


def _resource_groups(gpus: int, borrowing_limit: int | None) -> list[dict[str, Any]]:
    """One resource group of the GPUs alone, in one flavor, default-flavor."""
    gpu_quota: dict[str, Any] = {"name": GPU, "nominalQuota": str(gpus)}
    if borrowing_limit is not None:
        gpu_quota["borrowingLimit"] = str(borrowing_limit)
    return [
        {
            "coveredResources": [GPU],
            "flavors": [{"name": "default-flavor", "resources": [gpu_quota]}],
        }
    ]


def _pod_gpus(spec: dict[str, Any]) -> int:
    return sum(
        int(((c.get("resources") or {}).get("limits") or {}).get(GPU, 0))
        for c in spec.get("containers") or []
    )


class _ApiServer(VersionedEmulator):
    """kmock's emulator, plus what a real API server does by itself: uid, creationTimestamp
    and namespace on create, the managedFields of a ResourceQuota's spec.hard and of a
    ClusterQueue's spec.resourceGroups (each manager's latest Update and the fields it owns),
    an audit log of their writes (`audit_log`, at level RequestResponse), and pod admission
    in the API server's order (admission.py): LimitRange defaults and limits, Pod Security
    (403 "violates PodSecurity"), a validating webhook's denial, ResourceQuota (403 "failed
    quota: ... must specify", "exceeded quota")."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.quotas: dict[str, Quota] = {}
        # namespace -> the requests.nvidia.com/gpu its ResourceQuota's status.used holds while
        # the quota controller no longer recounts it (KubernetesHarness.stall_quota_controller)
        self.stale_gpus_used: dict[str, int] = {}
        # (plural, namespace, name) -> (manager, time, spec fields it owns), as the server
        # keeps an object's managedFields
        self.field_managers: dict[tuple[str, str, str], list[tuple[str, str, frozenset]]] = {}
        self.audit_log: Path | None = None  # where the audit backend writes, once set
        self.users: dict[str, str] = {}  # an administrator's bearer token -> its user name
        # namespace -> its labels (kmock cannot hold Namespace objects)
        self.namespace_labels: dict[str, dict[str, str]] = {}
        # bearer token -> the tenant namespace it belongs to; None: an administrator's token
        self.tokens: dict[str, str | None] = {}
        # (user's namespace, other namespace) -> resources RBAC lets it read there
        self.grants: dict[tuple[str, str], frozenset[str]] = {}
        self.tenant_requests: list[tuple[str, str, str, str]] = []  # (user, verb, resource, ns)
        # resource plural -> how many times the backend listed it (the harness's controllers'
        # lists are theirs, not the backend's)
        self.lists: Counter[str] = Counter()
        self.limit_ranges: dict[str, LimitRange] = {}  # namespace -> its LimitRange
        self.webhook_denials: dict[str, tuple[str, str]] = {}  # namespace -> (webhook, words)

    async def _handle(self, request: kmock.Request) -> Any:
        # kmock keeps every request and matches each new one against all before it, which is
        # quadratic over a test; the harness asserts on objects, never on request history.
        del self._requests[:-1]
        user = self._authorize(request)
        received = self.clock.now()
        if (
            request.action == kmock.action.LIST
            and request.resource is not None
            and request.headers.get("User-Agent") == USER_AGENT
        ):
            self.lists[request.resource.plural] += 1
        # kmock stores a created object before any reaction runs, so a refusal must come first.
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            self._admit(request)
            meta = request.data.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", timestamp(self.clock.now()))
            if request.namespace:
                meta.setdefault("namespace", request.namespace)
        written = self._written(request)
        if written is not None:
            self._manage_fields(request, *written)
        response = await super()._handle(request)
        if written is not None:
            self._audit(request, user, received, *written)
        return response

    @staticmethod
    def _written(request: kmock.Request) -> tuple[str, str, str, dict[str, Any]] | None:
        """A create or update of a quota object: its plural, namespace, name and body."""
        plural = request.resource.plural if request.resource else None
        if plural not in MANAGED_FIELDS or not isinstance(request.data, dict):
            return None
        if request.action not in (kmock.action.CREATE, kmock.action.UPDATE):
            return None
        meta = request.data.get("metadata") or {}
        namespace = request.namespace or meta.get("namespace") or ""
        return str(plural), namespace, str(request.name or meta.get("name")), request.data

    def _manage_fields(self, request: kmock.Request, plural: str, *key: str) -> None:
        """The writer of spec fields owns them from now on (an Update takes them over from any
        other manager); its entry's time is this write's."""
        namespace, name, body = key
        written = MANAGED_FIELDS[plural](body.get("spec") or {})
        if not written:
            return  # a write of the status: the spec's managers stay as they were
        agent = next((v for k, v in request.headers.items() if k.lower() == "user-agent"), "")
        manager = request.params.get("fieldManager") or agent.split("/")[0]
        entries = []
        for other, time, owned in self.field_managers.get((plural, namespace, name), []):
            if other == manager:
                written |= owned
            elif owned - written:
                entries.append((other, time, owned - written))
        entries.append((manager, timestamp(self.clock.now()), written))
        self.field_managers[plural, namespace, name] = entries
        version = "/".join(p for p in (request.resource.group, request.resource.version) if p)
        body.setdefault("metadata", {})["managedFields"] = [
            {
                "manager": manager,
                "operation": "Update",
                "apiVersion": version,
                "time": time,
                "fieldsType": "FieldsV1",
                "fieldsV1": _fields_v1(owned),
            }
            for manager, time, owned in entries
        ]

    def _audit(
        self,
        request: kmock.Request,
        user: str,
        received: datetime,
        plural: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
    ) -> None:
        """The write's audit Event at ResponseComplete, as the API server's log backend
        writes it at level RequestResponse (audit.k8s.io/v1 Event, one JSON line)."""
        if self.audit_log is None or request.resource is None:
            return
        stored = next(
            obj.raw
            for (resource, ns, n), obj in self.objects.items()
            if resource.plural == plural and (ns or "") == namespace and n == name
        )
        group, version = request.resource.group or "", request.resource.version
        reference = {"resource": plural, "namespace": namespace, "name": name, "apiGroup": group}
        if set(body) <= {"status", "metadata"}:
            # Kueue's controllers write a ClusterQueue's status through its subresource.
            reference["subresource"] = "status"
        created = request.action == kmock.action.CREATE
        event = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "RequestResponse",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": request.url.path_qs,
            "verb": "create" if created else "patch",
            "user": {"username": user, "groups": ["system:authenticated"]},
            "sourceIPs": ["127.0.0.1"],
            "objectRef": {k: v for k, v in reference.items() if v} | {"apiVersion": version},
            "responseStatus": {"metadata": {}, "code": 201 if created else 200},
            "requestObject": body,
            "responseObject": stored,
            "requestReceivedTimestamp": micro_timestamp(received),
            "stageTimestamp": micro_timestamp(self.clock.now()),
        }
        with self.audit_log.open("a") as log:
            log.write(json.dumps(event) + "\n")

    def _authorize(self, request: kmock.Request) -> str:
        """Authentication, then RBAC, before anything is looked up: what the real one does.
        The user the request is authenticated as."""
        header = next((v for k, v in request.headers.items() if k.lower() == "authorization"), None)
        if header is None:
            return ADMIN  # the cluster's administrator
        token = header.removeprefix("Bearer ").strip()
        if token not in self.tokens:
            raise kmock.KubernetesError(status=401, reason="Unauthorized", message="Unauthorized")
        own = self.tokens[token]
        if own is None:
            return self.users.get(token, ADMIN)  # an administrator's token
        user = f"system:serviceaccount:{own}:{SERVICE_ACCOUNT}"
        verb = _VERBS.get(request.action) if request.action else None
        resource = request.resource.plural if request.resource else None
        if verb is None or resource is None:
            return user  # discovery: /api, /apis, /version are open to every authenticated user
        if request.subresource:
            resource = f"{resource}/{request.subresource}"
        namespace = request.namespace
        self.tenant_requests.append((user, verb, resource, namespace or ""))
        if namespace == own:
            return user  # the tenant's Role in its own namespace
        granted = self.grants.get((own, namespace or ""), frozenset())
        if namespace is not None and verb in READ_VERBS and resource in granted:
            return user
        group = request.resource.group if request.resource else ""
        kind = resource.split("/")[0] + (f".{group}" if group else "")
        subject = f'{kind} "{request.name}"' if request.name else kind
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        raise kmock.KubernetesError(
            status=403,
            reason="Forbidden",
            message=f'{subject} is forbidden: User "{user}" cannot {verb} resource '
            f'"{resource}" in API group "{group}" {scope}',
            details={"name": request.name or "", "kind": resource.split("/")[0]},
        )

    def _admit(self, request: kmock.Request) -> None:
        self._admit_pod(request)
        quota = self.quotas.get(request.namespace or "")
        if quota is None or request.resource is None:
            return
        name = request.data.get("metadata", {}).get("name")
        live = [
            obj
            for (resource, namespace, _), obj in self.objects.items()
            if resource.plural == request.resource.plural
            and namespace == request.namespace
            and not obj.deleted
        ]
        if request.resource.plural == "jobs" and quota.jobs is not None:
            self._check(quota, f'jobs.batch "{name}"', "count/jobs.batch", 1, len(live), quota.jobs)
        if request.resource.plural == "pods" and quota.gpus is not None:
            namespace = request.namespace or ""
            used = self.stale_gpus_used.get(namespace, self.gpus_used(namespace))
            wanted = _pod_gpus(request.data.get("spec", {}))
            resource = f"requests.{GPU}"
            self._check(quota, f'pods "{name}"', resource, wanted, used, quota.gpus)
            if namespace in self.stale_gpus_used:  # admission adds what it admits to status.used
                self.stale_gpus_used[namespace] = used + wanted

    def gpus_used(self, namespace: str) -> int:
        """requests.nvidia.com/gpu of the namespace's pods that have not ended, as the quota
        controller counts them."""
        return sum(
            _pod_gpus(obj.get("spec", {}))
            for (resource, at, _), obj in self.objects.items()
            if resource.plural == "pods"
            and at == namespace
            and not obj.deleted
            and obj.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        )

    def _admit_pod(self, request: kmock.Request) -> None:
        """A pod, as the admission plugins take it in turn: LimitRanger mutates then checks,
        then Pod Security, a validating webhook, and the ResourceQuota's requirements."""
        if request.resource is None or request.resource.plural != "pods":
            return
        namespace = request.namespace or ""
        name = request.data.get("metadata", {}).get("name", "")
        limits = self.limit_ranges.get(namespace)
        spec = request.data["spec"] = limit_range_defaults(request.data.get("spec", {}), limits)
        forbidden = f'pods "{name}" is forbidden: '
        refusal = limit_range_refusal(spec, limits)
        if refusal is not None:
            raise kmock.KubernetesError(status=403, reason="Forbidden", message=forbidden + refusal)
        level = self.namespace_labels.get(namespace, {}).get(ENFORCE_LABEL, PRIVILEGED)
        refusal = pod_security_refusal(level, name, spec)
        if refusal is not None:
            raise kmock.KubernetesError(status=403, reason="Forbidden", message=refusal)
        if namespace in self.webhook_denials:
            words = webhook_refusal(*self.webhook_denials[namespace])
            raise kmock.KubernetesError(status=400, reason="BadRequest", message=words)
        quota = self.quotas.get(namespace)
        refusal = compute_quota_refusal(spec, quota.name, dict(quota.compute)) if quota else None
        if refusal is not None:
            raise kmock.KubernetesError(status=403, reason="Forbidden", message=forbidden + refusal)

    @staticmethod
    def _check(quota: Quota, what: str, resource: str, wanted: int, used: int, hard: int) -> None:
        if wanted and used + wanted > hard:
            raise kmock.KubernetesError(
                status=403,
                reason="Forbidden",
                message=f"{what} is forbidden: exceeded quota: {quota.name}, "
                f"requested: {resource}={wanted}, used: {resource}={used}, "
                f"limited: {resource}={hard}",
            )


class _SyncedBackend(KubernetesBackend):
    """The backend under test, whose reads first let its informers catch up with the writes
    the harness has made: a real controller reads its caches at any moment, a test asserts on
    a moment it has just made. A kind the cluster lacks is re-checked on its own schedule."""

    def __init__(self, settings: KubernetesSettings, clock: ManualClock, server: _ApiServer):
        super().__init__(settings, clock)
        self._server = server

    def _caught_up(self) -> None:
        deadline = monotonic() + 10
        while any(
            int(view.version or 0) < self._latest_write(view.what)
            for view in self.watched()
            if view.up and not view.absent
        ):
            if monotonic() > deadline:
                raise AssertionError(f"the informers did not catch up: {self.watched()}")
            sleep(0.005)

    def _latest_write(self, what: str) -> int:
        """The version of the latest write a view named `what` watches: "nodes", "pods in all
        namespaces", "jobs in research", "Warning events in research",
        "workloads.kueue.x-k8s.io in research", "clusterqueues.kueue.x-k8s.io"."""
        words = what.split()
        kind = words.pop(0) if words[0][0].isupper() else ""
        plural = words[0].split(".")[0]
        namespace = words[2] if len(words) == 3 else None
        return max(
            (
                version
                for (written, where, of_kind), version in self._server.latest_in.items()
                if written == plural and namespace in (None, where) and kind in ("", of_kind)
            ),
            default=0,
        )

    def snapshot(self) -> SchedulerSnapshot:
        self._caught_up()
        return super().snapshot()

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        self._caught_up()
        return super().jobs(job_ids)

    def probe_jobs(self) -> list[JobStatus]:
        self._caught_up()
        return super().probe_jobs()

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        self._caught_up()
        return super().finished_jobs(since, until)

    def quota_changes(self, since: datetime, until: datetime) -> list[QuotaChange]:
        self._caught_up()
        return super().quota_changes(since, until)


class KubernetesHarness:
    """The emulated cluster and a KubernetesBackend on it: `nodes` nodes of `gpus_per_node`
    GPUs in two pools, one namespace per tenant. Use it as a context manager."""

    def __init__(
        self,
        *,
        tenants: tuple[str, str] = ("research", "prod"),
        queue: str | None = None,
        nodes: int = 3,
        gpus_per_node: int = 4,
        tick_seconds: float = 1.0,
        overrides: dict[str, Any] | None = None,
        restricted: str | None = None,
    ) -> None:
        self.tenants = tenants
        self.restricted = restricted or tenants[1]
        self.queue = queue
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.tick_seconds = tick_seconds
        self.node_names = tuple(f"gpu-node-{i}" for i in range(nodes))
        self.clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
        self.server = _ApiServer(self.clock)
        self.server.namespace_labels = {
            tenant: {ENFORCE_LABEL: RESTRICTED} if tenant == self.restricted else {}
            for tenant in tenants
        }
        self.hung_nodes: set[str] = set()  # kubelets that never finish stopping a pod
        self._pod_groups: dict[str, str] = {}  # Job uid -> its Volcano PodGroup
        self._unenqueued: set[tuple[str, str]] = set()  # PodGroups Volcano has not enqueued
        self._kueue: tuple[str, int] | None = None  # Kueue's ClusterQueue and its GPUs
        self._overrides = overrides or {}  # KubernetesSettings fields
        self._logs: dict[tuple[str, str], list[str]] = {}
        self._events: dict[tuple[str, str, str, str], tuple[str, int, str]] = {}
        self._replica_sets: dict[str, tuple[str, str]] = {}  # uid -> (namespace, Deployment)
        # (namespace, pod) -> its serve program; when its kubelet last probed its readiness
        self._servers: dict[tuple[str, str], ThreadingHTTPServer] = {}
        self._last_probe: dict[tuple[str, str], datetime] = {}
        # Pod IPs are 127.B.x.y with B from the process id, so that two test processes (xdist
        # workers, two sessions) never serve pods on the same address.
        self._ip_block = 1 + os.getpid() % 254
        self._next_ip = 1
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> KubernetesHarness:
        started = threading.Event()
        url: list[str] = []

        async def serve() -> None:
            async with self.server, kmock.Server(self.server) as http:
                for resource in RESOURCES:  # kmock answers 404 to listing a resource it lacks
                    self.server.resources[resource] = kmock.ResourceInfo()
                text = kmock.headers({"Content-Type": "text/plain; charset=utf-8"})
                self.server[kmock.subresource("log")] << text << self._log_response
                self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
                url.append(str(http.url).rstrip("/"))
                started.set()
                await self._stop.wait()

        self._thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the emulated API server did not start")
        self.url = url[0]
        configuration = client.Configuration()
        configuration.host = self.url
        self.api = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self._token_dir = tempfile.TemporaryDirectory(prefix="observer-k8s-tokens-")
        token_files: dict[str, Path] = {}
        for tenant in self.tenants:
            token = secrets.token_urlsafe(24)
            self.server.tokens[token] = tenant
            token_files[tenant] = Path(self._token_dir.name) / tenant
            token_files[tenant].write_text(token + "\n")
        self.settings = KubernetesSettings(
            host=self.url,
            namespaces=self.tenants,
            request_timeout_seconds=5,
            **{"tenant_token_files": token_files, **self._overrides},
        )
        self.registry = {self.settings.image, self.settings.gpu_busy_image or self.settings.image}
        try:
            self._create_cluster()
            self.backend = _SyncedBackend(self.settings, self.clock, self.server)
        except BaseException:
            self._shut_down()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.backend.close()
        self._shut_down()

    def _shut_down(self) -> None:
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        self._servers.clear()
        self.api.close()
        self._token_dir.cleanup()
        assert self._loop is not None and self._stop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _create_cluster(self) -> None:
        for index, name in enumerate(self.node_names):
            pool = POOLS[0] if index < max(1, self.nodes - 1) else POOLS[1]
            gpus = str(self.gpus_per_node)
            self.core.create_node(
                {
                    "metadata": {
                        "name": name,
                        "labels": {"kubernetes.io/hostname": name, POOL_LABEL: pool},
                    },
                    "spec": {},
                    "status": {
                        "capacity": {GPU: gpus, "cpu": "96", "memory": "1Ti"},
                        "allocatable": {GPU: gpus, "cpu": "95", "memory": "1000Gi"},
                        "conditions": [self._condition("Ready", "True", "KubeletReady")],
                    },
                }
            )

    # --- what tests do to the cluster ------------------------------------------------------

    def settle(self, until: Callable[[], bool], timeout_seconds: float) -> None:
        """Step the cluster until `until()` holds; fail the test after `timeout_seconds` of
        the harness's time (each step is `tick_seconds`)."""
        deadline = self.clock.monotonic() + timeout_seconds
        while not until():
            if self.clock.monotonic() >= deadline:
                pytest.fail(f"the emulated cluster did not settle within {timeout_seconds} s")
            self.step()

    def step(self) -> None:
        self.clock.advance(self.tick_seconds)
        self._collect_garbage()
        self._run_kueue()
        self._create_job_pods()
        self._run_deployments()
        self._schedule()
        self._run_kubelets()
        self._update_jobs()

    def set_quota(
        self,
        namespace: str,
        *,
        gpus: int | None = None,
        jobs: int | None = None,
        compute: dict[str, str] | None = None,
        by: str = "kubectl-edit",
        user: str | None = None,
    ) -> None:
        """`by` (its field manager) creates or changes the namespace's ResourceQuota, as
        `user` where named (with an administrator's token of that user's). `compute`: its
        cpu and memory limits (e.g. {"requests.cpu": "8"}), which every pod must state."""
        covered = tuple(sorted((compute or {}).items()))
        quota = Quota(f"{namespace}-quota", gpus=gpus, jobs=jobs, compute=covered)
        exists = namespace in self.server.quotas
        self.server.quotas[namespace] = quota
        hard = {
            key: str(value)
            for key, value in ((f"requests.{GPU}", gpus), ("count/jobs.batch", jobs), *covered)
            if value is not None
        }
        body = {"metadata": {"name": quota.name}, "spec": {"hard": hard}}
        with client.ApiClient(self._configuration(user)) as api:
            core = client.CoreV1Api(api)
            if exists:
                core.patch_namespaced_resource_quota(quota.name, namespace, body, field_manager=by)
            else:
                core.create_namespaced_resource_quota(namespace, body, field_manager=by)

    def set_limit_range(self, namespace: str, limits: LimitRange) -> None:
        """The namespace's LimitRange: the API server defaults and checks each pod by it."""
        self.core.create_namespaced_limit_range(namespace, limits.document())
        self.server.limit_ranges[namespace] = limits

    def deny_pods(self, namespace: str, webhook: str, words: str) -> None:
        """A validating webhook (a policy engine's) that denies every pod of the namespace."""
        self.server.webhook_denials[namespace] = (webhook, words)

    def stall_quota_controller(self, namespace: str) -> None:
        """The resource quota controller stops recounting the namespace (kube-controller-manager
        down, its quota sync stuck): its ResourceQuota's status.used, which admission checks,
        keeps what it counted now plus each pod admitted since, pods that ended included."""
        self.server.stale_gpus_used[namespace] = self.server.gpus_used(namespace)

    def install_queues(self) -> None:
        """Kueue's and Volcano's CRDs: the API server serves their objects from now on."""
        for resource in QUEUE_RESOURCES:
            self.server.resources[resource] = kmock.ResourceInfo(namespaced=True)
        for resource in CLUSTER_QUEUE_RESOURCES:
            self.server.resources[resource] = kmock.ResourceInfo(namespaced=False)

    def play_kueue(
        self,
        cluster_queue: str,
        gpus: int,
        *,
        borrowing_limit: int | None = 0,
        cohort: str = "",
        by: str = "kubectl-create",
    ) -> None:
        """Kueue from now on, with one ClusterQueue of `gpus` GPUs nominal (one flavor,
        default-flavor; the recorded clusterqueue_team_a.json with its name, quota and cohort
        set, created by the field manager `by`): a Job with the queue label is suspended and
        given a Workload, admitted while the nominal quota holds it, and the ClusterQueue's
        and LocalQueues' status counts its usage and pending workloads as Kueue's
        controllers do."""
        document = json.loads((RECORDED / "clusterqueue_team_a.json").read_text())
        document["metadata"] = {"name": cluster_queue}
        document["spec"]["cohort"] = cohort
        document["spec"]["resourceGroups"] = _resource_groups(gpus, borrowing_limit)
        document["status"] = {}
        self.custom.create_cluster_custom_object(
            *KUEUE, "clusterqueues", document, field_manager=by
        )
        self._kueue = (cluster_queue, gpus)

    def set_cluster_queue_quota(
        self,
        cluster_queue: str,
        gpus: int,
        *,
        borrowing_limit: int | None = None,
        by: str = "kubectl-edit",
        user: str | None = None,
    ) -> None:
        """`by` (its field manager) rewrites the ClusterQueue's resourceGroups to `gpus` GPUs
        nominal, as `user` where named (with an administrator's token of that user's, else
        without a token), and Kueue admits by the new quota from now on."""
        with client.ApiClient(self._configuration(user)) as api:
            client.CustomObjectsApi(api).patch_cluster_custom_object(
                *KUEUE,
                "clusterqueues",
                cluster_queue,
                {"spec": {"resourceGroups": _resource_groups(gpus, borrowing_limit)}},
                field_manager=by,
            )
        if self._kueue is not None and self._kueue[0] == cluster_queue:
            self._kueue = (cluster_queue, gpus)

    def _configuration(self, user: str | None) -> client.Configuration:
        configuration = client.Configuration()
        configuration.host = self.url
        if user is not None:
            token = secrets.token_urlsafe(24)
            self.server.tokens[token], self.server.users[token] = None, user
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
        return configuration

    def play_volcano_queue(
        self, name: str, *, weight: int, deserved: int, capability: int, state: str = "Open"
    ) -> None:
        """A Volcano Queue (the recorded volcano_queue.json with its name, weight, GPUs and
        state set), as Volcano's queue controller shows it before any PodGroup runs."""
        document = json.loads((RECORDED / "volcano_queue.json").read_text())
        document["metadata"] = {"name": name}
        document["spec"]["weight"] = weight
        document["spec"]["deserved"] = {GPU: str(deserved)}
        document["spec"]["capability"] = {GPU: str(capability)}
        document["status"] = {"state": state, "pending": 0, "running": 0, "allocated": {}}
        self.custom.create_cluster_custom_object(*VOLCANO, "queues", document)

    def add_local_queue(self, namespace: str, name: str, cluster_queue: str) -> None:
        """A LocalQueue (the recorded localqueue_team_a.json, renamed) feeding `cluster_queue`."""
        document = json.loads((RECORDED / "localqueue_team_a.json").read_text())
        document["metadata"] = {"name": name, "namespace": namespace}
        document["spec"]["clusterQueue"] = cluster_queue
        document["status"] = {}
        self.custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", document)

    def _run_kueue(self) -> None:
        """Kueue's webhook, job reconciler and scheduler in one: each labelled Job suspended at
        once and given a Workload (job-<name>-<5 hex>, labelled with and owned by the Job, its
        LocalQueue made to point at the ClusterQueue), then in creation order admitted (the
        Job unsuspended) while the ClusterQueue's GPUs hold it, else left without quota in
        Kueue's words (QuotaReserved False, reason Pending)."""
        if self._kueue is None:
            return
        cluster_queue, quota = self._kueue
        jobs = {job.metadata.uid: job for job in self.batch.list_job_for_all_namespaces().items}
        workloads = {
            workload["metadata"]["ownerReferences"][0]["uid"]: workload
            for namespace in self.tenants
            for workload in self._custom_list(namespace, "workloads")
        }
        for uid, job in jobs.items():
            local_queue = (job.metadata.labels or {}).get(QUEUE_LABEL)
            if local_queue is None or uid in workloads or _final_condition(job):
                continue
            self.batch.patch_namespaced_job(
                job.metadata.name, job.metadata.namespace, {"spec": {"suspend": True}}
            )
            workloads[uid] = self._create_workload(job, local_queue, cluster_queue)
        used = sum(
            _job_gpus(jobs[uid])
            for uid, workload in workloads.items()
            if uid in jobs and _admitted(workload) and not _final_condition(jobs[uid])
        )
        waiting = [
            (uid, workload)
            for uid, workload in workloads.items()
            if uid in jobs and not _admitted(workload)
        ]
        for uid, workload in sorted(waiting, key=lambda w: w[1]["metadata"]["creationTimestamp"]):
            job, need = jobs[uid], _job_gpus(jobs[uid])
            admitted = used + need <= quota
            if admitted:
                used += need
                conditions = [
                    self._condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved"),
                    self._condition("Admitted", "True", "Admitted", "The workload is admitted"),
                ]
            else:
                message = (
                    "couldn't assign flavors to pod set main: insufficient unused quota for "
                    f"{GPU} in flavor default-flavor, {used + need - quota} more needed"
                )
                conditions = [self._condition("QuotaReserved", "False", "Pending", message)]
            namespace = job.metadata.namespace
            self.custom.patch_namespaced_custom_object(
                *KUEUE,
                namespace,
                "workloads",
                workload["metadata"]["name"],
                {"status": {"conditions": conditions}},
            )
            if admitted:
                patch = {"spec": {"suspend": False}}
                self.batch.patch_namespaced_job(job.metadata.name, namespace, patch)
        self._kueue_status(cluster_queue, jobs)

    def _kueue_status(self, cluster_queue: str, jobs: dict[str, client.V1Job]) -> None:
        """The ClusterQueue's and each LocalQueue's status as Kueue's controllers write it:
        the GPUs of admitted, unfinished workloads (flavorsUsage, flavorsReservation) and the
        workloads pending and admitted."""
        usage: Counter[str] = Counter()
        counts: dict[str, Counter[str]] = {}
        for namespace in self.tenants:
            for workload in self._custom_list(namespace, "workloads"):
                job = jobs.get(workload["metadata"]["ownerReferences"][0]["uid"])
                if job is None or _final_condition(job):
                    continue
                local = f"{namespace}/{workload['spec']['queueName']}"
                state = "admitted" if _admitted(workload) else "pending"
                counts.setdefault(local, Counter())[state] += 1
                counts.setdefault("", Counter())[state] += 1
                if state == "admitted":
                    usage[local] += _job_gpus(job)
                    usage[""] += _job_gpus(job)

        def flavors(gpus: int) -> list[dict[str, Any]]:
            return [
                {
                    "name": "default-flavor",
                    "resources": [{"name": GPU, "total": str(gpus), "borrowed": "0"}],
                }
            ]

        def status(key: str) -> dict[str, Any]:
            return {
                "flavorsUsage": flavors(usage[key]),
                "flavorsReservation": flavors(usage[key]),
                "pendingWorkloads": counts.get(key, Counter())["pending"],
                "reservingWorkloads": counts.get(key, Counter())["admitted"],
                "admittedWorkloads": counts.get(key, Counter())["admitted"],
            }

        self.custom.patch_cluster_custom_object(
            *KUEUE, "clusterqueues", cluster_queue, {"status": status("")}
        )
        for namespace in self.tenants:
            for queue in self._custom_list(namespace, "localqueues"):
                local = f"{namespace}/{queue['metadata']['name']}"
                # A LocalQueue's usage is flavorUsage (localqueue_types.go), a ClusterQueue's
                # flavorsUsage.
                mine = status(local)
                mine["flavorUsage"] = mine.pop("flavorsUsage")
                body = {"status": mine}
                self.custom.patch_namespaced_custom_object(
                    *KUEUE, namespace, "localqueues", queue["metadata"]["name"], body
                )

    def _create_workload(
        self, job: client.V1Job, local_queue: str, cluster_queue: str
    ) -> dict[str, Any]:
        namespace, name, uid = job.metadata.namespace, job.metadata.name, job.metadata.uid
        if local_queue not in {
            q["metadata"]["name"] for q in self._custom_list(namespace, "localqueues")
        }:
            body = {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": local_queue, "namespace": namespace},
                "spec": {"clusterQueue": cluster_queue},
            }
            self.custom.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", body)
        workload = {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": f"job-{name}-{uuid.uuid4().hex[:5]}",
                "namespace": namespace,
                "labels": {"kueue.x-k8s.io/job-uid": uid},
                "ownerReferences": [self._owner("batch/v1", "Job", name, uid)],
                "creationTimestamp": timestamp(self.clock.now()),
            },
            "spec": {"queueName": local_queue, "podSets": [{"name": "main", "count": 1}]},
            "status": {},
        }
        self.custom.create_namespaced_custom_object(*KUEUE, namespace, "workloads", workload)
        return workload

    def _custom_list(self, namespace: str, plural: str) -> list[dict[str, Any]]:
        group = VOLCANO if plural == "podgroups" else KUEUE
        items: list[dict[str, Any]] = self.custom.list_namespaced_custom_object(
            *group, namespace, plural
        )["items"]
        return items

    def volcano_holds(self, job_id: str, *, queue: str, reason: str, message: str) -> str:
        """Volcano's queue not enqueueing a Job's PodGroup, whose name it returns:
        podgroup-<Job uid> (Volcano's name for a Job's) Pending with an Unschedulable
        condition; the Job's pods, created from now on, carry its annotation, and no
        scheduler binds them."""
        namespace, name = job_id.split("/", 1)
        job = self.batch.read_namespaced_job(name, namespace)
        group = f"podgroup-{job.metadata.uid}"
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": group,
                "namespace": namespace,
                "ownerReferences": [self._owner("batch/v1", "Job", name, job.metadata.uid)],
            },
            "spec": {"minMember": 1, "queue": queue},
            "status": {
                "phase": "Pending",
                "conditions": [self._condition("Unschedulable", "True", reason, message)],
            },
        }
        self.custom.create_namespaced_custom_object(*VOLCANO, namespace, "podgroups", body)
        self._pod_groups[job.metadata.uid] = group
        self._unenqueued.add((namespace, group))
        return group

    def grant_cross_namespace(
        self, tenant: str, other: str, resources: tuple[str, ...] = TENANT_READABLE
    ) -> None:
        """A RoleBinding too many: `tenant`'s ServiceAccount may get, list and watch these
        resources ("pods/log" for logs) in `other`'s namespace."""
        granted = self.server.grants.get((tenant, other), frozenset())
        self.server.grants[(tenant, other)] = granted | frozenset(resources)

    def add_secret(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """A tenant's Secret (values given in plain text, stored base64 as the API does)."""
        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
        body = {"metadata": {"name": name, "namespace": namespace}, "data": encoded}
        self.core.create_namespaced_secret(namespace, body)

    def compact_versions(self) -> None:
        """etcd's compaction: every version so far is forgotten (watches.py)."""
        self._on_server_loop(self.server.compact)

    def refuse_reads(self, plural: str) -> None:
        """The API server fails `plural`'s watches and answers its lists 503."""
        self._on_server_loop(lambda: self.server.refuse(plural))

    def allow_reads(self, plural: str) -> None:
        self._on_server_loop(lambda: self.server.allow(plural))

    def _on_server_loop(self, call: Callable[[], None]) -> None:
        assert self._loop is not None
        done = threading.Event()
        self._loop.call_soon_threadsafe(lambda: (call(), done.set()))
        done.wait(5)

    def cordon(self, node: str) -> None:
        taint = {
            "key": "node.kubernetes.io/unschedulable",
            "effect": "NoSchedule",
            "timeAdded": timestamp(self.clock.now()),
        }
        self.core.patch_node(node, {"spec": {"unschedulable": True, "taints": [taint]}})

    def mark_not_ready(self, node: str) -> None:
        """The node controller's view of a node whose kubelet stopped posting status."""
        ready = self._condition(
            "Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
        )
        self.core.patch_node_status(node, {"status": {"conditions": [ready]}})

    def hang_terminations(self, node: str) -> None:
        """The node's kubelet can no longer stop a container (a process stuck in the driver):
        its pods stay Terminating."""
        self.hung_nodes.add(node)

    def hang_ends(self, job_id: str) -> None:
        """The kubelets of the job's nodes can no longer stop its pods (nor any other)."""
        self.hung_nodes.update(pod.spec.node_name for pod in self.pods_of(job_id))

    def release_ends(self, job_id: str) -> None:
        """Those kubelets work again: the pods stuck Terminating go."""
        self.hung_nodes.difference_update(pod.spec.node_name for pod in self.pods_of(job_id))

    def add_pod(
        self,
        namespace: str,
        name: str,
        gpus: int,
        *,
        node: str | None = None,
        queue: str | None = None,
        owner: tuple[str, str] | None = None,
    ) -> None:
        """Another tenant's pod that runs until deleted, owned by `owner` (kind, name) if given."""
        metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {}}
        if queue is not None:
            metadata["labels"]["kueue.x-k8s.io/queue-name"] = queue
        if owner is not None:
            metadata["ownerReferences"] = [self._owner("apps/v1", owner[0], owner[1], "")]
        if node is not None:
            metadata["finalizers"] = [KUBELET_FINALIZER]
        container = {"name": "main", "image": self.settings.image, "command": ["sleep", "inf"]}
        container["resources"] = {"limits": {GPU: str(gpus)}}
        container["securityContext"] = RESTRICTED_CONTAINER
        spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
        spec["securityContext"] = RESTRICTED_POD
        if node is not None:
            spec["nodeName"] = node
        body = {"metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}
        self.core.create_namespaced_pod(namespace, body)

    def crash_servers(self, namespace: str) -> None:
        """Every serve program of the namespace's pods dies (the pods stay, their kubelets
        find /healthz unanswered at the next probe)."""
        for key in [key for key in self._servers if key[0] == namespace]:
            server = self._servers.pop(key)
            server.shutdown()
            server.server_close()

    def owner_ids(self, job_id: str) -> set[str]:
        """The UIDs of the job's pods, which the agents read from their cgroup paths."""
        return {pod.metadata.uid for pod in self.pods_of(job_id)}

    def pods_of(self, job_id: str) -> list[client.V1Pod]:
        namespace, name = job_id.split("/", 1)
        return [
            pod
            for pod in self.core.list_namespaced_pod(namespace).items
            if any(ref.name == name for ref in pod.metadata.owner_references or [])
        ]

    # --- the garbage collector and the TTL controller --------------------------------------

    def _collect_garbage(self) -> None:
        now, owners = self.clock.now(), set()
        for job in self.batch.list_job_for_all_namespaces().items:
            ttl, finished = job.spec.ttl_seconds_after_finished, _finished_at(job)
            if ttl is not None and finished is not None and now >= finished + timedelta(0, ttl):
                self.batch.delete_namespaced_job(
                    job.metadata.name, job.metadata.namespace, propagation_policy="Background"
                )
            else:
                owners.add(job.metadata.uid)
        deployments = {
            (d.metadata.namespace, d.metadata.name)
            for d in self.apps.list_deployment_for_all_namespaces().items
        }
        for pod in self._pods():
            if pod.metadata.deletion_timestamp:
                continue
            refs = pod.metadata.owner_references or []
            jobs = [ref for ref in refs if ref.kind == "Job"]
            sets = [self._replica_sets[ref.uid] for ref in refs if ref.uid in self._replica_sets]
            if (jobs and jobs[0].uid not in owners) or (sets and sets[0] not in deployments):
                self.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace)

    # --- the job controller ----------------------------------------------------------------

    def _create_job_pods(self) -> None:
        pods = self._pods()
        for job in self.batch.list_job_for_all_namespaces().items:
            if job.metadata.deletion_timestamp or job.spec.suspend or _final_condition(job):
                continue
            owned = [pod for pod in pods if _owner_uid(pod) == job.metadata.uid]
            for _ in range((job.spec.parallelism or 1) - len(owned)):
                self._create_pod_of(job)

    def _create_pod_of(self, job: client.V1Job) -> None:
        name, uid = job.metadata.name, job.metadata.uid
        template = self.api.sanitize_for_serialization(job.spec.template)
        labels = dict(template.get("metadata", {}).get("labels", {}))
        labels.update({"job-name": name, "batch.kubernetes.io/job-name": name})
        labels.update({"controller-uid": uid, "batch.kubernetes.io/controller-uid": uid})
        pod_name = f"{name}-{uuid.uuid4().hex[:5]}"
        group = self._pod_groups.get(uid)
        body = {
            "metadata": {
                "name": pod_name,
                "namespace": job.metadata.namespace,
                "labels": labels,
                "annotations": {POD_GROUP_ANNOTATION: group} if group else {},
                "ownerReferences": [self._owner("batch/v1", "Job", name, uid)],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }
        try:
            self.core.create_namespaced_pod(job.metadata.namespace, body)
        except client.ApiException as exc:  # refused at admission, e.g. by a quota
            message = f"Error creating: {json.loads(exc.body)['message']}"
            self._event(job, "batch/v1", "Job", "FailedCreate", message, "job-controller")

    def _update_jobs(self) -> None:
        now, pods = timestamp(self.clock.now()), self._pods()
        for job in self.batch.list_job_for_all_namespaces().items:
            if job.metadata.deletion_timestamp or _final_condition(job):
                continue
            owned = [pod for pod in pods if _owner_uid(pod) == job.metadata.uid]
            phases = Counter(pod.status.phase for pod in owned)
            active = [
                pod
                for pod in owned
                if pod.status.phase not in ("Succeeded", "Failed")
                and not pod.metadata.deletion_timestamp
            ]
            start_time = job.status.start_time if job.status else None
            status: dict[str, Any] = {
                "active": len(active),
                "succeeded": phases["Succeeded"],
                "failed": phases["Failed"],
                "startTime": timestamp(start_time) if start_time else now,
            }
            backoff_limit = 6 if job.spec.backoff_limit is None else job.spec.backoff_limit
            if phases["Failed"] > backoff_limit:
                status["conditions"] = [
                    self._condition(
                        "Failed",
                        "True",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    )
                ]
                for pod in active:  # a failed Job stops its other pods
                    self.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
            elif phases["Succeeded"] >= (job.spec.completions or 1):
                status["conditions"] = [self._condition("Complete", "True")]
                status["completionTime"] = now
            self.batch.patch_namespaced_job_status(
                job.metadata.name, job.metadata.namespace, {"status": status}
            )

    # --- the Deployment controller ---------------------------------------------------------

    def _run_deployments(self) -> None:
        """Each Deployment's pods at its template's revision: missing ones created, a rolling
        update bringing one new pod before an old ready one goes (maxSurge 1, maxUnavailable
        0), old pods not ready removed at once, a scale-down taking the newest first."""
        pods = [pod for pod in self._pods() if not pod.metadata.deletion_timestamp]
        for deployment in self.apps.list_deployment_for_all_namespaces().items:
            if deployment.metadata.deletion_timestamp:
                continue
            namespace, name = deployment.metadata.namespace, deployment.metadata.name
            template = self.api.sanitize_for_serialization(deployment.spec.template)
            revision = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
            revision = revision[:10]
            selector = deployment.spec.selector.match_labels
            owned = [
                pod
                for pod in pods
                if pod.metadata.namespace == namespace
                and selector.items() <= (pod.metadata.labels or {}).items()
            ]
            new = [p for p in owned if p.metadata.labels.get(REVISION_LABEL) == revision]
            old = [p for p in owned if p not in new]
            want = deployment.spec.replicas if deployment.spec.replicas is not None else 1
            for pod in [p for p in old if not _pod_ready(p)]:
                self.core.delete_namespaced_pod(pod.metadata.name, namespace)
                old.remove(pod)
            if len(new) < want and len(new) + len(old) <= want:
                self._create_replica(deployment, template, revision)
            elif old and sum(map(_pod_ready, new + old)) > want:
                self.core.delete_namespaced_pod(old[0].metadata.name, namespace)
            elif not old and len(new) > want:
                extra = sorted(new, key=lambda p: (_pod_ready(p), p.metadata.creation_timestamp))
                for pod in extra[: len(new) - want]:
                    self.core.delete_namespaced_pod(pod.metadata.name, namespace)
            status = {"replicas": len(owned), "readyReplicas": sum(map(_pod_ready, owned))}
            self.apps.patch_namespaced_deployment_status(name, namespace, {"status": status})

    def _create_replica(
        self, deployment: client.V1Deployment, template: dict[str, Any], revision: str
    ) -> None:
        namespace, name = deployment.metadata.namespace, deployment.metadata.name
        replica_set = f"{name}-{revision}"
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{deployment.metadata.uid}/{revision}"))
        self._replica_sets[uid] = (namespace, name)
        labels = {**template.get("metadata", {}).get("labels", {}), REVISION_LABEL: revision}
        body = {
            "metadata": {
                "name": f"{replica_set}-{uuid.uuid4().hex[:5]}",
                "namespace": namespace,
                "labels": labels,
                "annotations": template.get("metadata", {}).get("annotations") or {},
                "ownerReferences": [self._owner("apps/v1", "ReplicaSet", replica_set, uid)],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }
        try:
            self.core.create_namespaced_pod(namespace, body)
        except client.ApiException as exc:  # refused at admission, e.g. by a quota
            message = f"Error creating: {json.loads(exc.body)['message']}"
            self._event(
                deployment,
                "apps/v1",
                "Deployment",
                "FailedCreate",
                message,
                "replicaset-controller",
            )

    # --- the scheduler ---------------------------------------------------------------------

    def _schedule(self) -> None:
        nodes = sorted(self.core.list_node().items, key=lambda node: node.metadata.name)
        pods = self._pods()
        bound = [pod for pod in pods if pod.spec.node_name and not _terminal(pod)]
        used = Counter({node.metadata.name: 0 for node in nodes})
        jobs_on: dict[str, set[str]] = {node.metadata.name: set() for node in nodes}
        for pod in bound:
            used[pod.spec.node_name] += _gpus(pod)
            jobs_on[pod.spec.node_name].add(pod.metadata.labels.get("job-name", ""))
        waiting = [
            pod
            for pod in pods
            if not pod.spec.node_name
            and not _terminal(pod)
            and not pod.metadata.deletion_timestamp
            and (pod.metadata.namespace, _pod_group(pod)) not in self._unenqueued
        ]
        for pod in sorted(waiting, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name)):
            job = (pod.metadata.labels or {}).get("job-name")
            spread = bool(pod.spec.affinity and pod.spec.affinity.pod_anti_affinity)
            reasons: Counter[str] = Counter()
            for node in nodes:
                name, free = node.metadata.name, _allocatable(node) - used[node.metadata.name]
                if node.spec.unschedulable:
                    reasons["node(s) were unschedulable"] += 1
                elif not _ready(node):
                    reasons["node(s) had untolerated taint {node.kubernetes.io/unreachable: }"] += 1
                elif spread and job in jobs_on[name]:
                    reasons["node(s) didn't match pod anti-affinity rules"] += 1
                elif free < _gpus(pod):
                    reasons[f"Insufficient {GPU}"] += 1
                else:
                    self._bind(pod, name)
                    used[name] += _gpus(pod)
                    jobs_on[name].add(job or "")
                    break
            else:
                counted = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
                message = f"0/{len(nodes)} nodes are available: {counted}."
                self._unschedulable(pod, message)

    def _bind(self, pod: client.V1Pod, node: str) -> None:
        name, namespace = pod.metadata.name, pod.metadata.namespace
        patch = {"metadata": {"finalizers": [KUBELET_FINALIZER]}, "spec": {"nodeName": node}}
        self.core.patch_namespaced_pod(name, namespace, patch)
        scheduled = self._condition("PodScheduled", "True")
        self.core.patch_namespaced_pod_status(
            name, namespace, {"status": {"conditions": [scheduled]}}
        )

    def _unschedulable(self, pod: client.V1Pod, message: str) -> None:
        condition = self._condition("PodScheduled", "False", "Unschedulable", message)
        self.core.patch_namespaced_pod_status(
            pod.metadata.name, pod.metadata.namespace, {"status": {"conditions": [condition]}}
        )
        self._event(pod, "v1", "Pod", "FailedScheduling", message, "default-scheduler")

    # --- the kubelets ----------------------------------------------------------------------

    def _run_kubelets(self) -> None:
        for pod in self._pods():
            if pod.spec.node_name and pod.spec.node_name not in self.hung_nodes:
                self._kubelet(pod)

    def _kubelet(self, pod: client.V1Pod) -> None:
        name, namespace = pod.metadata.name, pod.metadata.namespace
        if pod.metadata.deletion_timestamp:  # stop it; the API server then lets it go
            self.core.patch_namespaced_pod(name, namespace, {"metadata": {"finalizers": None}})
            self._logs.pop((namespace, name), None)
            self._last_probe.pop((namespace, name), None)
            server = self._servers.pop((namespace, name), None)
            if server is not None:
                server.shutdown()
                server.server_close()
            return
        if _terminal(pod):
            return
        container = pod.spec.containers[0]
        statuses = pod.status.container_statuses or []
        state = statuses[0].state if statuses else None
        if state is None or state.waiting is not None:
            self._start(pod, container, retry=state is not None)
        elif state.running is not None and container.readiness_probe is not None:
            self._probe_readiness(pod, container)
        elif state.running is not None:
            self._run(pod, container, state.running.started_at)

    def _start(self, pod: client.V1Pod, container: client.V1Container, retry: bool) -> None:
        image, now = container.image, timestamp(self.clock.now())
        if image not in self.registry:
            reason = "ImagePullBackOff" if retry else "ErrImagePull"
            message = (
                f'Back-off pulling image "{image}"'
                if retry
                else f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}":'
                f' failed to resolve reference "{image}": {image}: not found'
            )
            state = {"waiting": {"reason": reason, "message": message}}
            self._set_state(pod, container, state, "Pending")
        elif container.command and container.command[0] not in EXECUTABLES:
            message = (
                "failed to create containerd task: failed to create shim task: OCI runtime "
                "create failed: runc create failed: unable to start container process: "
                f'exec: "{container.command[0]}": executable file not found in $PATH: unknown'
            )
            terminated = {"exitCode": 128, "reason": "StartError", "message": message}
            state = {"terminated": {**terminated, "startedAt": EPOCH, "finishedAt": now}}
            self._set_state(pod, container, state, "Failed")
        elif container.readiness_probe is not None:
            ip = self._serve(pod, container)
            self._set_state(pod, container, {"running": {"startedAt": now}}, "Running", False, ip)
        else:
            self._set_state(pod, container, {"running": {"startedAt": now}}, "Running")
            self._logs[(pod.metadata.namespace, pod.metadata.name)] = []

    def _serve(self, pod: client.V1Pod, container: client.V1Container) -> str:
        """Start the pod's `observer probe serve` on its own loopback address: the command
        line as the real CLI reads it, the host the pod's network gives it."""
        args = _parser().parse_args(container.command[1:])
        ip = f"127.{self._ip_block}.{self._next_ip // 256}.{self._next_ip % 256}"
        self._next_ip += 1
        service = serve.Service(ip, args.port, args.latency_ms / 1000, args.warmup_seconds, 0)
        self._servers[(pod.metadata.namespace, pod.metadata.name)] = serve.start(service)
        return ip

    def _probe_readiness(self, pod: client.V1Pod, container: client.V1Container) -> None:
        """GET /healthz every periodSeconds, as the kubelet does; Ready follows the answer."""
        key, now = (pod.metadata.namespace, pod.metadata.name), self.clock.now()
        probe = container.readiness_probe
        last = self._last_probe.get(key)
        if last is not None and now < last + timedelta(seconds=probe.period_seconds or 10):
            return
        self._last_probe[key] = now
        port = _probe_port(container)
        connection = http.client.HTTPConnection(pod.status.pod_ip, port, timeout=2)
        try:
            connection.request("GET", probe.http_get.path or "/")
            ready = connection.getresponse().status == 200
        except OSError:
            ready = False
        finally:
            connection.close()
        if ready != _pod_ready(pod):
            state = pod.status.container_statuses[0].state
            running = {"running": {"startedAt": timestamp(state.running.started_at)}}
            self._set_state(pod, container, running, "Running", ready, pod.status.pod_ip)

    def _run(self, pod: client.V1Pod, container: client.V1Container, started: datetime) -> None:
        env = {variable.name: variable.value for variable in container.env or []}
        behaviour, now = env.get(ENV_BEHAVIOUR), self.clock.now()
        if behaviour == Behaviour.LOG_CANARY:
            self._write_canary(pod, env, started, now)
        runtime = _runtime(env)
        if runtime is None or now < started + timedelta(seconds=runtime):
            return
        if behaviour == Behaviour.OOM:
            exit_code, reason = 137, "OOMKilled"
        else:
            exit_code = int(env[ENV_EXIT_CODE])
            reason = "Completed" if exit_code == 0 else "Error"
        terminated = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": timestamp(started),
            "finishedAt": timestamp(now),
        }
        phase = "Succeeded" if exit_code == 0 else "Failed"
        self._set_state(pod, container, {"terminated": terminated}, phase)

    def _write_canary(
        self, pod: client.V1Pod, env: dict[str, str], started: datetime, now: datetime
    ) -> None:
        lines = self._logs.setdefault((pod.metadata.namespace, pod.metadata.name), [])
        interval = float(env.get(ENV_LOG_INTERVAL_SECONDS, "0"))
        for seq in range(len(lines), int(env.get(ENV_LOG_LINES, "0"))):
            at = started + timedelta(seconds=seq * interval)
            if at > now:
                break
            run_id = env.get(ENV_RUN_ID)
            lines.append(f"observer-canary run={run_id} seq={seq} ts={at.timestamp():.6f}\n")

    def _set_state(
        self,
        pod: client.V1Pod,
        container: client.V1Container,
        state: dict[str, Any],
        phase: str,
        ready: bool | None = None,
        pod_ip: str | None = None,
    ) -> None:
        """`ready`: what its readiness probe says (None: none, ready while running)."""
        running = "running" in state if ready is None else ready
        status: dict[str, Any] = {
            "phase": phase,
            "startTime": timestamp(pod.status.start_time or self.clock.now()),
            "conditions": [
                self._condition("PodScheduled", "True"),
                self._condition("Initialized", "True"),
                self._condition("ContainersReady", str(running)),
                self._condition("Ready", str(running)),
            ],
            "containerStatuses": [
                {
                    "name": container.name,
                    "image": container.image,
                    "imageID": "",
                    "ready": running,
                    "started": "running" in state,
                    "restartCount": 0,
                    "state": state,
                }
            ],
        }
        if pod_ip is not None:
            status.update(podIP=pod_ip, podIPs=[{"ip": pod_ip}])
        self.core.patch_namespaced_pod_status(
            pod.metadata.name, pod.metadata.namespace, {"status": status}
        )

    def _log_response(self, request: kmock.Request) -> bytes:
        """GET .../pods/<name>/log, answered from the emulator's thread."""
        lines = self._logs.get((request.namespace, request.name))
        if lines is None:
            raise kmock.KubernetesError(
                status=400,
                reason="BadRequest",
                message=f'container in pod "{request.name}" is waiting to start',
            )
        return "".join(lines).encode()

    # --- plumbing --------------------------------------------------------------------------

    def _pods(self) -> list[client.V1Pod]:
        return self.core.list_pod_for_all_namespaces().items

    def _event(
        self, obj: Any, api_version: str, kind: str, reason: str, message: str, component: str
    ) -> None:
        """Record an event as the controllers do: once, then counted again on each repeat."""
        namespace, name, now = (
            obj.metadata.namespace,
            obj.metadata.name,
            timestamp(self.clock.now()),
        )
        key = (namespace, kind, name, reason)
        if key not in self._events:
            event_name = f"{name}.{uuid.uuid4().hex[:16]}"
            involved = {"apiVersion": api_version, "kind": kind, "name": name}
            involved.update(namespace=namespace, uid=obj.metadata.uid)
            body = {
                "metadata": {"name": event_name, "namespace": namespace},
                "involvedObject": involved,
                "reason": reason,
                "message": message,
                "type": "Warning",
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": {"component": component},
                "reportingComponent": component,
            }
            self.core.create_namespaced_event(namespace, body)
            self._events[key] = (event_name, 1, message)
            return
        event_name, count, last = self._events[key]
        if message != last:
            patch = {"count": count + 1, "message": message, "lastTimestamp": now}
            self.core.patch_namespaced_event(event_name, namespace, patch)
            self._events[key] = (event_name, count + 1, message)

    def _condition(
        self, kind: str, status: str, reason: str | None = None, message: str | None = None
    ) -> dict[str, Any]:
        condition = {
            "type": kind,
            "status": status,
            "lastTransitionTime": timestamp(self.clock.now()),
        }
        if reason is not None:
            condition["reason"] = reason
        if message is not None:
            condition["message"] = message
        return condition

    @staticmethod
    def _owner(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
        return {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def _probe_port(container: client.V1Container) -> int:
    """The port the readiness probe names, by the container port's name or as a number."""
    port = container.readiness_probe.http_get.port
    named = {p.name: p.container_port for p in container.ports or [] if p.name}
    return int(named.get(port, port))


def _pod_ready(pod: client.V1Pod) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _runtime(env: dict[str, str]) -> float | None:
    """How long the probe's script runs, read from what it was asked to do; None: forever."""
    match env.get(ENV_BEHAVIOUR):
        case Behaviour.OOM:
            return 0.0  # killed as soon as it has filled its memory limit
        case Behaviour.LOG_CANARY:
            lines, interval = int(env[ENV_LOG_LINES]), float(env[ENV_LOG_INTERVAL_SECONDS])
            return lines * interval
        case None:
            return None
        case _:
            return float(env[ENV_DURATION_SECONDS])


def _final_condition(job: client.V1Job) -> client.V1JobCondition | None:
    conditions = job.status.conditions if job.status else None
    final = ("Complete", "Failed")
    return next((c for c in conditions or [] if c.type in final and c.status == "True"), None)


def _finished_at(job: client.V1Job) -> datetime | None:
    condition = _final_condition(job)
    if condition is None:
        return None
    return job.status.completion_time or condition.last_transition_time


def _job_gpus(job: client.V1Job) -> int:
    containers = job.spec.template.spec.containers
    gpus = sum(int((c.resources.limits or {}).get(GPU, 0)) for c in containers if c.resources)
    return gpus * (job.spec.parallelism or 1)


def _admitted(workload: dict[str, Any]) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions)


def _pod_group(pod: client.V1Pod) -> str | None:
    return (pod.metadata.annotations or {}).get(POD_GROUP_ANNOTATION)


def _owner_uid(pod: client.V1Pod) -> str | None:
    refs = pod.metadata.owner_references or []
    return refs[0].uid if refs else None


def _terminal(pod: client.V1Pod) -> bool:
    return pod.status is not None and pod.status.phase in ("Succeeded", "Failed")


def _gpus(pod: client.V1Pod) -> int:
    return sum(int((c.resources.limits or {}).get(GPU, 0)) for c in pod.spec.containers)


def _allocatable(node: client.V1Node) -> int:
    return int((node.status.allocatable or {}).get(GPU, 0))


def _ready(node: client.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
