"""The HTTP surface of the agent and the controller: /metrics for Prometheus, /healthz for
the kubelet, /v1/snapshot for whoever reads the process's state, and optionally a second port
without /v1/snapshot (the agent's metrics_port), which a NetworkPolicy can open to Prometheus
alone. Standard library server: three read-only routes need nothing more."""

from __future__ import annotations

import errno
import gzip
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder, gzip_accepted

from observer.errors import ListenAddressError, PortInUseError

Health = Callable[[], tuple[bool, dict[str, Any]]]
Snapshot = Callable[[], dict[str, Any] | None]


def serve(
    host: str, port: int, registry: CollectorRegistry, health: Health, snapshot: Snapshot | None
) -> ThreadingHTTPServer:
    """Start serving on a daemon thread; the caller shuts the returned server down. Raises
    PortInUseError when another process holds the port, ListenAddressError when `host` is not
    an address of this machine. `snapshot` None: no /v1/snapshot route on this port."""

    class Handler(BaseHTTPRequestHandler):
        def handle(self) -> None:
            try:
                super().handle()
            except ConnectionError:
                # The client hung up first (a probe past its timeout): nobody to answer, and
                # nothing wrong here to print a traceback about.
                self.close_connection = True

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                encode, content_type = choose_encoder(self.headers.get("Accept", ""))
                exposition = encode(registry)
                if gzip_accepted(self.headers.get("Accept-Encoding", "")):
                    self._send(200, content_type, gzip.compress(exposition), encoding="gzip")
                else:
                    self._send(200, content_type, exposition)
            elif path == "/healthz":
                ok, body = health()
                self._json(200 if ok else 503, body)
            elif path == "/v1/snapshot" and snapshot is not None:
                snap = snapshot()
                if snap is None:
                    self._json(503, {"error": "no tick has completed yet"})
                else:
                    self._json(200, snap)
            else:
                self._json(404, {"error": f"no route {path}"})

        def _json(self, status: int, body: dict[str, Any]) -> None:
            self._send(status, "application/json", json.dumps(body).encode())

        def _send(
            self, status: int, content_type: str, body: bytes, encoding: str | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if encoding is not None:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None  # scrapes every few seconds would drown the structured log

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(host, port) from None
        if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
            raise ListenAddressError(host, exc.strerror or str(exc)) from None
        raise
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


@contextmanager
def serving(
    host: str,
    port: int,
    registry: CollectorRegistry,
    health: Health,
    snapshot: Snapshot,
    on_listening: Callable[[int], object] | None = None,
    metrics_port: int | None = None,
) -> Iterator[int]:
    """Serve for the duration of the block, yielding the bound port (port 0 picks one), and
    with `metrics_port` /metrics and /healthz alone on that port too; each server is shut down
    and its socket closed on the way out. The served registry also gets this process's own
    process_* and python_* metrics: it is the process that is scraped."""
    with ExitStack() as servers:
        server = servers.enter_context(_running(serve(host, port, registry, health, snapshot)))
        if metrics_port is not None:
            servers.enter_context(_running(serve(host, metrics_port, registry, health, None)))
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        bound = int(server.server_address[1])
        if on_listening is not None:
            on_listening(bound)
        yield bound


@contextmanager
def _running(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
