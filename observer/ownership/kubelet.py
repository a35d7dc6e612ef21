"""The kubelet's pod-resources API (v1 `PodResourcesLister`, over its unix socket) as the
node's OwnerSource: which pods run here and which GPUs each pod's containers were given.

The API names pods by namespace and name, never by UID, while a process's cgroup names its
pod by UID only; a name alone cannot tell a StatefulSet pod from the pod it replaced. The
join is the kubelet's own pod log directory, `<pod_logs_dir>/<namespace>_<name>_<uid>`
(`BuildPodLogsDirectory`; the kubelet reads the UID back from the name the same way when it
collects them, and neither a namespace nor a pod name may hold `_`). The kubelet makes it
before the pod's sandbox, so every pod that can run a process has one, and removes it once
the pod is deleted. A listed pod whose name no directory names, or two do (the pod a
StatefulSet replaced, not yet collected), is `unmatched`: no UID is guessed for it.

A listed pod's GPUs are its containers' devices (`nvidia.com/gpu`, `nvidia.com/mig-*`) and
their DRA claims (`dynamic_resources`), each mapped to its GPU's UUID (`devices.py`), a MIG
device to the GPU it is part of; the GPUs it can assign are the allocatable devices and the
GPUs DRA gave a running pod (`GetAllocatableResources` lists devices of device plugins only).

A listed pod is running unless the kubelet's /pods (`kubelet_pods.py`, when set up) says it
completed: before 1.34 `List` also includes completed pods. A completed pod holds nothing:
its GPUs are assigned to nobody, and a process of it still on one is a leak."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import grpc

from observer.clock import Clock
from observer.domain import OwnerKind
from observer.errors import OwnerSourceError
from observer.ownership.base import NodeOwners
from observer.ownership.devices import (
    Device,
    NodeGpus,
    dra_device,
    is_gpu_resource,
    plugin_device,
)
from observer.ownership.kubelet_pods import KubeletPods
from observer.ownership.podresources import api_pb2
from observer.ownership.podresources.api_pb2_grpc import PodResourcesListerStub

DEFAULT_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
DEFAULT_POD_LOGS_DIR = Path("/var/log/pods")
# The kubelet's own client allows 16 MiB (a node of hundreds of pods exceeds gRPC's 4 MiB).
_MAX_MESSAGE_BYTES = 16 * 2**20
_UID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_LOG_DIR = re.compile(rf"^([^_]+)_([^_]+)_({_UID})$")


class KubeletPodResources:
    name = "kubelet"

    def __init__(
        self,
        clock: Clock,
        socket: Path = DEFAULT_SOCKET,
        pod_logs_dir: Path = DEFAULT_POD_LOGS_DIR,
        timeout_seconds: float = 2.0,
        gpus: Callable[[], NodeGpus] = NodeGpus,
        pods: KubeletPods | None = None,
    ) -> None:
        self._clock = clock
        self._gpus = gpus
        self._pods = pods
        self._socket = socket
        self._pod_logs_dir = pod_logs_dir
        self._timeout_seconds = timeout_seconds
        # The channel connects on first use and again after the kubelet restarts; its backoff
        # is capped so a restarted kubelet is asked again within seconds, not minutes.
        self._channel = grpc.insecure_channel(
            f"unix://{socket}",
            options=[
                ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                ("grpc.max_reconnect_backoff_ms", 5000),
            ],
        )
        self._stub = PodResourcesListerStub(self._channel)

    def read(self) -> NodeOwners:
        at = self._clock.now()
        try:
            listed = self._stub.List(
                api_pb2.ListPodResourcesRequest(), timeout=self._timeout_seconds
            )
        except grpc.RpcError as exc:
            raise self._error("List", exc) from exc
        node_gpus = self._gpus()
        allocatable = self._allocatable(node_gpus)
        uids = self._uids_by_pod()
        ended = self._pods.ended() if self._pods is not None else frozenset()
        running: set[str] = set()
        gpus: dict[str, frozenset[str]] = {}
        parts: dict[str, dict[str, frozenset[str]]] = {}
        unmatched: dict[str, frozenset[str]] = {}
        for pod in listed.pod_resources:
            name = f"{pod.namespace}/{pod.name}"
            devices = list(_pod_devices(pod, node_gpus))
            candidates = uids.get(name, set())
            if len(candidates) == 1:
                [key] = candidates
                if key in ended:
                    continue  # listed by a kubelet before 1.34, though it completed
                running.add(key)
                gpus[key] = frozenset(d.gpu for d in devices)
            else:
                key = name
                unmatched[name] = frozenset(d.gpu for d in devices)
            if split := _parts(devices):
                parts[key] = split
        names = {uid: name for name, found in uids.items() for uid in found}
        if allocatable is not None:
            # DRA's GPUs are in no allocatable list: the kubelet speaks of those it gave.
            allocatable |= {gpu for held in (*gpus.values(), *unmatched.values()) for gpu in held}
        return NodeOwners(
            at=at,
            kind=OwnerKind.POD,
            running=frozenset(running),
            gpus=gpus,
            allocatable=allocatable,
            names=names,
            unmatched=unmatched,
            parts=parts,
        )

    def close(self) -> None:
        self._channel.close()

    def _allocatable(self, node_gpus: NodeGpus) -> frozenset[str] | None:
        try:
            answer = self._stub.GetAllocatableResources(
                api_pb2.AllocatableResourcesRequest(), timeout=self._timeout_seconds
            )
        except grpc.RpcError as exc:
            # Kubelets before 1.23 (or with KubeletPodResourcesGetAllocatable off) do not
            # say what they can assign: then nothing is 'assigned to nobody'.
            if _code(exc) is grpc.StatusCode.UNIMPLEMENTED:
                return None
            raise self._error("GetAllocatableResources", exc) from exc
        return frozenset(
            plugin_device(device_id, node_gpus).gpu for device_id in _gpu_ids(answer.devices)
        )

    def _error(self, method: str, exc: grpc.RpcError) -> OwnerSourceError:
        code = _code(exc)
        details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        return OwnerSourceError(
            f"kubelet pod-resources at {self._socket}: {method} failed: "
            f"{code.name if code else 'error'}: {details}"
        )

    def _uids_by_pod(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = defaultdict(set)
        try:
            with os.scandir(self._pod_logs_dir) as entries:
                for entry in entries:
                    match = _LOG_DIR.match(entry.name)
                    if match:
                        found[f"{match[1]}/{match[2]}"].add(match[3])
        except OSError as exc:
            raise OwnerSourceError(
                f"kubelet pod-resources at {self._socket}: the pod log directory "
                f"{self._pod_logs_dir}, which names each pod's UID, cannot be read: {exc}"
            ) from exc
        return found


def _gpu_ids(devices: Iterable[api_pb2.ContainerDevices]) -> Iterable[str]:
    for device in devices:
        if is_gpu_resource(device.resource_name):
            yield from device.device_ids


def _pod_devices(pod: api_pb2.PodResources, node_gpus: NodeGpus) -> Iterable[Device]:
    """The GPUs (or parts of them) a pod's containers were given, by a device plugin or DRA."""
    for container in pod.containers:
        for device_id in _gpu_ids(container.devices):
            yield plugin_device(device_id, node_gpus)
        for claim in container.dynamic_resources:
            for resource in claim.claim_resources:
                device = dra_device(resource.driver_name, resource.device_name, node_gpus)
                if device is not None:
                    yield device


def _parts(devices: Iterable[Device]) -> dict[str, frozenset[str]]:
    """The parts (MIG devices) given of each GPU, for GPUs not given whole."""
    found: dict[str, set[str]] = defaultdict(set)
    for device in devices:
        if device.part is not None:
            found[device.gpu].add(device.part)
    return {gpu: frozenset(named) for gpu, named in found.items()}


def _code(exc: grpc.RpcError) -> grpc.StatusCode | None:
    return exc.code() if isinstance(exc, grpc.Call) else None
