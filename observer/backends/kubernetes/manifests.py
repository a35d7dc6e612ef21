"""What the backend creates: a probe is a batch/v1 Job in its tenant's namespace (namespace =
tenant), named after its run id and labelled with it, whose one container runs the probe's own
program (`observer probe ...`, probes/programs.py) from the observer's image, its parameters
also in the environment for a site's own burner. The inference probe is a Deployment of
`observer probe serve` behind a Service. Every pod passes Pod Security `restricted`, so tenant
namespaces that enforce it admit it, and states its CPU and memory, requests and limits (its
program's size, then the probe's and the tenant's settings), so a namespace whose
ResourceQuota covers them admits it too; a tenant's probes go to its pool (`tenant_pools`)."""

from __future__ import annotations

import hashlib
import re

from kubernetes import client

from observer.backends.base import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PROBE_LABEL,
    RUN_ID_LABEL,
    ServiceSpec,
)
from observer.domain import Behaviour, JobRequest
from observer.probes.programs import ProgramSize, probe_arguments, program_size, serve_arguments
from observer.records import SERVICE_TASK
from observer.settings.controller import KubernetesSettings
from observer.settings.placement import PodResourcesSettings, PoolSettings, TolerationSettings

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's LocalQueue of a Job
SERVICE_LABEL = "soak.observer/service"  # the inference probe's pods, selected by it
SERVE_PORT_NAME = "serve"
CONTAINER_NAME = "probe"
BAD_COMMAND = "observer-no-such-command"
SCRATCH_VOLUME = "tmp"
SCRATCH_SIZE_LIMIT = "256Mi"

# The probe's parameters also travel as environment variables: a configured gpu_busy_command
# reads them, and a person reading `kubectl describe pod` sees what the probe was asked.
ENV_RUN_ID = "OBSERVER_RUN_ID"
ENV_BEHAVIOUR = "OBSERVER_BEHAVIOUR"
ENV_DURATION_SECONDS = "OBSERVER_DURATION_SECONDS"
ENV_EXIT_CODE = "OBSERVER_EXIT_CODE"
ENV_LOG_LINES = "OBSERVER_LOG_LINES"
ENV_LOG_INTERVAL_SECONDS = "OBSERVER_LOG_INTERVAL_SECONDS"

PROGRAM = "observer"  # on the image's PATH: the observer's own image runs every probe

_NAME_LIMIT = 63  # a Job's name is also the value of its pods' job-name label
_HASH_CHARS = 10


def job_manifest(settings: KubernetesSettings, request: JobRequest, name: str) -> client.V1Job:
    """The Job that runs `request` under `name`: never retried, one pod per node."""
    workload = request.workload
    labels = {
        RUN_ID_LABEL: request.run_id,
        PROBE_LABEL: request.probe,
        MANAGED_BY_LABEL: MANAGED_BY,
    }
    if request.queue is not None:
        labels[QUEUE_LABEL] = request.queue
    arguments = probe_arguments(request)
    image, command = settings.image, [PROGRAM, *arguments]
    sizes = [_size(program_size(arguments))]
    match workload.behaviour:
        case Behaviour.GPU_BUSY:
            image = settings.gpu_busy_image or settings.image
            command = list(settings.gpu_busy_command or command)
        case Behaviour.BAD_COMMAND:
            command = [BAD_COMMAND]
        case Behaviour.BAD_IMAGE:
            image = settings.bad_image
        case Behaviour.OOM:
            # No bound of its own: the limit kills it, and it asks for all it will touch.
            oom = settings.oom_memory_limit
            sizes.append(PodResourcesSettings(memory_request=oom, memory_limit=oom))
    sizes.append(settings.probe_resources.get(request.probe, PodResourcesSettings()))
    pod_spec = _pod_spec(
        settings,
        request.tenant,
        image,
        command,
        _resources(settings, request.tenant, sizes, workload.gpus_per_node),
        probe_env(request),
        restart_policy="Never",
        priority=request.priority,
        affinity=_one_pod_per_node(request.run_id) if workload.nodes > 1 else None,
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


def deployment_manifest(
    settings: KubernetesSettings, spec: ServiceSpec, replicas: int
) -> client.V1Deployment:
    """The inference probe's Deployment: `replicas` pods of `observer probe serve`, each with
    its GPUs, ready when /healthz answers 200; a rolling update adds one new pod before it
    removes an old one, so a restart keeps every replica asked for."""
    labels = service_labels(spec)
    container_port = client.V1ContainerPort(container_port=spec.port, name=SERVE_PORT_NAME)
    arguments = serve_arguments(spec.port, spec.latency_ms, spec.warmup_seconds)
    pod_spec = _pod_spec(
        settings,
        spec.tenant,
        settings.image,
        [PROGRAM, *arguments],
        _resources(settings, spec.tenant, [_size(program_size(arguments))], spec.gpus_per_replica),
        {},
        restart_policy="Always",
        ports=[container_port],
        readiness=client.V1Probe(
            http_get=client.V1HTTPGetAction(path="/healthz", port=SERVE_PORT_NAME),
            period_seconds=max(1, round(spec.ready_period_seconds)),
            failure_threshold=1,
        ),
    )
    return client.V1Deployment(
        api_version="apps/v1",
        kind="Deployment",
        metadata=client.V1ObjectMeta(name=spec.name, namespace=spec.tenant, labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels={SERVICE_LABEL: spec.name}),
            strategy=client.V1DeploymentStrategy(
                type="RollingUpdate",
                rolling_update=client.V1RollingUpdateDeployment(max_surge=1, max_unavailable=0),
            ),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels), spec=pod_spec
            ),
        ),
    )


def service_manifest(spec: ServiceSpec) -> client.V1Service:
    """The Service in front of the replicas, as a tenant's clients would reach them; the
    controller requests each replica at its own address, to time every one."""
    return client.V1Service(
        api_version="v1",
        kind="Service",
        metadata=client.V1ObjectMeta(
            name=spec.name, namespace=spec.tenant, labels=service_labels(spec)
        ),
        spec=client.V1ServiceSpec(
            selector={SERVICE_LABEL: spec.name},
            ports=[
                client.V1ServicePort(name=SERVE_PORT_NAME, port=spec.port, target_port=spec.port)
            ],
        ),
    )


def service_labels(spec: ServiceSpec) -> dict[str, str]:
    return {SERVICE_LABEL: spec.name, PROBE_LABEL: SERVICE_TASK, MANAGED_BY_LABEL: MANAGED_BY}


def probe_env(request: JobRequest) -> dict[str, str]:
    """The environment a probe's container runs with."""
    workload = request.workload
    return {
        ENV_RUN_ID: request.run_id,
        ENV_BEHAVIOUR: workload.behaviour.value,
        ENV_DURATION_SECONDS: f"{workload.duration_seconds:g}",
        ENV_EXIT_CODE: str(workload.exit_code),
        ENV_LOG_LINES: str(workload.log_lines),
        ENV_LOG_INTERVAL_SECONDS: f"{workload.log_interval_seconds:g}",
    }


def job_name(probe: str, run_id: str) -> str:
    """`observer-<probe>-<run id hash>`: a valid DNS label, the same for the same run id (a
    retried submission finds its earlier Job); the run id itself is in the labels."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:_HASH_CHARS]
    room = _NAME_LIMIT - len("observer--") - _HASH_CHARS
    slug = re.sub(r"[^a-z0-9-]+", "-", probe.lower()).strip("-")[:room].strip("-")
    return f"observer-{slug}-{digest}" if slug else f"observer-{digest}"


def _size(size: ProgramSize) -> PodResourcesSettings:
    return PodResourcesSettings(
        cpu_request=f"{size.cpu_request_millicores}m",
        cpu_limit=f"{size.cpu_limit_millicores}m",
        memory_request=f"{size.memory_request_mebibytes}Mi",
        memory_limit=f"{size.memory_limit_mebibytes}Mi",
    )


def _resources(
    settings: KubernetesSettings, tenant: str, sizes: list[PodResourcesSettings], gpus: int
) -> client.V1ResourceRequirements:
    """The container's requests and limits: each size over the one before it, the tenant's
    last; its GPUs as a limit (an extended resource's request is its limit)."""
    merged: dict[str, str] = {}
    for size in [*sizes, settings.tenant_resources.get(tenant, PodResourcesSettings())]:
        merged |= size.model_dump(exclude_none=True)
    requests = {r: merged[f"{r}_request"] for r in ("cpu", "memory") if f"{r}_request" in merged}
    limits = {r: merged[f"{r}_limit"] for r in ("cpu", "memory") if f"{r}_limit" in merged}
    return client.V1ResourceRequirements(
        requests=requests, limits={**limits, settings.gpu_resource: str(gpus)}
    )


def _pod_spec(
    settings: KubernetesSettings,
    tenant: str,
    image: str,
    command: list[str],
    resources: client.V1ResourceRequirements,
    env: dict[str, str],
    *,
    restart_policy: str,
    priority: str | None = None,
    affinity: client.V1Affinity | None = None,
    ports: list[client.V1ContainerPort] | None = None,
    readiness: client.V1Probe | None = None,
) -> client.V1PodSpec:
    """A probe pod: the site's placement (its tenant's pool's over every probe's), and Pod
    Security `restricted`."""
    pool_name = settings.tenant_pools.get(tenant)
    pool = settings.pools[pool_name] if pool_name is not None else PoolSettings()
    node_selector = dict(settings.node_selector)
    if pool_name is not None:
        node_selector |= {settings.pool_label: pool_name, **pool.node_selector}
    return client.V1PodSpec(
        restart_policy=restart_policy,
        priority_class_name=priority or pool.priority_class_name or settings.priority_class_name,
        runtime_class_name=pool.runtime_class_name or settings.runtime_class_name,
        affinity=affinity,
        node_selector=node_selector or None,
        tolerations=[_toleration(t) for t in (*settings.tolerations, *pool.tolerations)] or None,
        image_pull_secrets=[
            client.V1LocalObjectReference(name=n) for n in settings.image_pull_secrets
        ]
        or None,
        # A probe never calls the API: the namespace's token would only be something to steal.
        automount_service_account_token=False,
        security_context=client.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=settings.run_as_user,
            run_as_group=settings.run_as_group,
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        ),
        containers=[
            client.V1Container(
                name=CONTAINER_NAME,
                image=image,
                command=command,
                env=[client.V1EnvVar(name=key, value=value) for key, value in env.items()] or None,
                ports=ports,
                readiness_probe=readiness,
                resources=resources,
                security_context=client.V1SecurityContext(
                    allow_privilege_escalation=False,
                    capabilities=client.V1Capabilities(drop=["ALL"]),
                    # The probe programs write only their output; a site's burner gets /tmp.
                    read_only_root_filesystem=True,
                ),
                volume_mounts=[client.V1VolumeMount(name=SCRATCH_VOLUME, mount_path="/tmp")],
            )
        ],
        volumes=[
            client.V1Volume(
                name=SCRATCH_VOLUME,
                empty_dir=client.V1EmptyDirVolumeSource(size_limit=SCRATCH_SIZE_LIMIT),
            )
        ],
    )


def _toleration(toleration: TolerationSettings) -> client.V1Toleration:
    return client.V1Toleration(
        key=toleration.key,
        operator=toleration.operator,
        value=toleration.value,
        effect=toleration.effect,
        toleration_seconds=toleration.toleration_seconds,
    )


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
