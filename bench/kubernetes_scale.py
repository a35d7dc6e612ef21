"""The Kubernetes backend's scheduler snapshot against a cluster of `--nodes` nodes and 20 pods
a node: what it asks of the API server and what it costs the controller, in steady state.

A stand-in API server, in a process of its own (standard-library HTTP/1.1), speaks the
protocol the informers use: lists in pages (`limit`/`continue`) at a resourceVersion, watches
from a version as chunked streams of JSON lines with bookmarks every 10 s of quiet, 410 Gone
for a version older than it keeps; the tenants' Jobs, Warning events and ResourceQuotas are
kinds with no objects, listed and watched the same way, and the queue systems' groups answer
404 (none installed). Each pod is a realistic document (~4 KB: labels,
owner, managedFields, a container with its environment, conditions, container state). Pods
start and end at `--churn` pods a second (default: each pod living about an hour): a start is
ADDED, scheduled and running (three events), an end is Succeeded and DELETED (two).

The real KubernetesBackend, in this process, takes a snapshot every `--interval` seconds for
`--seconds` after its first (which lists the world: `relist_seconds`). Steady state is what
follows: full lists (a list's first page) and requests a minute, bytes the server sent a
minute, this process's CPU over the window as a share of one core and its RSS at the end;
snapshot age is the time from the server's write of the newest version the snapshot's pods
reflected to the snapshot's end (p50, p99).

Prints one JSON line.

    .venv/bin/python bench/kubernetes_scale.py [--nodes 1000] [--seconds 120] [--interval 30]
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing
import random
import statistics
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse
from urllib.request import urlopen

from observer.backends.kubernetes.backend import KubernetesBackend
from observer.clock import SystemClock
from observer.settings.controller import KubernetesSettings

TENANTS = ("team-a", "team-b")
GPU = "nvidia.com/gpu"
BOOKMARK_SECONDS = 10.0
KEPT_VERSIONS = 200_000  # the server's history: older versions are 410 Gone


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(index: int) -> dict[str, Any]:
    name = f"gpu-node-{index:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-uid-{index}",
            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H200"},
            "creationTimestamp": "2025-01-01T00:00:00Z",
        },
        "spec": {"providerID": f"aws:///{name}"},
        "status": {
            "capacity": {GPU: "8", "cpu": "192", "memory": "2Ti"},
            "allocatable": {GPU: "8", "cpu": "190", "memory": "1900Gi"},
            "conditions": [
                {"type": t, "status": s, "reason": r, "lastHeartbeatTime": "2025-01-01T00:00:00Z"}
                for t, s, r in (
                    ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                    ("Ready", "True", "KubeletReady"),
                )
            ],
        },
    }


def _pod(serial: int, nodes: int, phase: str) -> dict[str, Any]:
    namespace = TENANTS[serial % 2] if serial % 5 == 0 else f"other-{serial % 40}"
    name = f"worker-{serial}"
    started = _stamp()
    scheduled = phase != "Pending-unscheduled"
    state: dict[str, Any] = (
        {"running": {"startedAt": started}}
        if phase == "Running"
        else {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started}}
        if phase == "Succeeded"
        else {"waiting": {"reason": "ContainerCreating"}}
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"pod-uid-{serial}",
            "labels": {"app": "trainer", "batch.kubernetes.io/job-name": name, "team": namespace},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 600},
            "creationTimestamp": started,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"rs-{serial // 8}",
                    "uid": f"rs-uid-{serial // 8}",
                    "controller": True,
                }
            ],
            "managedFields": [
                {
                    "manager": m,
                    "operation": "Update",
                    "time": started,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {"f:app": {}, "f:team": {}}},
                        "f:spec": {"f:containers": {'k:{"name":"main"}': {}}},
                    },
                }
                for m in ("kube-controller-manager", "kubelet", "kube-scheduler")
            ],
        },
        "spec": {
            "nodeName": f"gpu-node-{serial % nodes:05d}" if scheduled else None,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/ml/trainer:2025.01",
                    "command": ["python", "-m", "trainer", "--config", "/etc/trainer/config.yaml"],
                    "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(12)],
                    "resources": {
                        "limits": {GPU: "1", "cpu": "8", "memory": "64Gi"},
                        "requests": {GPU: "1", "cpu": "8", "memory": "64Gi"},
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "restartPolicy": "Never",
            "priorityClassName": "batch",
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {
            "phase": "Pending" if phase.startswith("Pending") else phase,
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": started}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": phase == "Running",
                    "restartCount": 0,
                    "image": "registry.example.com/ml/trainer:2025.01",
                    "state": state,
                }
            ],
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1",
        },
    }


class _Cluster:
    """The server's objects (kept serialized), its versions and its history."""

    def __init__(self, nodes: int) -> None:
        self.lock = threading.Condition()
        self.version = 1
        self.nodes = {
            f"/{n['metadata']['name']}": json.dumps(n).encode() for n in map(_node, range(nodes))
        }
        self.node_count = nodes
        self.serial = 0
        self.pods: dict[str, bytes] = {}
        for _ in range(nodes * 20):
            self._add(_pod(self._next(), nodes, "Running"), event=False)
        self.history: list[tuple[int, str, bytes]] = []  # (version, plural, event line)
        self.written_at: dict[int, float] = {}
        self.requests = self.full_lists = self.bytes_sent = 0

    def _next(self) -> int:
        self.serial += 1
        return self.serial

    def _add(self, pod: dict[str, Any], event: bool, kind: str = "ADDED") -> None:
        meta = pod["metadata"]
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        key = f"{meta['namespace']}/{meta['name']}"
        body = json.dumps(pod).encode()
        if kind == "DELETED":
            self.pods.pop(key, None)
        else:
            self.pods[key] = body
        if event:
            line = b'{"type":"' + kind.encode() + b'","object":' + body + b"}\n"
            self.history.append((self.version, "pods", line))
            self.written_at[self.version] = time.time()
            del self.history[:-KEPT_VERSIONS]

    def churn(self, per_second: float) -> None:
        """Pods start and end: each a start (three events) and an end (two)."""
        live: list[int] = list(range(1, self.serial + 1))
        while True:
            time.sleep(1 / per_second)
            with self.lock:
                serial = self._next()
                for phase, kind in (
                    ("Pending-unscheduled", "ADDED"),
                    ("Pending", "MODIFIED"),
                    ("Running", "MODIFIED"),
                ):
                    self._add(_pod(serial, self.node_count, phase), True, kind)
                live.append(serial)
                ended = live.pop(random.randrange(len(live)))
                for phase, kind in (("Succeeded", "MODIFIED"), ("Succeeded", "DELETED")):
                    self._add(_pod(ended, self.node_count, phase), True, kind)
                self.lock.notify_all()


def _handler(cluster: _Cluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            cluster.bytes_sent += len(body)

        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/stats":
                versions = json.loads(query.get("versions", "[]"))
                self._send(
                    200,
                    json.dumps(
                        {
                            "requests": cluster.requests,
                            "full_lists": cluster.full_lists,
                            "bytes": cluster.bytes_sent,
                            "version": cluster.version,
                            "written_at": {v: cluster.written_at.get(int(v)) for v in versions},
                        }
                    ).encode(),
                )
                return
            cluster.requests += 1
            if url.path.startswith(("/apis/kueue", "/apis/scheduling.volcano")):
                self._send(404, b'{"kind":"Status","code":404,"reason":"NotFound"}')
                return
            plural = url.path.rsplit("/", 1)[1]  # nodes, pods; jobs, events, ...: none
            if query.get("watch") == "true":
                self._watch(plural, query)
            else:
                self._list(plural, query)

        def _list(self, plural: str, query: dict[str, str]) -> None:
            limit = int(query.get("limit") or 0)
            start = int(query.get("continue") or 0)
            with cluster.lock:
                objects = {"nodes": cluster.nodes, "pods": cluster.pods}.get(plural, {})
                keys = sorted(objects)
                end = start + limit if limit else len(keys)
                items = [objects[k] for k in keys[start:end]]
                version = cluster.version
            if not start:
                cluster.full_lists += 1
            more = f',"continue":"{end}"' if end < len(keys) else ""
            head = f'{{"kind":"List","metadata":{{"resourceVersion":"{version}"{more}}},"items":['
            self._send(200, head.encode() + b",".join(items) + b"]}")

        def _watch(self, plural: str, query: dict[str, str]) -> None:
            version = int(query.get("resourceVersion") or 0)
            deadline = time.monotonic() + float(query.get("timeoutSeconds") or 300)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            with cluster.lock:
                oldest = cluster.history[0][0] if cluster.history else cluster.version
            if cluster.history and version < oldest - 1:
                gone = (
                    b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}\n'
                )
                self._chunk(gone)
                self._chunk(b"")
                return
            while time.monotonic() < deadline:
                with cluster.lock:
                    at = bisect.bisect_right(cluster.history, version, key=lambda e: e[0])
                    pending = cluster.history[at:]
                    if not pending:
                        cluster.lock.wait(BOOKMARK_SECONDS)
                        at = bisect.bisect_right(cluster.history, version, key=lambda e: e[0])
                        pending = cluster.history[at:]
                        if not pending:
                            version = cluster.version
                            meta = f'{{"metadata":{{"resourceVersion":"{version}"}}}}'
                            bookmark = f'{{"type":"BOOKMARK","object":{meta}}}\n'.encode()
                            pending = [(version, plural, bookmark)]
                lines = [line for _, kind, line in pending if kind == plural]
                version = pending[-1][0]
                if lines:
                    try:
                        self._chunk(b"".join(lines))
                    except OSError:
                        return
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            cluster.bytes_sent += len(data)

    return Handler


def _serve(nodes: int, churn: float, port_out: Any) -> None:
    cluster = _Cluster(nodes)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cluster))
    server.daemon_threads = True
    threading.Thread(target=cluster.churn, args=(churn,), daemon=True).start()
    port_out.send(server.server_address[1])
    server.serve_forever()


def _stats(url: str, versions: list[int] | None = None) -> dict[str, Any]:
    query = f"?versions={json.dumps(versions or [])}"
    with urlopen(f"{url}/stats{query.replace(' ', '')}", timeout=30) as answer:
        stats: dict[str, Any] = json.loads(answer.read())
    return stats


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--churn", type=float, help="pods started (and ended) a second")
    args = parser.parse_args()
    pods = args.nodes * 20
    churn = args.churn or pods / 3600

    receive, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(args.nodes, churn, send), daemon=True
    )
    server.start()
    url = f"http://127.0.0.1:{receive.recv()}"
    settings = KubernetesSettings(host=url, namespaces=TENANTS, request_timeout_seconds=120)
    with KubernetesBackend(settings, SystemClock()) as backend:
        began = time.perf_counter()
        backend.snapshot()
        relist_seconds = time.perf_counter() - began
        before, cpu, wall = _stats(url), time.process_time(), time.perf_counter()
        taken: list[tuple[float, int]] = []  # (end of the snapshot, the pods' version in it)
        while time.perf_counter() - wall < args.seconds:
            time.sleep(max(0.0, args.interval - (time.perf_counter() - wall) % args.interval))
            watched = next(v for v in backend.watched() if v.what == "pods in all namespaces")
            version = int(watched.version or 0)
            backend.snapshot()
            taken.append((time.time(), version))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rss = _rss_bytes()
        after = _stats(url, [version for _, version in taken])
    server.kill()
    written = {int(v): at for v, at in after["written_at"].items() if at is not None}
    ages = [end - written[version] for end, version in taken if version in written]
    minutes = wall / 60
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "pods": pods,
                "churn_pods_per_second": round(churn, 2),
                "seconds": round(wall, 1),
                "snapshots": len(taken),
                "steady": {
                    "full_lists_per_minute": (after["full_lists"] - before["full_lists"]) / minutes,
                    "requests_per_minute": round(
                        (after["requests"] - before["requests"]) / minutes, 1
                    ),
                    "bytes_per_minute": round((after["bytes"] - before["bytes"]) / minutes),
                },
                "controller": {
                    "cpu_percent_of_one_core": round(100 * cpu / wall, 2),
                    "rss_bytes": rss,
                },
                "snapshot_age_seconds": {
                    "p50": round(statistics.median(ages), 3) if ages else None,
                    "p99": round(_percentile(ages, 0.99), 3) if ages else None,
                },
                "relist_seconds": round(relist_seconds, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
