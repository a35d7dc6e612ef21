"""The objects the backend watches, as the API's JSON carries them, decoded with msgspec into
only the fields the backend reads (every other field is skipped unread): a pod's names, labels,
owner, GPUs, node, phase and container states; a node's labels, Ready condition, cordon, taints
and GPUs; a Job's parallelism, suspension, pod template and conditions; an event's object,
reason, words and time; a ResourceQuota's hard limits and managedFields. Kueue's and Volcano's
objects are read as plain JSON (queues.py walks them). The attribute names are the official
client's (snake_case), so the translation in status.py and objects.py reads both. Also the
envelopes around them: a list's page and a watch's event.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

import msgspec

from observer.errors import BackendError

T = TypeVar("T")


class _Fields(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """JSON's camelCase names under the client's snake_case ones."""


class OwnerReference(_Fields, frozen=True):
    kind: str
    name: str
    uid: str
    controller: bool | None = None


class ObjectMeta(_Fields, frozen=True):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    owner_references: list[OwnerReference] | None = None


class ResourceRequirements(_Fields, frozen=True):
    limits: dict[str, str] | None = None
    requests: dict[str, str] | None = None


class Container(_Fields, frozen=True):
    name: str
    resources: ResourceRequirements | None = None


class PodSpec(_Fields, frozen=True):
    containers: list[Container] = []
    init_containers: list[Container] | None = None
    node_name: str | None = None
    priority_class_name: str | None = None


class ContainerStateRunning(_Fields, frozen=True):
    started_at: datetime | None = None


class ContainerStateTerminated(_Fields, frozen=True):
    exit_code: int = 0
    reason: str | None = None
    message: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class ContainerStateWaiting(_Fields, frozen=True):
    reason: str | None = None
    message: str | None = None


class ContainerState(_Fields, frozen=True):
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None
    waiting: ContainerStateWaiting | None = None


class ContainerStatus(_Fields, frozen=True):
    state: ContainerState | None = None


class Condition(_Fields, frozen=True):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None


class PodStatus(_Fields, frozen=True):
    phase: str | None = None
    reason: str | None = None
    conditions: list[Condition] | None = None
    container_statuses: list[ContainerStatus] | None = None


class Pod(_Fields, frozen=True):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class Taint(_Fields, frozen=True):
    key: str
    effect: str
    value: str | None = None


class NodeSpec(_Fields, frozen=True):
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class NodeStatus(_Fields, frozen=True):
    conditions: list[Condition] | None = None
    allocatable: dict[str, str] | None = None
    capacity: dict[str, str] | None = None


class Node(_Fields, frozen=True):
    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class PodTemplateSpec(_Fields, frozen=True):
    spec: PodSpec | None = None


class JobSpec(_Fields, frozen=True):
    parallelism: int | None = None
    completions: int | None = None
    suspend: bool | None = None
    template: PodTemplateSpec = PodTemplateSpec()


class JobCondition(_Fields, frozen=True):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


class JobStatus(_Fields, frozen=True):
    conditions: list[JobCondition] | None = None
    completion_time: datetime | None = None


class Job(_Fields, frozen=True):
    metadata: ObjectMeta | None = None
    spec: JobSpec | None = None
    status: JobStatus | None = None


class ObjectReference(_Fields, frozen=True):
    kind: str | None = None
    name: str | None = None
    uid: str | None = None


class CoreEvent(_Fields, frozen=True):
    """A core/v1 Event (the client's CoreV1Event): what happened to which object, and when."""

    metadata: ObjectMeta | None = None
    involved_object: ObjectReference = ObjectReference()
    type: str | None = None
    reason: str | None = None
    message: str | None = None
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    event_time: datetime | None = None


class ManagedFieldsEntry(_Fields, frozen=True):
    manager: str | None = None
    operation: str | None = None
    subresource: str | None = None
    time: datetime | None = None
    fields_v1: dict[str, Any] | None = None


class QuotaMeta(ObjectMeta, frozen=True):
    """A ResourceQuota's metadata: its managedFields too, which no other kind's read needs."""

    managed_fields: list[ManagedFieldsEntry] | None = None


class ResourceQuotaSpec(_Fields, frozen=True):
    hard: dict[str, str] | None = None


class ResourceQuota(_Fields, frozen=True):
    metadata: QuotaMeta | None = None
    spec: ResourceQuotaSpec | None = None


class ListMeta(_Fields, frozen=True):
    resource_version: str | None = None
    continue_: str | None = msgspec.field(default=None, name="continue")


class Page(_Fields, Generic[T], frozen=True):
    """One page of a list: its items, the version it was read at, the token of the next."""

    metadata: ListMeta = ListMeta()
    items: list[T] | None = None


class Event(_Fields, frozen=True):
    """One line of a watch; its object is decoded by its type (an ERROR's is a Status)."""

    type: str
    object: msgspec.Raw


class Versioned(_Fields, frozen=True):
    """A BOOKMARK's object: the version the watch has reached, nothing else."""

    metadata: ObjectMeta = ObjectMeta()


class Status(_Fields, frozen=True):
    """The API's error: an ERROR event's object."""

    code: int = 0
    reason: str | None = None
    message: str | None = None


class Decoder(Generic[T]):
    """Pages, watch events and objects of one kind."""

    def __init__(self, kind: type[T]) -> None:
        self.object: msgspec.json.Decoder[T] = msgspec.json.Decoder(kind)
        self.page: msgspec.json.Decoder[Page[T]] = msgspec.json.Decoder(Page[kind])  # type: ignore[valid-type]
        self.event = msgspec.json.Decoder(Event)
        self.versioned = msgspec.json.Decoder(Versioned)
        self.status = msgspec.json.Decoder(Status)


def decoded(decode: msgspec.json.Decoder[T], data: bytes | msgspec.Raw, what: str) -> T:
    """`data` decoded; a document that is not what the API writes raises BackendError."""
    try:
        return decode.decode(data)
    except msgspec.DecodeError as exc:
        raise BackendError(f"{what}: the API server's answer is not readable: {exc}") from None


PODS, NODES, JOBS = Decoder(Pod), Decoder(Node), Decoder(Job)
EVENTS, QUOTAS = Decoder(CoreEvent), Decoder(ResourceQuota)
CUSTOM: Decoder[dict[str, Any]] = Decoder(dict)  # Kueue's and Volcano's, walked as JSON
