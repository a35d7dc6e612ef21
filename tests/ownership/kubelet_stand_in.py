"""The test plays the kubelet: a real gRPC server on a unix socket serving the vendored
pod-resources v1 API, the pod log directory the kubelet keeps beside it
(<namespace>_<name>_<uid>, made when a pod's sandbox is, removed once the pod is deleted), and
its /pods over real HTTP, each pod with its phase, to a bearer token. Pods come, complete and
go as the test says; like a kubelet before 1.34, `List` keeps listing a completed pod."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    # container name -> DRA claims: (claim name, [(driver, pool, device name)])
    claims: dict[str, list[tuple[str, list[tuple[str, str, str]]]]] = field(default_factory=dict)
    phase: str = "Running"

    def message(self) -> api_pb2.PodResources:
        return api_pb2.PodResources(
            name=self.name,
            namespace=self.namespace,
            containers=[
                api_pb2.ContainerResources(
                    name=container,
                    devices=[
                        api_pb2.ContainerDevices(resource_name=r, device_ids=ids)
                        for r, ids in self.containers.get(container, [])
                    ],
                    dynamic_resources=[
                        api_pb2.DynamicResource(
                            claim_name=claim,
                            claim_namespace=self.namespace,
                            claim_resources=[
                                api_pb2.ClaimResource(
                                    driver_name=driver,
                                    pool_name=pool,
                                    device_name=device,
                                    cdi_devices=[
                                        api_pb2.CDIDevice(name=f"k8s.{driver}/device={device}")
                                    ],
                                )
                                for driver, pool, device in resources
                            ],
                        )
                        for claim, resources in self.claims.get(container, [])
                    ],
                )
                for container in {**self.containers, **self.claims}
            ],
        )

    def api_object(self) -> dict[str, object]:
        """The pod as the kubelet's /pods gives it (the fields the agent reads, and a few)."""
        return {
            "metadata": {"name": self.name, "namespace": self.namespace, "uid": self.uid},
            "spec": {"restartPolicy": "Never"},
            "status": {"phase": self.phase},
        }


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

    def complete_pod(self, uid: str, phase: str = "Succeeded") -> None:
        """Its containers ended; it stays on the node (and in `List`) until it is deleted."""
        self.pods[uid].phase = phase

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


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1 signed by themselves, as a kubelet makes its own
    serving certificate without serverTLSBootstrap."""
    cert, key = directory / "kubelet.crt", directory / "kubelet.key"
    subject = ["-subj", "/CN=gpu-node-0@stand-in", "-addext", "subjectAltName=IP:127.0.0.1"]
    files = ["-days", "1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", *subject, *files],
        check=True,
        capture_output=True,
    )
    return cert, key


class PodsEndpoint:
    """The kubelet's /pods over HTTPS with its self-signed certificate (`certificate`): the
    node's pods to the one token it was told to admit."""

    def __init__(self, kubelet: StandInKubelet, token: str, directory: Path) -> None:
        self.token = token
        self.requests: list[str] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                endpoint.requests.append(self.path)
                if self.headers.get("Authorization") != f"Bearer {endpoint.token}":
                    self._answer(401, {"kind": "Status", "message": "Unauthorized"})
                elif self.path != "/pods":
                    self._answer(404, {"kind": "Status", "message": "not found"})
                else:
                    items = [p.api_object() for p in kubelet.pods.values()]
                    self._answer(200, {"kind": "PodList", "apiVersion": "v1", "items": items})

            def _answer(self, status: int, body: dict[str, object]) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.certificate, key = self_signed_certificate(directory)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.certificate, key)
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/pods"


@contextmanager
def pods_endpoint(kubelet: StandInKubelet, token: str, directory: Path) -> Iterator[PodsEndpoint]:
    endpoint = PodsEndpoint(kubelet, token, directory)
    thread = threading.Thread(target=endpoint.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        endpoint.server.shutdown()
        endpoint.server.server_close()


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
