"""The real SchedulerBackend over the Kubernetes API with the official client: the only module
that imports kubernetes.

A probe is a batch/v1 Job in its tenant's namespace (namespace = tenant), labelled with its run
id; its job id is "<namespace>/<job name>". Its status is read from the Job and its pods the way
kubectl shows them: Job conditions, container states, the scheduler's PodScheduled condition and
Warning events. Other tenants' work appears in the snapshot as pod groups with ids
"<namespace>/<owner kind>/<owner name>" ("<namespace>/pod/<pod name>" for a bare pod).

Kubernetes errors stop here: an API server that cannot be reached or read raises BackendError;
a submission it refuses (quota, admission, validation, RBAC) raises ProbeError with its words.

The isolation probe reads another namespace with a tenant's own bearer token (a separate client
per call, carrying nothing of the observer's identity). The API server authorizes a request
before it looks anything up, so only 401 and 403 are denials: 2xx, and equally 404 or 400 (the
object is absent, the container not started), mean RBAC let the request through, a breach.
429, 5xx and transport failures decide nothing and raise BackendError.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from types import TracebackType
from typing import TypeVar

import pydantic
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException, OpenApiException
from kubernetes.config.config_exception import ConfigException

from observer.backends.base import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PROBE_LABEL,
    RUN_ID_LABEL,
    FinishedJobs,
    queue_states,
)
from observer.clock import Clock
from observer.domain import (
    CANARY_MARK,
    AccessAttempt,
    Behaviour,
    JobPhase,
    JobRequest,
    JobStatus,
    SchedulerNode,
    SchedulerSnapshot,
    canary_padding,
)
from observer.errors import BackendError, ConfigError, ProbeError
from observer.settings import KubernetesSettings

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's LocalQueue of a Job
JOB_NAME_LABEL = "job-name"  # the job controller puts it on its pods (every release so far)
CONTAINER_NAME = "probe"
BAD_COMMAND = "observer-no-such-command"

# The probe's parameters travel as environment variables: the scripts read them, and a person
# reading `kubectl describe pod` sees what the probe was asked to do.
ENV_RUN_ID = "OBSERVER_RUN_ID"
ENV_BEHAVIOUR = "OBSERVER_BEHAVIOUR"
ENV_DURATION_SECONDS = "OBSERVER_DURATION_SECONDS"
ENV_EXIT_CODE = "OBSERVER_EXIT_CODE"
ENV_LOG_LINES = "OBSERVER_LOG_LINES"
ENV_LOG_INTERVAL_SECONDS = "OBSERVER_LOG_INTERVAL_SECONDS"
ENV_LOG_PADDING = "OBSERVER_LOG_PADDING"  # domain.canary_padding: empty, or " pad=<k>:xx..."

SLEEP_SCRIPT = f'sleep "${ENV_DURATION_SECONDS}"; exit "${ENV_EXIT_CODE}"'
# A CPU busy loop: the default image has no GPU burner; set gpu_busy_command for a real one.
BUSY_SCRIPT = (
    f'timeout "${ENV_DURATION_SECONDS}" sh -c "while :; do :; done"; exit "${ENV_EXIT_CODE}"'
)
CANARY_SCRIPT = (  # seq counts from 0, as on every backend
    "i=0; "
    f'while [ "$i" -lt "${ENV_LOG_LINES}" ]; do '
    f'echo "{CANARY_MARK} run=${ENV_RUN_ID} seq=$i ts=$(date +%s.%N)${ENV_LOG_PADDING}"; '
    "i=$((i + 1)); "
    f'[ "${ENV_LOG_INTERVAL_SECONDS}" = 0 ] || sleep "${ENV_LOG_INTERVAL_SECONDS}"; '
    "done; "
    f'exit "${ENV_EXIT_CODE}"'
)
OOM_SCRIPT = "tail /dev/zero"  # buffers one endless line until the memory limit is hit

_SUCCEEDED_CONDITIONS = frozenset({"Complete", "SuccessCriteriaMet"})
_FAILED_CONDITIONS = frozenset({"Failed", "FailureTarget"})  # FailureTarget: 1.31+, before Failed
_FINAL_CONDITIONS = _SUCCEEDED_CONDITIONS | _FAILED_CONDITIONS
_TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
# Waiting reasons that are a normal step of starting, not a reason for waiting.
_STARTING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})
_CANCELLED_REMEMBERED = 1024  # a cancelled Job vanishes from the API; its outcome is kept here
_NAME_LIMIT = 63  # a Job's name is also the value of its pods' job-name label
_HASH_CHARS = 10
_NEVER = datetime.min.replace(tzinfo=UTC)
# The object name tried when a listing did not give a real one: a 404 still proves the read
# was authorized, a 403 that it was not.
ISOLATION_PROBE_NAME = "observer-isolation-probe"
_DENIED = frozenset({401, 403})
_LOG_BYTES = 1024  # enough to prove a log can be read; its content is never kept

T = TypeVar("T")

EventReader = Callable[[], list[client.CoreV1Event]]
PodsByJob = dict[str, list[tuple[str, client.V1Pod]]]  # Job name -> (owner uid, pod)


class _ApiStatusError(BackendError):
    """The API server answered with an error status; `message` is its own words."""

    def __init__(self, action: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{action}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


@contextmanager
def _api(action: str) -> Iterator[None]:
    """Turn every failure of the client inside into BackendError (_ApiStatusError for a status)."""
    try:
        yield
    except ApiException as exc:
        raise _ApiStatusError(
            action, exc.status or 0, exc.reason or "", _status_message(exc)
        ) from None
    except (OpenApiException, urllib3.exceptions.HTTPError, pydantic.ValidationError) as exc:
        raise BackendError(f"{action}: {exc}") from None


def _status_message(exc: ApiException) -> str:
    """The message of the API's Status object, or the raw body when it has none."""
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body or ""
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    message = status.get("message") if isinstance(status, dict) else None
    return str(message) if message else body.strip() or exc.reason or ""


class KubernetesBackend:
    def __init__(self, settings: KubernetesSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._timeout = settings.request_timeout_seconds
        self._gpu = settings.gpu_resource
        self._client = client.ApiClient(_configuration(settings))
        self._core = client.CoreV1Api(self._client)
        self._batch = client.BatchV1Api(self._client)
        self._cancelled: OrderedDict[str, JobStatus] = OrderedDict()

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

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
            with _api(f"create job {job_id}"):
                self._batch.create_namespaced_job(
                    namespace, self._manifest(request, name), _request_timeout=self._timeout
                )
        except _ApiStatusError as exc:
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
        for namespace, names in names_by_namespace.items():
            jobs = [job for name in names if (job := self._read_job(namespace, name))]
            if jobs:
                selector = f"{JOB_NAME_LABEL} in ({','.join(sorted(names))})"
                pods = _pods_by_job(self._list_pods(namespace, selector))
                events = self._warning_events(namespace)
                for job in jobs:
                    status = _job_status(job, pods, events, self._gpu)
                    found[status.job_id] = status
        return found

    def cancel(self, job_id: str) -> None:
        status = self.jobs([job_id]).get(job_id)
        if status is None or status.phase.finished:
            return
        namespace, name = _split_job_id(job_id)
        try:
            with _api(f"delete job {job_id}"):
                self._batch.delete_namespaced_job(
                    name,
                    namespace,
                    propagation_policy="Background",
                    _request_timeout=self._timeout,
                )
        except _ApiStatusError as exc:
            if exc.status != 404:
                raise
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
        pods = _owned_pods(
            job, _pods_by_job(self._list_pods(namespace, f"{JOB_NAME_LABEL}={name}"))
        )
        if not pods:
            raise BackendError(f"logs of {job_id}: the job has no pods")
        parts = []
        for pod in sorted(pods, key=_creation_then_name):
            pod_name = _name(pod.metadata)
            containers = pod.spec.containers if pod.spec else []
            with _api(f"read log of pod {namespace}/{pod_name}"):
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
        managed = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        statuses: list[JobStatus] = []
        for namespace in self._settings.namespaces:
            with _api(f"list jobs in {namespace}"):
                listed = self._batch.list_namespaced_job(
                    namespace, label_selector=managed, _request_timeout=self._timeout
                ).items
            jobs = [job for job in listed if _is_ours(job.metadata) and not _final_condition(job)]
            if jobs:
                pods = _pods_by_job(self._list_pods(namespace, managed))
                events = self._warning_events(namespace)
                statuses.extend(_job_status(job, pods, events, self._gpu) for job in jobs)
        return [status for status in statuses if not status.phase.finished]

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        # The Jobs of the tenants' namespaces that reached Complete or Failed; one being
        # deleted (its TTL ran out, or someone deleted it) is on its way out and not read.
        ended: list[JobStatus] = []
        for namespace in self._settings.namespaces:
            with _api(f"list jobs in {namespace}"):
                listed = self._batch.list_namespaced_job(
                    namespace, _request_timeout=self._timeout
                ).items
            final = [j for j in listed if _final_condition(j) and not _deleting(j.metadata)]
            if final:
                pods = _pods_by_job(self._list_pods(namespace, ""))
                events = self._warning_events(namespace)
                ended += [_job_status(job, pods, events, self._gpu) for job in final]
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
        with _api("list nodes"):
            nodes = self._core.list_node(_request_timeout=self._timeout).items
        # Every pod, not only the tenants': a node's GPUs are held by whoever runs there.
        with _api("list pods in all namespaces"):
            pods = self._core.list_pod_for_all_namespaces(_request_timeout=self._timeout).items
        by_namespace: dict[str, list[client.V1Pod]] = {}
        # As the scheduler counts: a pod holds its GPUs until it is gone, Terminating or not.
        allocated: Counter[str] = Counter()
        for pod in pods:
            by_namespace.setdefault(_namespace(pod), []).append(pod)
            if pod.spec and pod.spec.node_name and _phase(pod) not in _TERMINAL_POD_PHASES:
                allocated[pod.spec.node_name] += _pod_spec_gpus(pod.spec, self._gpu)
        jobs: list[JobStatus] = []
        for namespace in self._settings.namespaces:
            jobs += self._unfinished_work(namespace, by_namespace.get(namespace, []))
        return SchedulerSnapshot(
            at=now,
            queues=queue_states(jobs, now, self._settings.namespaces),
            nodes=tuple(
                _node(node, allocated[_name(node.metadata)], self._gpu, self._settings.pool_label)
                for node in sorted(nodes, key=lambda node: _name(node.metadata))
                if _has_gpus(node, self._gpu)
            ),
            jobs=tuple(jobs),
        )

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        tenant = client.ApiClient(_tenant_configuration(self._settings, self._token(as_tenant)))
        try:
            return self._try_reads(
                client.CoreV1Api(tenant), client.BatchV1Api(tenant), as_tenant, other_tenant
            )
        finally:
            tenant.close()  # type: ignore[no-untyped-call]

    # --- isolation ---------------------------------------------------------------------------

    def _token(self, tenant: str) -> str:
        path = self._settings.tenant_token_files.get(tenant)
        if path is None:
            raise ProbeError(
                f"no token of tenant {tenant} in controller.kubernetes.tenant_token_files: "
                "its isolation cannot be tried"
            )
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise ProbeError(f"cannot read tenant {tenant}'s token at {path}: {exc}") from None
        if not token:
            raise ProbeError(f"tenant {tenant}'s token file {path} is empty")
        return token

    def _try_reads(
        self, core: client.CoreV1Api, batch: client.BatchV1Api, own: str, other: str
    ) -> list[AccessAttempt]:
        timeout = self._timeout
        try:  # the control: a token that cannot read its own namespace makes denials meaningless
            with _api(f"list pods in {own} as {own}"):
                core.list_namespaced_pod(own, limit=1, _request_timeout=timeout)
        except _ApiStatusError as exc:
            if exc.status == 401:
                raise ProbeError(f"the API server does not accept {own}'s token: {exc}") from None
            if exc.status == 403:
                raise ProbeError(
                    f"{own}'s token cannot list pods in its own namespace, so its denials "
                    f"elsewhere would prove nothing: {exc.message}"
                ) from None
            raise
        attempts: list[AccessAttempt] = []
        _attempt(
            attempts,
            "list jobs",
            other,
            lambda: batch.list_namespaced_job(other, _request_timeout=timeout).items,
            lambda items: f"listed {len(items)} Jobs",
        )
        pods = _attempt(
            attempts,
            "list pods",
            other,
            lambda: core.list_namespaced_pod(other, _request_timeout=timeout).items,
            lambda items: f"listed {len(items)} pods",
        )
        pod = max(pods or [], key=_creation_then_name, default=None)
        pod_name = _name(pod.metadata) if pod is not None else ISOLATION_PROBE_NAME
        containers = pod.spec.containers if pod is not None and pod.spec else []
        _attempt(
            attempts,
            "read pod log",
            f"{other}/{pod_name}",
            lambda: self._read_log(
                core, other, pod_name, containers[0].name if containers else None
            ),
            lambda text: f"read its log ({len(text.encode())} bytes, not kept)",
        )
        secrets = _attempt(
            attempts,
            "list secrets",
            other,
            lambda: core.list_namespaced_secret(other, _request_timeout=timeout).items,
            lambda items: f"listed {len(items)} Secrets",
        )
        names = sorted(_name(secret.metadata) for secret in secrets or [])
        secret_name = names[0] if names else ISOLATION_PROBE_NAME
        _attempt(
            attempts,
            "read secret",
            f"{other}/{secret_name}",
            lambda: core.read_namespaced_secret(secret_name, other, _request_timeout=timeout),
            lambda secret: f"read it ({len(secret.data or {})} keys, values not kept)",
        )
        return attempts

    def _read_log(
        self, core: client.CoreV1Api, namespace: str, pod: str, container: str | None
    ) -> str:
        text = core.read_namespaced_pod_log(
            pod,
            namespace,
            container=container,
            limit_bytes=_LOG_BYTES,
            _request_timeout=self._timeout,
        )
        return str(text)

    # --- reading ---------------------------------------------------------------------------

    def _read_job(self, namespace: str, name: str) -> client.V1Job | None:
        try:
            with _api(f"read job {namespace}/{name}"):
                return self._batch.read_namespaced_job(
                    name, namespace, _request_timeout=self._timeout
                )
        except _ApiStatusError as exc:
            if exc.status == 404:
                return None
            raise

    def _list_pods(self, namespace: str, selector: str) -> list[client.V1Pod]:
        with _api(f"list pods in {namespace}"):
            return self._core.list_namespaced_pod(
                namespace, label_selector=selector, _request_timeout=self._timeout
            ).items

    def _warning_events(self, namespace: str) -> EventReader:
        """Read a namespace's Warning events once, and only if a pending job needs them."""
        read: list[list[client.CoreV1Event]] = []

        def events() -> list[client.CoreV1Event]:
            if not read:
                with _api(f"list events in {namespace}"):
                    read.append(
                        self._core.list_namespaced_event(
                            namespace, field_selector="type=Warning", _request_timeout=self._timeout
                        ).items
                    )
            return read[0]

        return events

    def _submitted_before(self, namespace: str, name: str, run_id: str) -> bool:
        job = self._read_job(namespace, name)
        return job is not None and _labels(job.metadata).get(RUN_ID_LABEL) == run_id

    def _unfinished_work(self, namespace: str, pods: list[client.V1Pod]) -> list[JobStatus]:
        """Every unfinished Job that asks for GPUs, and every other group of live pods using
        GPUs, grouped by their controller (a ReplicaSet, an MPIJob's launcher, ...); pods being
        deleted that still hold GPUs, outside a live Job, as ending work."""
        with _api(f"list jobs in {namespace}"):
            listed = self._batch.list_namespaced_job(
                namespace, _request_timeout=self._timeout
            ).items
        events, by_job = self._warning_events(namespace), _pods_by_job(pods)
        statuses = [
            _job_status(job, by_job, events, self._gpu)
            for job in listed
            if not _final_condition(job) and _pod_spec_gpus(_template(job), self._gpu) > 0
        ]
        groups: dict[str, list[client.V1Pod]] = {}
        ending: dict[str, list[client.V1Pod]] = {}
        for pod in pods:
            if _phase(pod) in _TERMINAL_POD_PHASES or _pod_spec_gpus(pod.spec, self._gpu) == 0:
                continue
            owner = _controller(pod.metadata)
            if _deleting(pod.metadata):
                if pod.spec and pod.spec.node_name:  # still holding its node's GPUs
                    ending.setdefault(_group_id(namespace, pod, owner), []).append(pod)
            elif owner is None or owner.kind != "Job":  # a live Job's pods are the Job's
                groups.setdefault(_group_id(namespace, pod, owner), []).append(pod)
        statuses += [
            _pod_group_status(group_id, namespace, members, events, self._gpu)
            for group_id, members in sorted(groups.items())
        ]
        unfinished = [status for status in statuses if not status.phase.finished]
        live = {status.job_id for status in unfinished}
        return unfinished + [
            _ending_status(group_id, namespace, members, self._gpu)
            for group_id, members in sorted(ending.items())
            if group_id not in live
        ]

    # --- writing ---------------------------------------------------------------------------

    def _manifest(self, request: JobRequest, name: str) -> client.V1Job:
        settings, workload = self._settings, request.workload
        labels = {
            RUN_ID_LABEL: request.run_id,
            PROBE_LABEL: request.probe,
            MANAGED_BY_LABEL: MANAGED_BY,
        }
        if request.queue is not None:
            labels[QUEUE_LABEL] = request.queue
        image, command = settings.image, ["/bin/sh", "-c", SLEEP_SCRIPT]
        limits = {settings.gpu_resource: str(workload.gpus_per_node)}
        match workload.behaviour:
            case Behaviour.GPU_BUSY:
                image = settings.gpu_busy_image or settings.image
                command = list(settings.gpu_busy_command or ("/bin/sh", "-c", BUSY_SCRIPT))
            case Behaviour.LOG_CANARY:
                command = ["/bin/sh", "-c", CANARY_SCRIPT]
            case Behaviour.BAD_COMMAND:
                command = [BAD_COMMAND]
            case Behaviour.BAD_IMAGE:
                image = settings.bad_image
            case Behaviour.OOM:
                command = ["/bin/sh", "-c", OOM_SCRIPT]
                limits["memory"] = settings.oom_memory_limit
        env = probe_env(request)
        pod_spec = client.V1PodSpec(
            restart_policy="Never",
            priority_class_name=request.priority,
            affinity=_one_pod_per_node(request.run_id) if workload.nodes > 1 else None,
            containers=[
                client.V1Container(
                    name=CONTAINER_NAME,
                    image=image,
                    command=command,
                    env=[client.V1EnvVar(name=key, value=value) for key, value in env.items()],
                    resources=client.V1ResourceRequirements(limits=limits),
                )
            ],
        )
        return client.V1Job(
            api_version="batch/v1",
            kind="Job",
            metadata=client.V1ObjectMeta(name=name, namespace=request.tenant, labels=labels),
            spec=client.V1JobSpec(
                backoff_limit=0,  # a probe's failure is its result: never retried
                parallelism=workload.nodes,
                completions=workload.nodes,
                ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels), spec=pod_spec
                ),
            ),
        )


def probe_env(request: JobRequest) -> dict[str, str]:
    """The environment a probe's container runs its script with."""
    workload = request.workload
    return {
        ENV_RUN_ID: request.run_id,
        ENV_BEHAVIOUR: workload.behaviour.value,
        ENV_DURATION_SECONDS: f"{workload.duration_seconds:g}",
        ENV_EXIT_CODE: str(workload.exit_code),
        ENV_LOG_LINES: str(workload.log_lines),
        ENV_LOG_INTERVAL_SECONDS: f"{workload.log_interval_seconds:g}",
        ENV_LOG_PADDING: canary_padding(request.run_id, workload),
    }


def job_name(probe: str, run_id: str) -> str:
    """`observer-<probe>-<run id hash>`: a valid DNS label, the same for the same run id (a
    retried submission finds its earlier Job); the run id itself is in the labels."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:_HASH_CHARS]
    room = _NAME_LIMIT - len("observer--") - _HASH_CHARS
    slug = re.sub(r"[^a-z0-9-]+", "-", probe.lower()).strip("-")[:room].strip("-")
    return f"observer-{slug}-{digest}" if slug else f"observer-{digest}"


def _one_pod_per_node(run_id: str) -> client.V1Affinity:
    return client.V1Affinity(
        pod_anti_affinity=client.V1PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=[
                client.V1PodAffinityTerm(
                    label_selector=client.V1LabelSelector(match_labels={RUN_ID_LABEL: run_id}),
                    topology_key="kubernetes.io/hostname",
                )
            ]
        )
    )


def _configuration(settings: KubernetesSettings) -> client.Configuration:
    configuration = client.Configuration()
    try:
        if settings.host is not None:
            configuration.host = settings.host
        elif settings.kubeconfig_path is not None:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(settings.kubeconfig_path),
                context=settings.kubeconfig_context,
                client_configuration=configuration,
            )
        else:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    except (ConfigException, OSError) as exc:
        raise ConfigError([f"kubernetes: {exc}"]) from None
    return configuration


def _tenant_configuration(settings: KubernetesSettings, token: str) -> client.Configuration:
    """The observer's server and TLS trust, with none of its identity: only the tenant's
    bearer token (no client certificate, basic auth or token refresh of the observer's)."""
    configuration = _configuration(settings)
    configuration.api_key = {"BearerToken": f"Bearer {token}"}
    configuration.api_key_prefix = {}
    configuration.refresh_api_key_hook = None
    configuration.cert_file = None
    configuration.key_file = None
    configuration.username = None
    configuration.password = None
    return configuration


def _attempt(
    attempts: list[AccessAttempt],
    action: str,
    target: str,
    read: Callable[[], T],
    describe: Callable[[T], str],
) -> T | None:
    """Try one read; append what came of it; return what was read (None unless allowed)."""
    try:
        with _api(f"{action} {target}"):
            result = read()
    except _ApiStatusError as exc:
        if exc.status in _DENIED:
            attempts.append(AccessAttempt(action, target, False, exc.message))
            return None
        if exc.status == 429 or exc.status >= 500 or exc.status < 400:
            raise  # neither a yes nor a no: no verdict
        # Authorized, then answered: the object is absent (404), the container waits (400)...
        attempts.append(
            AccessAttempt(
                action, target, True, f"authorized, then {exc.status} {exc.reason}: {exc.message}"
            )
        )
        return None
    attempts.append(AccessAttempt(action, target, True, describe(result)))
    return result


def _split_job_id(job_id: str) -> tuple[str, str]:
    namespace, _, name = job_id.partition("/")
    if not namespace or not name or "/" in name:
        raise ProbeError(f"not a Kubernetes job id (<namespace>/<job name>): {job_id!r}")
    return namespace, name


# --- statuses --------------------------------------------------------------------------------


def _job_status(
    job: client.V1Job, pods_by_job: PodsByJob, events: EventReader, gpu: str
) -> JobStatus:
    meta, spec = job.metadata, job.spec
    namespace, name, labels = _namespace(job), _name(meta), _labels(meta)
    pods = _owned_pods(job, pods_by_job)
    parallelism = spec.parallelism if spec and spec.parallelism is not None else 1
    completions = spec.completions if spec and spec.completions is not None else parallelism
    expected = max(1, min(parallelism, completions))
    started = [moment for moment in map(_started_at, pods) if moment is not None]
    status = JobStatus(
        job_id=f"{namespace}/{name}",
        run_id=labels.get(RUN_ID_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL),
        phase=JobPhase.PENDING,
        gpus=_pod_spec_gpus(_template(job), gpu) * expected,
        submitted_at=_utc(meta.creation_timestamp if meta else None),
        # A job of several pods starts when its last pod does: that ends its wait.
        started_at=max(started) if len(started) >= expected else None,
        nodes=_nodes(pods),
        owner_ids=_uids(pods),
    )
    if _deleting(meta):
        return replace(
            status,
            phase=JobPhase.CANCELLED,
            finished_at=_utc(meta.deletion_timestamp if meta else None),
            reason="Deleted",
            message="the Job is being deleted",
        )
    condition = _final_condition(job)
    if condition is None:
        if status.started_at is not None:
            return replace(status, phase=JobPhase.RUNNING)
        reason, message = _pending_reason(pods, events, job)
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


def _pod_group_status(
    group_id: str, namespace: str, pods: list[client.V1Pod], events: EventReader, gpu: str
) -> JobStatus:
    labels = _labels(pods[0].metadata)
    started = [moment for moment in map(_started_at, pods) if moment is not None]
    created = [_utc(pod.metadata.creation_timestamp) for pod in pods if pod.metadata]
    status = JobStatus(
        job_id=group_id,
        run_id=labels.get(RUN_ID_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL),
        phase=JobPhase.PENDING,
        gpus=sum(_pod_spec_gpus(pod.spec, gpu) for pod in pods),
        submitted_at=min((moment for moment in created if moment), default=None),
        started_at=max(started) if len(started) == len(pods) else None,
        nodes=_nodes(pods),
        owner_ids=_uids(pods),
    )
    if status.started_at is not None:
        return replace(status, phase=JobPhase.RUNNING)
    reason, message = _pending_reason(pods, events, None)
    return replace(status, reason=reason, message=message)


def _ending_status(group_id: str, namespace: str, pods: list[client.V1Pod], gpu: str) -> JobStatus:
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
        run_id=_labels(pods[0].metadata).get(RUN_ID_LABEL),
        tenant=namespace,
        queue=_labels(pods[0].metadata).get(QUEUE_LABEL),
        phase=JobPhase.CANCELLED,
        gpus=sum(_pod_spec_gpus(pod.spec, gpu) for pod in pods),
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
    pods: list[client.V1Pod], events: EventReader, job: client.V1Job | None
) -> tuple[str | None, str | None]:
    """Why a job waits, the most specific first: a container that cannot start (a bad image
    waits forever), the scheduler's verdict, then the job controller's (quota, suspension)."""
    waiting = [pod for pod in pods if _started_at(pod) is None and _terminated(pod) is None]
    for pod in waiting:
        for container in (pod.status.container_statuses if pod.status else None) or []:
            state = container.state.waiting if container.state else None
            if state is not None and state.reason and state.reason not in _STARTING_REASONS:
                return state.reason, state.message
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


def _latest_event(
    events: list[client.CoreV1Event], kind: str, meta: client.V1ObjectMeta | None, reason: str
) -> client.CoreV1Event | None:
    name, uid = _name(meta), meta.uid if meta else None
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


def _node(node: client.V1Node, allocated: int, gpu: str, pool_label: str) -> SchedulerNode:
    name, status, spec = _name(node.metadata), node.status, node.spec
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
        pool=_labels(node.metadata).get(pool_label),
        gpus_total=_quantity((status.allocatable or {}).get(gpu) if status else None),
        gpus_allocated=allocated,
        state=state,
        reason="; ".join(reason for reason in reasons if reason) or None,
    )


def _has_gpus(node: client.V1Node, gpu: str) -> bool:
    # A node whose device plugin died keeps its capacity but allocates no GPU: it stays listed.
    status = node.status
    return status is not None and any(
        _quantity((resources or {}).get(gpu)) > 0
        for resources in (status.capacity, status.allocatable)
    )


# --- small readers ---------------------------------------------------------------------------


def _name(meta: client.V1ObjectMeta | None) -> str:
    if meta is None or not meta.name:
        raise BackendError("the API returned an object without a name")
    return meta.name


def _namespace(obj: client.V1Job | client.V1Pod) -> str:
    return (obj.metadata.namespace if obj.metadata else None) or ""


def _labels(meta: client.V1ObjectMeta | None) -> dict[str, str]:
    return (meta.labels if meta else None) or {}


def _is_ours(meta: client.V1ObjectMeta | None) -> bool:
    return _labels(meta).get(MANAGED_BY_LABEL) == MANAGED_BY


def _group_id(namespace: str, pod: client.V1Pod, owner: client.V1OwnerReference | None) -> str:
    """A Job's pods under the Job's own id, others under their controller or themselves."""
    if owner is not None and owner.kind == "Job":
        return f"{namespace}/{owner.name}"
    key = f"{owner.kind.lower()}/{owner.name}" if owner else f"pod/{_name(pod.metadata)}"
    return f"{namespace}/{key}"


def _deleting(meta: client.V1ObjectMeta | None) -> bool:
    return meta is not None and meta.deletion_timestamp is not None


def _controller(meta: client.V1ObjectMeta | None) -> client.V1OwnerReference | None:
    references = (meta.owner_references if meta else None) or []
    return next((ref for ref in references if ref.controller), None)


def _pods_by_job(pods: list[client.V1Pod]) -> PodsByJob:
    """Pods by the name of the Job that controls them (label selectors are only a hint)."""
    by_job: PodsByJob = {}
    for pod in pods:
        owner = _controller(pod.metadata)
        if owner is not None and owner.kind == "Job":
            by_job.setdefault(owner.name, []).append((owner.uid, pod))
    return by_job


def _owned_pods(job: client.V1Job, pods_by_job: PodsByJob) -> list[client.V1Pod]:
    # The owner's uid tells this Job's pods from those of an earlier namesake.
    uid = job.metadata.uid if job.metadata else None
    return [pod for owner, pod in pods_by_job.get(_name(job.metadata), []) if uid in (None, owner)]


def _creation_then_name(pod: client.V1Pod) -> tuple[datetime, str]:
    created = _utc(pod.metadata.creation_timestamp if pod.metadata else None)
    return created or _NEVER, _name(pod.metadata)


def _final_condition(job: client.V1Job) -> client.V1JobCondition | None:
    conditions = (job.status.conditions if job.status else None) or []
    return next((c for c in conditions if c.status == "True" and c.type in _FINAL_CONDITIONS), None)


def _template(job: client.V1Job) -> client.V1PodSpec | None:
    return job.spec.template.spec if job.spec else None


def _phase(pod: client.V1Pod) -> str | None:
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


def _pod_spec_gpus(spec: client.V1PodSpec | None, gpu: str) -> int:
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
