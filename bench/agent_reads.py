"""How long one read of every agent takes, one agent at a time against a bounded pool.

N real HTTP agents on this machine, each answering /v1/snapshot (the body of a real 8-GPU
agent's snapshot) after `--answer-ms` (an agent busy sampling), and `--hung` more that accept
the connection and never answer (a node under memory pressure): each of those costs the
whole-read deadline (controller.agent_read_timeout_seconds). The controller's HttpFleet reads
them all once with concurrency 1 (agents read one after another, as before) and with
controller.agent_read_concurrency's default; the wall time of each read is printed beside
the 15 s read cadence.

Prints one JSON line.

    .venv/bin/python bench/agent_reads.py [--agents 500] [--hung 4] [--answer-ms 20]
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry

from observer import codec
from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.clock import SystemClock
from observer.domain import NodeSnapshot
from observer.fleet.http import HttpFleet
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.metrics import AgentMetrics
from observer.ownership.fake import FakeHost
from observer.settings.controller import ControllerSettings
from observer.settings.detectors import NodeLeakSettings

READ_CADENCE_SECONDS = ControllerSettings().observe_interval_seconds
TIMEOUT_SECONDS = ControllerSettings().agent_read_timeout_seconds


def snapshot_body() -> bytes:
    """What a real agent with 8 busy GPUs serves."""
    clock = SystemClock()
    gpus = FakeGpuBackend([FakeGpu(f"GPU-bench-{i}") for i in range(8)], clock)
    host = FakeHost()
    metrics = AgentMetrics(CollectorRegistry())
    agent = NodeAgent(
        "bench",
        Sampler(gpus, clock, metrics, 60),
        Attributor(host, host),
        NodeLeakSettings(),
        clock,
        metrics,
    )
    for i, gpu in enumerate(gpus.gpus):
        gpu.processes[1000 + i] = 20 * GIB
    agent.tick()
    snap: NodeSnapshot | None = agent.snapshot()
    assert snap is not None
    return json.dumps(codec.snapshot_to_json(snap)).encode()


def answering(body: bytes, delay_seconds: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(delay_seconds)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@contextmanager
def hung() -> Iterator[str]:
    """Listens, so the connection is made, and never reads or answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def read_seconds(urls: list[str], concurrency: int) -> tuple[float, int]:
    fleet = HttpFleet(urls, read_timeout_seconds=TIMEOUT_SECONDS, concurrency=concurrency)
    began = time.monotonic()
    result = fleet.fetch_all(fleet.agents())
    elapsed = time.monotonic() - began
    return elapsed, sum(isinstance(r, NodeSnapshot) for r in result.values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=500)
    parser.add_argument("--hung", type=int, default=4)
    parser.add_argument("--answer-ms", type=float, default=20.0)
    args = parser.parse_args()
    body = snapshot_body()
    concurrency = ControllerSettings().agent_read_concurrency
    servers = [answering(body, args.answer_ms / 1000) for _ in range(args.agents)]
    with ExitStack() as stack:
        urls = [f"http://127.0.0.1:{server.server_address[1]}" for server in servers]
        urls += [stack.enter_context(hung()) for _ in range(args.hung)]
        reads = {}
        for label, n in (("one_at_a_time", 1), (f"concurrency_{concurrency}", concurrency)):
            seconds, read = read_seconds(urls, n)
            reads[label] = {
                "wall_seconds": round(seconds, 2),
                "agents_read": read,
                "within_cadence": seconds < READ_CADENCE_SECONDS,
            }
    with ThreadPoolExecutor(64) as pool:  # each stop waits up to its poll interval
        list(pool.map(ThreadingHTTPServer.shutdown, servers))
    for server in servers:
        server.server_close()
    print(
        json.dumps(
            {
                "agents": args.agents,
                "hung_agents": args.hung,
                "answer_ms": args.answer_ms,
                "snapshot_bytes": len(body),
                "timeout_seconds": TIMEOUT_SECONDS,
                "cadence_seconds": READ_CADENCE_SECONDS,
                "reads": reads,
            }
        )
    )


if __name__ == "__main__":
    main()
