"""The test plays the kubelet: a real gRPC server on a unix socket serving the vendored
pod-resources v1 API, and the pod log directory the kubelet keeps beside it
(<namespace>_<name>_<uid>, made when a pod's sandbox is, removed once the pod is deleted).
Pods come and go as the test says."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from observer.ownership.podresources import api_pb2, api_pb2_grpc


@dataclass
class Pod:
    namespace: str
    name: str
    uid: str
    # container name -> (resource name, device ids)
    containers: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)

    def message(self) -> api_pb2.PodResources:
        return api_pb2.PodResources(
            name=self.name,
            namespace=self.namespace,
            containers=[
                api_pb2.ContainerResources(
                    name=container,
                    devices=[
                        api_pb2.ContainerDevices(resource_name=r, device_ids=ids)
                        for r, ids in devices
                    ],
                )
                for container, devices in self.containers.items()
            ],
        )


class StandInKubelet(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self, socket: Path, pod_logs_dir: Path, allocatable: list[str]) -> None:
        self.socket = socket
        self.pod_logs_dir = pod_logs_dir
        self.allocatable = allocatable
        self.pods: dict[str, Pod] = {}
        self.calls: list[str] = []
        self.allocatable_implemented = True
        self.hang = threading.Event()  # set: every call hangs until released
        self.released = threading.Event()
        self.server: grpc.Server | None = None
        pod_logs_dir.mkdir(parents=True, exist_ok=True)

    def stop(self) -> None:
        """The kubelet goes away: its socket no longer answers."""
        if self.server is not None:
            self.server.stop(grace=None).wait(5)
        self.socket.unlink(missing_ok=True)

    def log_dir(self, pod: Pod) -> Path:
        return self.pod_logs_dir / f"{pod.namespace}_{pod.name}_{pod.uid}"

    def start_pod(self, pod: Pod) -> None:
        self.log_dir(pod).mkdir()
        self.pods[pod.uid] = pod

    def delete_pod(self, uid: str, *, collect_logs: bool = True) -> None:
        pod = self.pods.pop(uid)
        if collect_logs:
            self.log_dir(pod).rmdir()

    def List(
        self, request: api_pb2.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.ListPodResourcesResponse:
        self._called("List")
        return api_pb2.ListPodResourcesResponse(
            pod_resources=[p.message() for p in self.pods.values()]
        )

    def GetAllocatableResources(
        self, request: api_pb2.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.AllocatableResourcesResponse:
        self._called("GetAllocatableResources")
        if not self.allocatable_implemented:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "unknown method")
        return api_pb2.AllocatableResourcesResponse(
            devices=[
                api_pb2.ContainerDevices(
                    resource_name="nvidia.com/gpu", device_ids=self.allocatable
                )
            ]
        )

    def Get(
        self, request: api_pb2.GetPodResourcesRequest, context: grpc.ServicerContext
    ) -> api_pb2.GetPodResourcesResponse:
        self._called("Get")
        for pod in self.pods.values():
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return api_pb2.GetPodResourcesResponse(pod_resources=pod.message())
        context.abort(grpc.StatusCode.NOT_FOUND, "pod not found")

    def _called(self, method: str) -> None:
        self.calls.append(method)
        if self.hang.is_set():
            self.released.wait(10)


@contextmanager
def serving(kubelet: StandInKubelet) -> Iterator[StandInKubelet]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(kubelet, server)
    server.add_insecure_port(f"unix://{kubelet.socket}")
    server.start()
    kubelet.server = server
    try:
        yield kubelet
    finally:
        kubelet.released.set()
        kubelet.stop()
