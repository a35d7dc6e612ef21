"""`observer probe serve`: the inference-service stand-in. `/healthz` answers 503 until the
warm-up is over, then 200 (the readiness endpoint a Deployment's probe or the controller
polls); `/infer` answers after a fixed latency, as a model of known cost would. `infer` is
the other end: one request, as the controller's inference watch sends it."""

from __future__ import annotations

import errno
import http.client
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from observer.errors import PortInUseError


@dataclass(frozen=True, slots=True)
class Service:
    host: str
    port: int
    latency_seconds: float
    warmup_seconds: float
    seconds: float  # 0: until stopped


@dataclass(frozen=True, slots=True)
class Answer:
    """One /infer request: the HTTP status (None: no answer, `error` says why) and how long it
    took, on the caller's own clock."""

    status: int | None
    seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200


def infer(address: str, timeout_seconds: float) -> Answer:
    """POST /infer to `address` ("host:port") and read the whole answer."""
    host, _, port = address.rpartition(":")
    began = time.perf_counter()
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout_seconds)
    try:
        connection.request(
            "POST", "/infer", body=b"{}", headers={"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        response.read()
        return Answer(response.status, time.perf_counter() - began)
    except (OSError, http.client.HTTPException) as exc:
        return Answer(None, time.perf_counter() - began, f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()


def start(service: Service) -> ThreadingHTTPServer:
    """Serve on a daemon thread; the caller shuts the server down."""
    ready_at = time.monotonic() + service.warmup_seconds

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/healthz":
                ready = time.monotonic() >= ready_at
                self._answer(200 if ready else 503, {"ready": ready})
            elif self.path.startswith("/infer"):
                self._infer()
            else:
                self._answer(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            if self.path.startswith("/infer"):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._infer()
            else:
                self._answer(404, {"error": f"no route {self.path}"})

        def _infer(self) -> None:
            if time.monotonic() < ready_at:
                self._answer(503, {"error": "warming up"})
                return
            time.sleep(service.latency_seconds)
            self._answer(200, {"latency_ms": service.latency_seconds * 1000})

        def _answer(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: a request per line would drown the job's log."""

    try:
        server = ThreadingHTTPServer((service.host, service.port), Handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(service.host, service.port) from None
        raise
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="probe-serve", daemon=True).start()
    return server


def serve(service: Service, stop: threading.Event) -> None:
    """Serve until `stop` is set or `service.seconds` have passed."""
    server = start(service)
    try:
        stop.wait(service.seconds or None)
    finally:
        server.shutdown()
        server.server_close()
