"""The real SchedulerBackend over the Kubernetes API with the official client: the only module
that imports kubernetes.

A probe is a batch/v1 Job in its tenant's namespace (namespace = tenant), labelled with its run
id, and its job id is "<namespace>/<job name>". Its status is read from the Job and its pods the
way kubectl shows them: conditions, container states, the scheduler's PodScheduled condition
and Warning events. Jobs and pods of other tenants appear in the snapshot as "pod groups" with
ids "<namespace>/<owner kind>/<owner name>" (or ".../pod/<pod name>" for a bare pod).

Kubernetes errors stop here: an API server that cannot be reached or read raises BackendError;
a submission it refuses (quota, admission, validation, RBAC) raises ProbeError with its words.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import pydantic
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException, OpenApiException
from kubernetes.config.config_exception import ConfigException
from pydantic import BaseModel, ConfigDict, Field

from observer.backends.base import MANAGED_BY, MANAGED_BY_LABEL, PROBE_LABEL, RUN_ID_LABEL
from observer.clock import Clock
from observer.domain import (
    Behaviour,
    JobPhase,
    JobRequest,
    JobStatus,
    QueueState,
    SchedulerNode,
    SchedulerSnapshot,
)
from observer.errors import BackendError, ConfigError, ProbeError

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's LocalQueue of a Job
JOB_NAME_LABEL = "job-name"  # set by the job controller on its pods (every release so far)
CONTAINER_NAME = "probe"
BAD_COMMAND = "observer-no-such-command"

# The probe's parameters travel as environment variables: the scripts below read them, and a
# person reading `kubectl describe pod` sees what the probe was asked to do.
ENV_RUN_ID = "OBSERVER_RUN_ID"
ENV_BEHAVIOUR = "OBSERVER_BEHAVIOUR"
ENV_DURATION_SECONDS = "OBSERVER_DURATION_SECONDS"
ENV_EXIT_CODE = "OBSERVER_EXIT_CODE"
ENV_LOG_LINES = "OBSERVER_LOG_LINES"
ENV_LOG_INTERVAL_SECONDS = "OBSERVER_LOG_INTERVAL_SECONDS"

SLEEP_SCRIPT = f'sleep "${ENV_DURATION_SECONDS}"; exit "${ENV_EXIT_CODE}"'
# A CPU busy loop: the default image has no GPU burner; set gpu_busy_command for a real one.
BUSY_SCRIPT = (
    f'timeout "${ENV_DURATION_SECONDS}" sh -c "while :; do :; done"; exit "${ENV_EXIT_CODE}"'
)
CANARY_SCRIPT = (
    "i=1; "
    f'while [ "$i" -le "${ENV_LOG_LINES}" ]; do '
    f'echo "observer-canary run=${ENV_RUN_ID} seq=$i ts=$(date +%s.%N)"; '
    "i=$((i + 1)); "
    f'sleep "${ENV_LOG_INTERVAL_SECONDS}"; '
    "done; "
    f'exit "${ENV_EXIT_CODE}"'
)
OOM_SCRIPT = "tail /dev/zero"  # buffers one endless line until the memory limit is hit

_SUCCEEDED_CONDITIONS = frozenset({"Complete", "SuccessCriteriaMet"})
_FAILED_CONDITIONS = frozenset({"Failed", "FailureTarget"})  # FailureTarget: 1.31+, ahead of Failed
_TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
# Waiting reasons that are a normal step of starting, not a reason for waiting.
_STARTING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})
_CANCELLED_REMEMBERED = 1024  # cancelled jobs vanish from the API; their status is kept this long
_NAME_LIMIT = 63  # a Job's name is also its pods' job-name label value
_HASH_CHARS = 10


class KubernetesSettings(BaseModel):
    """The Kubernetes scheduler backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str | None = Field(
        None, description="API server URL used as is, without credentials (tests, kubectl proxy)."
    )
    kubeconfig_path: Path | None = Field(
        None, description="Kubeconfig to use when `host` is unset; in-cluster config otherwise."
    )
    kubeconfig_context: str | None = Field(None, description="Context in the kubeconfig.")
    namespaces: tuple[str, ...] = Field(
        (), description="Tenant namespaces whose jobs and queues are observed and probed."
    )
    image: str = Field("nvidia/cuda:12.4.1-base-ubuntu22.04", description="Probe image.")
    bad_image: str = Field(
        "registry.invalid/gpu-soak-observer/no-such-image:0",
        description="Image of the bad_image probe; `.invalid` never resolves.",
    )
    gpu_busy_image: str | None = Field(
        None, description="Image of gpu_busy probes; `image` if unset."
    )
    gpu_busy_command: tuple[str, ...] | None = Field(
        None,
        description="Command of gpu_busy probes (e.g. a GPU burner reading "
        "$OBSERVER_DURATION_SECONDS); a CPU busy loop if unset.",
    )
    oom_memory_limit: str = Field("64Mi", description="Memory limit the oom probe runs past.")
    ttl_seconds_after_finished: int = Field(
        3600,
        ge=0,
        description="Finished probe Jobs are deleted after this; long enough to read the outcome.",
    )
    request_timeout_seconds: float = Field(10.0, gt=0, description="Timeout of every API call.")
    gpu_resource: str = Field("nvidia.com/gpu", description="Extended resource name of a GPU.")
    pool_label: str = Field(
        "nvidia.com/gpu.product", description="Node label naming a node's pool."
    )


class _ApiStatusError(BackendError):
    """The API server answered with an error status; `message` is its own words."""

    def __init__(self, action: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{action}: {status} {reason}: {message}")
        self.status = status
        self.message = message


@contextmanager
def _api(action: str) -> Iterator[None]:
    """Convert every failure of the client inside into BackendError (or _ApiStatusError)."""
    try:
        yield
    except ApiException as exc:
        raise _ApiStatusError(
            action, exc.status or 0, exc.reason or "", _status_message(exc)
        ) from None
    except (OpenApiException, urllib3.exceptions.HTTPError, pydantic.ValidationError) as exc:
        raise BackendError(f"{action}: {exc}") from None


def _status_message(exc: ApiException) -> str:
    """The message of the API's Status object, or the raw body when there is none."""
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
        job = self._manifest(request, name)
        job_id = f"{namespace}/{name}"
        try:
            with _api(f"create job {job_id}"):
                self._batch.create_namespaced_job(namespace, job, _request_timeout=self._timeout)
        except _ApiStatusError as exc:
            if exc.status == 409 and self._submitted_before(namespace, name, request.run_id):
                return job_id  # an earlier attempt did create it: submitting is idempotent
            if 400 <= exc.status < 500 and exc.status != 429:
                raise ProbeError(exc.message) from None
            raise
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
                pods = self._list_pods(namespace, selector)
                found.update(self._job_statuses(namespace, jobs, pods))
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
        # With Background propagation the Job is gone at once and its pods follow; remember
        # the outcome, since the API will soon know nothing of the job.
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
        pods = _owned_pods(job, self._list_pods(namespace, f"{JOB_NAME_LABEL}={name}"))
        if not pods:
            raise BackendError(f"logs of {job_id}: the job has no pods")
        parts = []
        for pod in sorted(pods, key=_created_then_named):
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
        managed = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
        statuses: list[JobStatus] = []
        for namespace in self._settings.namespaces:
            with _api(f"list jobs in {namespace}"):
                listed = self._batch.list_namespaced_job(
                    namespace, label_selector=managed, _request_timeout=self._timeout
                ).items
            jobs = [job for job in listed if _is_ours(job.metadata) and not _final_condition(job)]
            if jobs:
                pods = self._list_pods(namespace, managed)
                statuses.extend(self._job_statuses(namespace, jobs, pods).values())
        return [status for status in statuses if not status.phase.finished]

    def snapshot(self) -> SchedulerSnapshot:
        now = self._clock.now()
        with _api("list nodes"):
            nodes = self._core.list_node(_request_timeout=self._timeout).items
        # Every pod, not just the tenants': a node's GPUs are held by whoever runs there.
        with _api("list pods in all namespaces"):
            pods = self._core.list_pod_for_all_namespaces(_request_timeout=self._timeout).items
        jobs: list[JobStatus] = []
        for namespace in self._settings.namespaces:
            jobs.extend(
                self._unfinished_work(namespace, [p for p in pods if _namespace(p) == namespace])
            )
        gpu = self._settings.gpu_resource
        return SchedulerSnapshot(
            at=now,
            queues=_queues(self._settings.namespaces, jobs, now),
            nodes=tuple(
                _node(node, pods, gpu, self._settings.pool_label)
                for node in sorted(nodes, key=lambda n: _name(n.metadata))
                if _node_has_gpus(node, gpu)
            ),
            jobs=tuple(jobs),
        )

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

    def _warning_events(self, namespace: str) -> Callable[[], list[client.CoreV1Event]]:
        """Read a namespace's Warning events once, and only if a pending job needs them."""
        cache: list[list[client.CoreV1Event]] = []

        def read() -> list[client.CoreV1Event]:
            if not cache:
                with _api(f"list events in {namespace}"):
                    cache.append(
                        self._core.list_namespaced_event(
                            namespace, field_selector="type=Warning", _request_timeout=self._timeout
                        ).items
                    )
            return cache[0]

        return read

    def _submitted_before(self, namespace: str, name: str, run_id: str) -> bool:
        job = self._read_job(namespace, name)
        return job is not None and _labels(job.metadata).get(RUN_ID_LABEL) == run_id

    def _job_statuses(
        self,
        namespace: str,
        jobs: Iterable[client.V1Job],
        pods: list[client.V1Pod],
        events: EventReader | None = None,
    ) -> dict[str, JobStatus]:
        events = events or self._warning_events(namespace)
        gpu = self._settings.gpu_resource
        statuses = (_job_status(job, _owned_pods(job, pods), events, gpu) for job in jobs)
        return {status.job_id: status for status in statuses}

    def _unfinished_work(self, namespace: str, pods: list[client.V1Pod]) -> list[JobStatus]:
        """Every unfinished Job using GPUs, and every other group of live pods using GPUs."""
        gpu = self._settings.gpu_resource
        with _api(f"list jobs in {namespace}"):
            listed = self._batch.list_namespaced_job(
                namespace, _request_timeout=self._timeout
            ).items
        jobs = [
            job
            for job in listed
            if not _final_condition(job) and _pod_spec_gpus(_template_spec(job), gpu) > 0
        ]
        events = self._warning_events(namespace)
        statuses = list(self._job_statuses(namespace, jobs, pods, events).values())
        groups: dict[str, list[client.V1Pod]] = {}
        for pod in pods:
            owner = _controller(pod.metadata)
            live = _phase(pod) not in _TERMINAL_POD_PHASES and not _deleting(pod.metadata)
            # Pods of a Job belong to it, even when the Job itself is already gone.
            if owner is None or owner.kind != "Job":
                kind, owner_name = (
                    ("pod", _name(pod.metadata))
                    if owner is None
                    else (
                        owner.kind.lower(),
                        owner.name,
                    )
                )
                if live and _pod_gpus(pod, gpu) > 0:
                    groups.setdefault(f"{namespace}/{kind}/{owner_name}", []).append(pod)
        statuses.extend(
            _pod_group_status(group_id, namespace, members, events, gpu)
            for group_id, members in sorted(groups.items())
        )
        return [status for status in statuses if not status.phase.finished]

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
        env = {
            ENV_RUN_ID: request.run_id,
            ENV_BEHAVIOUR: workload.behaviour.value,
            ENV_DURATION_SECONDS: f"{workload.duration_seconds:g}",
            ENV_EXIT_CODE: str(workload.exit_code),
            ENV_LOG_LINES: str(workload.log_lines),
            ENV_LOG_INTERVAL_SECONDS: f"{workload.log_interval_seconds:g}",
        }
        # Several nodes means one pod per node: never two of one probe on the same node.
        affinity = None
        if workload.nodes > 1:
            affinity = client.V1Affinity(
                pod_anti_affinity=client.V1PodAntiAffinity(
                    required_during_scheduling_ignored_during_execution=[
                        client.V1PodAffinityTerm(
                            label_selector=client.V1LabelSelector(
                                match_labels={RUN_ID_LABEL: request.run_id}
                            ),
                            topology_key="kubernetes.io/hostname",
                        )
                    ]
                )
            )
        pod_spec = client.V1PodSpec(
            restart_policy="Never",
            priority_class_name=request.priority,
            affinity=affinity,
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
            metadata=client.V1ObjectMeta(
                name=name,
                namespace=request.tenant,
                labels=labels,
            ),
            spec=client.V1JobSpec(
                backoff_limit=0,  # a probe's failure is its result, never retried
                parallelism=workload.nodes,
                completions=workload.nodes,
                ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels), spec=pod_spec
                ),
            ),
        )


def job_name(probe: str, run_id: str) -> str:
    """`observer-<probe>-<run id hash>`: a valid DNS label, stable for a run id, so a retried
    submission finds its earlier Job; the run id itself is in the labels."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:_HASH_CHARS]
    room = _NAME_LIMIT - len("observer--") - _HASH_CHARS
    slug = re.sub(r"[^a-z0-9-]+", "-", probe.lower()).strip("-")[:room].strip("-")
    return f"observer-{slug}-{digest}" if slug else f"observer-{digest}"


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


def _split_job_id(job_id: str) -> tuple[str, str]:
    namespace, _, name = job_id.partition("/")
    if not namespace or not name or "/" in name:
        raise ProbeError(f"not a Kubernetes job id (<namespace>/<job name>): {job_id!r}")
    return namespace, name


# --- statuses --------------------------------------------------------------------------------

EventReader = Callable[[], list[client.CoreV1Event]]


def _job_status(
    job: client.V1Job, pods: list[client.V1Pod], events: EventReader, gpu: str
) -> JobStatus:
    meta = job.metadata
    namespace, name, labels = _namespace(job), _name(meta), _labels(meta)
    spec = job.spec
    parallelism = spec.parallelism if spec and spec.parallelism is not None else 1
    completions = spec.completions if spec and spec.completions is not None else parallelism
    expected = max(1, min(parallelism, completions))
    started = [t for t in map(_pod_started_at, pods) if t is not None]
    status = JobStatus(
        job_id=f"{namespace}/{name}",
        run_id=labels.get(RUN_ID_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL),
        phase=JobPhase.PENDING,
        gpus=_pod_spec_gpus(_template_spec(job), gpu) * expected,
        submitted_at=_utc(meta.creation_timestamp if meta else None),
        started_at=max(started) if len(started) >= expected else None,
        nodes=_nodes(pods),
    )
    if meta and meta.deletion_timestamp:
        return replace(
            status,
            phase=JobPhase.CANCELLED,
            finished_at=_utc(meta.deletion_timestamp),
            reason="Deleted",
            message="the Job is being deleted",
        )
    condition = _final_condition(job)
    if condition is None:
        if status.started_at is not None:
            return replace(status, phase=JobPhase.RUNNING)
        reason, message = _pending_reason(pods, events, job)
        return replace(status, reason=reason, message=message)
    ended = [(pod, state) for pod in pods if (state := _terminated(pod)) is not None]
    last_finish = max(
        (t for _, state in ended if (t := _utc(state.finished_at)) is not None), default=None
    )
    status = replace(status, started_at=max(started, default=None))
    job_status = job.status
    if condition.type in _SUCCEEDED_CONDITIONS:
        completion = _utc(job_status.completion_time) if job_status else None
        return replace(
            status,
            phase=JobPhase.SUCCEEDED,
            finished_at=completion or last_finish or _utc(condition.last_transition_time),
            exit_code=0,
        )
    failures = sorted(
        (state for _, state in ended if state.exit_code != 0),
        key=lambda state: _utc(state.finished_at) or datetime.max.replace(tzinfo=UTC),
    )
    failure = failures[0] if failures else None
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
    started = [t for t in map(_pod_started_at, pods) if t is not None]
    created = [t for pod in pods if pod.metadata and (t := _utc(pod.metadata.creation_timestamp))]
    status = JobStatus(
        job_id=group_id,
        run_id=labels.get(RUN_ID_LABEL),
        tenant=namespace,
        queue=labels.get(QUEUE_LABEL),
        phase=JobPhase.PENDING,
        gpus=sum(_pod_gpus(pod, gpu) for pod in pods),
        submitted_at=min(created, default=None),
        started_at=max(started) if len(started) == len(pods) else None,
        nodes=_nodes(pods),
    )
    if status.started_at is not None:
        return replace(status, phase=JobPhase.RUNNING)
    reason, message = _pending_reason(pods, events, None)
    return replace(status, reason=reason, message=message)


def _pending_reason(
    pods: list[client.V1Pod], events: EventReader, job: client.V1Job | None
) -> tuple[str | None, str | None]:
    """Why a job waits, most specific first: a container that cannot start (a bad image waits
    forever), the scheduler's verdict, then the job controller's (quota, suspension)."""
    waiting = [pod for pod in pods if _pod_started_at(pod) is None and not _terminated(pod)]
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
    if job is not None:
        if job.spec and job.spec.suspend:
            for suspended in (job.status.conditions if job.status else None) or []:
                if suspended.type == "Suspended" and suspended.status == "True":
                    return suspended.reason or "Suspended", suspended.message
            return "Suspended", "spec.suspend is true (waiting for admission)"
        if not pods:
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
        and (uid is None or event.involved_object.uid in (None, uid))
    ]
    return max(matching, key=_event_time, default=None)


def _event_time(event: client.CoreV1Event) -> datetime:
    moments = (
        event.last_timestamp,
        event.event_time,
        event.metadata.creation_timestamp,
        event.first_timestamp,
    )
    return next(
        (at for moment in moments if (at := _utc(moment)) is not None),
        datetime.min.replace(tzinfo=UTC),
    )


def _queues(
    namespaces: Iterable[str], jobs: list[JobStatus], now: datetime
) -> tuple[QueueState, ...]:
    keys = sorted({(job.tenant, job.queue) for job in jobs}, key=lambda k: (k[0], k[1] or ""))
    keys += [(namespace, None) for namespace in namespaces if all(k[0] != namespace for k in keys)]
    states = []
    for tenant, queue in keys:
        mine = [job for job in jobs if (job.tenant, job.queue) == (tenant, queue)]
        pending = [job for job in mine if job.phase is JobPhase.PENDING]
        running = [job for job in mine if job.phase is JobPhase.RUNNING]
        waits = [(now - job.submitted_at).total_seconds() for job in pending if job.submitted_at]
        states.append(
            QueueState(
                tenant=tenant,
                queue=queue,
                pending_jobs=len(pending),
                pending_gpus=sum(job.gpus for job in pending),
                running_jobs=len(running),
                running_gpus=sum(job.gpus for job in running),
                longest_wait_seconds=max(waits, default=0.0),
                pending_reasons=dict(Counter(job.reason for job in pending if job.reason)),
            )
        )
    return tuple(states)


def _node(
    node: client.V1Node, pods: list[client.V1Pod], gpu: str, pool_label: str
) -> SchedulerNode:
    name = _name(node.metadata)
    status = node.status
    # Like the scheduler: a pod holds its GPUs until it is gone from the API, Terminating or not.
    allocated = sum(
        _pod_gpus(pod, gpu)
        for pod in pods
        if pod.spec and pod.spec.node_name == name and _phase(pod) not in _TERMINAL_POD_PHASES
    )
    ready = next(
        (c for c in (status.conditions if status else None) or [] if c.type == "Ready"), None
    )
    is_ready = ready is not None and ready.status == "True"
    state = "Ready" if is_ready else "NotReady"
    reasons = []
    if not is_ready:
        reasons.append(
            f"{ready.reason or 'NotReady'}: {ready.message or ''}".rstrip(": ")
            if ready
            else "no Ready condition"
        )
    if node.spec and node.spec.unschedulable:
        state += ",SchedulingDisabled"  # kubectl's word for a cordoned node
        reasons.append("cordoned")
    for taint in (node.spec.taints if node.spec else None) or []:
        if taint.effect in ("NoSchedule", "NoExecute"):
            value = f"={taint.value}" if taint.value else ""
            reasons.append(f"taint {taint.key}{value}:{taint.effect}")
    return SchedulerNode(
        name=name,
        pool=_labels(node.metadata).get(pool_label),
        gpus_total=_quantity((status.allocatable or {}).get(gpu) if status else None),
        gpus_allocated=allocated,
        state=state,
        reason="; ".join(reasons) or None,
    )


def _node_has_gpus(node: client.V1Node, gpu: str) -> bool:
    status = node.status
    # A node whose device plugin died reports capacity but no allocatable GPUs: keep it.
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


def _deleting(meta: client.V1ObjectMeta | None) -> bool:
    return meta is not None and meta.deletion_timestamp is not None


def _controller(meta: client.V1ObjectMeta | None) -> client.V1OwnerReference | None:
    references = (meta.owner_references if meta else None) or []
    return next(
        (ref for ref in references if ref.controller), references[0] if references else None
    )


def _owned_pods(job: client.V1Job, pods: list[client.V1Pod]) -> list[client.V1Pod]:
    # Label selectors select by name; the owner's uid tells a Job from an older namesake.
    name, uid = _name(job.metadata), job.metadata.uid if job.metadata else None
    owned = []
    for pod in pods:
        owner = _controller(pod.metadata)
        if (
            owner is not None
            and owner.kind == "Job"
            and owner.name == name
            and (uid is None or owner.uid == uid)
        ):
            owned.append(pod)
    return owned


def _created_then_named(pod: client.V1Pod) -> tuple[datetime, str]:
    created = _utc(pod.metadata.creation_timestamp if pod.metadata else None)
    return created or datetime.min.replace(tzinfo=UTC), _name(pod.metadata)


def _final_condition(job: client.V1Job) -> client.V1JobCondition | None:
    for condition in (job.status.conditions if job.status else None) or []:
        if condition.status == "True" and condition.type in (
            _SUCCEEDED_CONDITIONS | _FAILED_CONDITIONS
        ):
            return condition
    return None


def _template_spec(job: client.V1Job) -> client.V1PodSpec | None:
    return job.spec.template.spec if job.spec else None


def _phase(pod: client.V1Pod) -> str | None:
    return pod.status.phase if pod.status else None


def _nodes(pods: list[client.V1Pod]) -> tuple[str, ...]:
    return tuple(sorted({pod.spec.node_name for pod in pods if pod.spec and pod.spec.node_name}))


def _pod_started_at(pod: client.V1Pod) -> datetime | None:
    """When the pod's first container really started (never for a container that could not)."""
    moments = []
    for container in (pod.status.container_statuses if pod.status else None) or []:
        state = container.state
        if state is None:
            continue
        if state.running is not None:
            moments.append(_utc(state.running.started_at))
        elif state.terminated is not None:
            moments.append(_utc(state.terminated.started_at))
    # A container that failed to start reports the zero time (1970) as its start.
    real = [moment for moment in moments if moment is not None and moment.timestamp() > 0]
    return min(real, default=None)


def _terminated(pod: client.V1Pod) -> client.V1ContainerStateTerminated | None:
    for container in (pod.status.container_statuses if pod.status else None) or []:
        if container.state is not None and container.state.terminated is not None:
            return container.state.terminated
    return None


def _pod_gpus(pod: client.V1Pod, gpu: str) -> int:
    return _pod_spec_gpus(pod.spec, gpu)


def _pod_spec_gpus(spec: client.V1PodSpec | None, gpu: str) -> int:
    """GPUs a pod holds: its containers' sum, or its largest init container if that is more."""
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
