from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, Literal, TypeAlias, overload

from kubernetes.client.exceptions import ApiException as ApiException

# --- the connection ----------------------------------------------------------------------------

class Configuration:
    host: str
    api_key: dict[str, str]
    api_key_prefix: dict[str, str]
    refresh_api_key_hook: Callable[[Configuration], None] | None
    cert_file: str | None
    key_file: str | None
    username: str | None
    password: str | None
    connection_pool_maxsize: int
    def __init__(self) -> None: ...

class ApiClient:
    user_agent: str
    def __init__(self, configuration: Configuration | None = None) -> None: ...
    def close(self) -> None: ...
    # Any: the models' JSON form, and the model that `response_type` names
    def sanitize_for_serialization(self, obj: object) -> Any: ...
    def deserialize(
        self, response_text: str, response_type: str, content_type: str | None
    ) -> Any: ...

# --- the API groups --------------------------------------------------------------------------

_Timeout: TypeAlias = float | tuple[float, float] | None
_Body: TypeAlias = Mapping[str, Any]  # what the emulated cluster creates and patches

class RawResponse:
    """urllib3's HTTPResponse: what a call returns with `_preload_content=False`."""

    data: bytes
    def stream(
        self, amt: int | None = None, decode_content: bool | None = None
    ) -> Iterator[bytes]: ...
    def shutdown(self) -> None: ...
    def release_conn(self) -> None: ...

class CoreV1Api:
    def __init__(self, api_client: ApiClient | None = None) -> None: ...
    # Only raw: the informers list and watch them (limit, _continue, watch, resource_version,
    # allow_watch_bookmarks, timeout_seconds, _preload_content=False, _request_timeout).
    def list_node(self, **kwargs: Any) -> RawResponse: ...
    def list_pod_for_all_namespaces(self, **kwargs: Any) -> RawResponse: ...
    @overload
    def list_namespaced_pod(
        self,
        namespace: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        _request_timeout: _Timeout = None,
    ) -> V1PodList: ...
    @overload
    def list_namespaced_pod(
        self,
        namespace: str,
        *,
        label_selector: str | None = None,
        _preload_content: Literal[False],
        _request_timeout: _Timeout = None,
    ) -> RawResponse: ...
    def read_namespaced_pod_log(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        limit_bytes: int | None = None,
        _request_timeout: _Timeout = None,
    ) -> str: ...
    @overload
    def list_namespaced_event(
        self, namespace: str, *, _preload_content: Literal[False], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def list_namespaced_event(
        self, namespace: str, *, watch: Literal[True], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def list_namespaced_event(
        self,
        namespace: str,
        *,
        field_selector: str | None = None,
        _request_timeout: _Timeout = None,
    ) -> CoreV1EventList: ...
    def list_namespaced_secret(
        self, namespace: str, *, _request_timeout: _Timeout = None
    ) -> V1SecretList: ...
    def read_namespaced_secret(
        self, name: str, namespace: str, *, _request_timeout: _Timeout = None
    ) -> V1Secret: ...
    @overload
    def list_namespaced_resource_quota(
        self, namespace: str, *, _preload_content: Literal[False], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def list_namespaced_resource_quota(
        self, namespace: str, *, watch: Literal[True], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def list_namespaced_resource_quota(
        self, namespace: str, *, _request_timeout: _Timeout = None
    ) -> V1ResourceQuotaList: ...
    def create_namespaced_resource_quota(
        self, namespace: str, body: _Body, *, field_manager: str | None = None
    ) -> V1ResourceQuota: ...
    def patch_namespaced_resource_quota(
        self, name: str, namespace: str, body: _Body, *, field_manager: str | None = None
    ) -> V1ResourceQuota: ...
    def create_node(self, body: _Body) -> V1Node: ...
    def patch_node(self, name: str, body: _Body) -> V1Node: ...
    def patch_node_status(self, name: str, body: _Body) -> V1Node: ...
    def create_namespaced_pod(self, namespace: str, body: _Body) -> V1Pod: ...
    def patch_namespaced_pod(self, name: str, namespace: str, body: _Body) -> V1Pod: ...
    def patch_namespaced_pod_status(self, name: str, namespace: str, body: _Body) -> V1Pod: ...
    def delete_namespaced_pod(self, name: str, namespace: str) -> V1Pod: ...
    def create_namespaced_secret(self, namespace: str, body: _Body) -> V1Secret: ...
    def create_namespaced_event(self, namespace: str, body: _Body) -> CoreV1Event: ...
    def patch_namespaced_event(self, name: str, namespace: str, body: _Body) -> CoreV1Event: ...
    def create_namespaced_service(
        self, namespace: str, body: V1Service | _Body, *, _request_timeout: _Timeout = None
    ) -> V1Service: ...
    def delete_namespaced_service(
        self, name: str, namespace: str, *, _request_timeout: _Timeout = None
    ) -> object: ...

class AppsV1Api:
    def __init__(self, api_client: ApiClient | None = None) -> None: ...
    def create_namespaced_deployment(
        self, namespace: str, body: V1Deployment | _Body, *, _request_timeout: _Timeout = None
    ) -> V1Deployment: ...
    def patch_namespaced_deployment(
        self, name: str, namespace: str, body: _Body, *, _request_timeout: _Timeout = None
    ) -> V1Deployment: ...
    def delete_namespaced_deployment(
        self,
        name: str,
        namespace: str,
        *,
        propagation_policy: str | None = None,
        _request_timeout: _Timeout = None,
    ) -> object: ...
    def list_deployment_for_all_namespaces(self) -> V1DeploymentList: ...
    def patch_namespaced_deployment_status(
        self, name: str, namespace: str, body: _Body
    ) -> V1Deployment: ...

class BatchV1Api:
    def __init__(self, api_client: ApiClient | None = None) -> None: ...
    def create_namespaced_job(
        self, namespace: str, body: V1Job | _Body, *, _request_timeout: _Timeout = None
    ) -> V1Job: ...
    @overload
    def read_namespaced_job(
        self, name: str, namespace: str, *, _preload_content: Literal[False], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def read_namespaced_job(
        self, name: str, namespace: str, *, _request_timeout: _Timeout = None
    ) -> V1Job: ...
    @overload
    def list_namespaced_job(
        self, namespace: str, *, _preload_content: Literal[False], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def list_namespaced_job(
        self, namespace: str, *, watch: Literal[True], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def list_namespaced_job(
        self,
        namespace: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        _request_timeout: _Timeout = None,
    ) -> V1JobList: ...
    def delete_namespaced_job(
        self,
        name: str,
        namespace: str,
        *,
        propagation_policy: str | None = None,
        _request_timeout: _Timeout = None,
    ) -> object: ...
    def list_job_for_all_namespaces(self) -> V1JobList: ...
    def patch_namespaced_job(self, name: str, namespace: str, body: _Body) -> V1Job: ...
    def patch_namespaced_job_status(self, name: str, namespace: str, body: _Body) -> V1Job: ...

class CustomObjectsApi:
    """Kueue's and Volcano's objects: the API's JSON, unmodelled."""

    def __init__(self, api_client: ApiClient | None = None) -> None: ...
    @overload
    def list_namespaced_custom_object(
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        *,
        _preload_content: Literal[False],
        **kwargs: Any,
    ) -> RawResponse: ...
    @overload
    def list_namespaced_custom_object(
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        *,
        watch: Literal[True],
        **kwargs: Any,
    ) -> RawResponse: ...
    @overload
    def list_namespaced_custom_object(
        self,
        group: str,
        version: str,
        namespace: str,
        plural: str,
        *,
        label_selector: str | None = None,
        _request_timeout: _Timeout = None,
    ) -> dict[str, Any]: ...
    @overload
    def list_cluster_custom_object(
        self,
        group: str,
        version: str,
        plural: str,
        *,
        _preload_content: Literal[False],
        **kwargs: Any,
    ) -> RawResponse: ...
    @overload
    def list_cluster_custom_object(
        self, group: str, version: str, plural: str, *, watch: Literal[True], **kwargs: Any
    ) -> RawResponse: ...
    @overload
    def list_cluster_custom_object(
        self,
        group: str,
        version: str,
        plural: str,
        *,
        label_selector: str | None = None,
        _request_timeout: _Timeout = None,
    ) -> dict[str, Any]: ...

# --- objects -----------------------------------------------------------------------------------

class V1OwnerReference:
    kind: str
    name: str
    uid: str
    controller: bool | None

class V1ManagedFieldsEntry:
    manager: str | None
    operation: str | None
    subresource: str | None
    time: datetime | None
    fields_v1: dict[str, Any] | None  # FieldsV1: {"f:spec": {"f:hard": {"f:<key>": {}}}}

class V1ObjectMeta:
    name: str | None
    namespace: str | None
    uid: str | None
    labels: dict[str, str] | None
    annotations: dict[str, str] | None
    creation_timestamp: datetime | None
    deletion_timestamp: datetime | None
    owner_references: list[V1OwnerReference] | None
    managed_fields: list[V1ManagedFieldsEntry] | None
    def __init__(
        self,
        *,
        name: str | None = None,
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> None: ...

class V1ObjectReference:
    kind: str | None
    name: str | None
    uid: str | None

class V1LabelSelector:
    def __init__(self, *, match_labels: dict[str, str] | None = None) -> None: ...

class V1PodAffinityTerm:
    def __init__(
        self, *, topology_key: str, label_selector: V1LabelSelector | None = None
    ) -> None: ...

class V1PodAntiAffinity:
    def __init__(
        self,
        *,
        required_during_scheduling_ignored_during_execution: list[V1PodAffinityTerm] | None = None,
    ) -> None: ...

class V1Affinity:
    pod_anti_affinity: V1PodAntiAffinity | None
    def __init__(self, *, pod_anti_affinity: V1PodAntiAffinity | None = None) -> None: ...

class V1EnvVar:
    name: str
    value: str | None
    def __init__(self, *, name: str, value: str | None = None) -> None: ...

class V1ResourceRequirements:
    limits: dict[str, str] | None
    requests: dict[str, str] | None
    def __init__(
        self, *, limits: dict[str, str] | None = None, requests: dict[str, str] | None = None
    ) -> None: ...

class V1Capabilities:
    add: list[str] | None
    drop: list[str] | None
    def __init__(self, *, add: list[str] | None = None, drop: list[str] | None = None) -> None: ...

class V1SecurityContext:
    allow_privilege_escalation: bool | None
    capabilities: V1Capabilities | None
    read_only_root_filesystem: bool | None
    def __init__(
        self,
        *,
        allow_privilege_escalation: bool | None = None,
        capabilities: V1Capabilities | None = None,
        read_only_root_filesystem: bool | None = None,
    ) -> None: ...

class V1VolumeMount:
    name: str
    mount_path: str
    def __init__(self, *, name: str, mount_path: str) -> None: ...

class V1ContainerPort:
    container_port: int
    name: str | None
    def __init__(self, *, container_port: int, name: str | None = None) -> None: ...

class V1HTTPGetAction:
    path: str | None
    port: int | str
    def __init__(self, *, path: str | None = None, port: int | str) -> None: ...

class V1Probe:
    http_get: V1HTTPGetAction | None
    period_seconds: int | None
    initial_delay_seconds: int | None
    failure_threshold: int | None
    def __init__(
        self,
        *,
        http_get: V1HTTPGetAction | None = None,
        period_seconds: int | None = None,
        initial_delay_seconds: int | None = None,
        failure_threshold: int | None = None,
    ) -> None: ...

class V1Container:
    name: str
    image: str | None
    command: list[str] | None
    env: list[V1EnvVar] | None
    ports: list[V1ContainerPort] | None
    readiness_probe: V1Probe | None
    resources: V1ResourceRequirements | None
    security_context: V1SecurityContext | None
    volume_mounts: list[V1VolumeMount] | None
    def __init__(
        self,
        *,
        name: str,
        image: str | None = None,
        command: list[str] | None = None,
        env: list[V1EnvVar] | None = None,
        ports: list[V1ContainerPort] | None = None,
        readiness_probe: V1Probe | None = None,
        resources: V1ResourceRequirements | None = None,
        security_context: V1SecurityContext | None = None,
        volume_mounts: list[V1VolumeMount] | None = None,
    ) -> None: ...

# --- pods --------------------------------------------------------------------------------------

class V1SeccompProfile:
    type: str
    def __init__(self, *, type: str) -> None: ...

class V1PodSecurityContext:
    run_as_non_root: bool | None
    run_as_user: int | None
    run_as_group: int | None
    seccomp_profile: V1SeccompProfile | None
    def __init__(
        self,
        *,
        run_as_non_root: bool | None = None,
        run_as_user: int | None = None,
        run_as_group: int | None = None,
        seccomp_profile: V1SeccompProfile | None = None,
    ) -> None: ...

class V1Toleration:
    key: str | None
    operator: str | None
    value: str | None
    effect: str | None
    toleration_seconds: int | None
    def __init__(
        self,
        *,
        key: str | None = None,
        operator: str | None = None,
        value: str | None = None,
        effect: str | None = None,
        toleration_seconds: int | None = None,
    ) -> None: ...

class V1LocalObjectReference:
    name: str
    def __init__(self, *, name: str) -> None: ...

class V1EmptyDirVolumeSource:
    size_limit: str | None
    def __init__(self, *, size_limit: str | None = None) -> None: ...

class V1Volume:
    name: str
    empty_dir: V1EmptyDirVolumeSource | None
    def __init__(self, *, name: str, empty_dir: V1EmptyDirVolumeSource | None = None) -> None: ...

class V1PodSpec:
    containers: list[V1Container]
    init_containers: list[V1Container] | None
    node_name: str | None
    priority_class_name: str | None
    runtime_class_name: str | None
    affinity: V1Affinity | None
    security_context: V1PodSecurityContext | None
    def __init__(
        self,
        *,
        containers: list[V1Container],
        restart_policy: str | None = None,
        priority_class_name: str | None = None,
        runtime_class_name: str | None = None,
        affinity: V1Affinity | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[V1Toleration] | None = None,
        image_pull_secrets: list[V1LocalObjectReference] | None = None,
        automount_service_account_token: bool | None = None,
        security_context: V1PodSecurityContext | None = None,
        volumes: list[V1Volume] | None = None,
    ) -> None: ...

class V1ContainerStateRunning:
    started_at: datetime | None

class V1ContainerStateTerminated:
    exit_code: int
    reason: str | None
    message: str | None
    started_at: datetime | None
    finished_at: datetime | None

class V1ContainerStateWaiting:
    reason: str | None
    message: str | None

class V1ContainerState:
    running: V1ContainerStateRunning | None
    terminated: V1ContainerStateTerminated | None
    waiting: V1ContainerStateWaiting | None

class V1ContainerStatus:
    state: V1ContainerState | None

class V1PodCondition:
    type: str
    status: str
    reason: str | None
    message: str | None

class V1PodStatus:
    phase: str | None
    pod_ip: str | None
    reason: str | None
    start_time: datetime | None
    conditions: list[V1PodCondition] | None
    container_statuses: list[V1ContainerStatus] | None

class V1Pod:
    metadata: V1ObjectMeta | None
    spec: V1PodSpec | None
    status: V1PodStatus | None

class V1PodList:
    items: list[V1Pod]

class V1PodTemplateSpec:
    spec: V1PodSpec | None
    def __init__(
        self, *, metadata: V1ObjectMeta | None = None, spec: V1PodSpec | None = None
    ) -> None: ...

# --- jobs --------------------------------------------------------------------------------------

class V1JobSpec:
    parallelism: int | None
    completions: int | None
    suspend: bool | None
    backoff_limit: int | None
    ttl_seconds_after_finished: int | None
    template: V1PodTemplateSpec
    def __init__(
        self,
        *,
        template: V1PodTemplateSpec,
        backoff_limit: int | None = None,
        parallelism: int | None = None,
        completions: int | None = None,
        ttl_seconds_after_finished: int | None = None,
    ) -> None: ...

class V1JobCondition:
    type: str
    status: str
    reason: str | None
    message: str | None
    last_transition_time: datetime | None

class V1JobStatus:
    conditions: list[V1JobCondition] | None
    start_time: datetime | None
    completion_time: datetime | None

class V1Job:
    metadata: V1ObjectMeta | None
    spec: V1JobSpec | None
    status: V1JobStatus | None
    def __init__(
        self,
        *,
        api_version: str | None = None,
        kind: str | None = None,
        metadata: V1ObjectMeta | None = None,
        spec: V1JobSpec | None = None,
    ) -> None: ...

class V1JobList:
    items: list[V1Job]

# --- events, nodes, secrets --------------------------------------------------------------------

class CoreV1Event:
    metadata: V1ObjectMeta
    involved_object: V1ObjectReference
    reason: str | None
    message: str | None
    first_timestamp: datetime | None
    last_timestamp: datetime | None
    event_time: datetime | None

class CoreV1EventList:
    items: list[CoreV1Event]

class V1Taint:
    key: str
    value: str | None
    effect: str

class V1NodeSpec:
    unschedulable: bool | None
    taints: list[V1Taint] | None

class V1NodeCondition:
    type: str
    status: str
    reason: str | None
    message: str | None

class V1NodeStatus:
    conditions: list[V1NodeCondition] | None
    allocatable: dict[str, str] | None
    capacity: dict[str, str] | None

class V1Node:
    metadata: V1ObjectMeta | None
    spec: V1NodeSpec | None
    status: V1NodeStatus | None

class V1NodeList:
    items: list[V1Node]

class V1ResourceQuotaSpec:
    hard: dict[str, str] | None

class V1ResourceQuota:
    metadata: V1ObjectMeta | None
    spec: V1ResourceQuotaSpec | None

class V1ResourceQuotaList:
    items: list[V1ResourceQuota]

class V1Secret:
    metadata: V1ObjectMeta | None
    data: dict[str, bytes | str] | None

class V1SecretList:
    items: list[V1Secret]

# --- deployments and services (the inference probe) ---------------------------------------------

class V1RollingUpdateDeployment:
    def __init__(
        self, *, max_surge: int | str | None = None, max_unavailable: int | str | None = None
    ) -> None: ...

class V1DeploymentStrategy:
    def __init__(
        self, *, type: str | None = None, rolling_update: V1RollingUpdateDeployment | None = None
    ) -> None: ...

class V1DeploymentSpec:
    replicas: int | None
    template: V1PodTemplateSpec
    def __init__(
        self,
        *,
        replicas: int | None = None,
        selector: V1LabelSelector,
        strategy: V1DeploymentStrategy | None = None,
        template: V1PodTemplateSpec,
    ) -> None: ...

class V1Deployment:
    metadata: V1ObjectMeta | None
    spec: V1DeploymentSpec | None
    def __init__(
        self,
        *,
        api_version: str | None = None,
        kind: str | None = None,
        metadata: V1ObjectMeta | None = None,
        spec: V1DeploymentSpec | None = None,
    ) -> None: ...

class V1DeploymentList:
    items: list[V1Deployment]

class V1ServicePort:
    def __init__(
        self, *, name: str | None = None, port: int, target_port: int | str | None = None
    ) -> None: ...

class V1ServiceSpec:
    def __init__(
        self, *, selector: dict[str, str] | None = None, ports: list[V1ServicePort] | None = None
    ) -> None: ...

class V1Service:
    def __init__(
        self,
        *,
        api_version: str | None = None,
        kind: str | None = None,
        metadata: V1ObjectMeta | None = None,
        spec: V1ServiceSpec | None = None,
    ) -> None: ...
