"""A real Prometheus 2.42 for the session, scraping every second, and exporters it scrapes.

deploy/local/infra/prometheus-up.sh starts a private Prometheus for the session (its own
directory and a free port, so pausing it disturbs no one); a Prometheus that cannot start
skips the tests that need it, and fails them when CI=true. Exporters (the heartbeat and a
GPU utilisation gauge, each its own job) are registered through file_sd files ahead of the
tests that take them."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from observer.clock import SystemClock
from observer.metrics import Heartbeat
from tests import components
from tests.support.net import free_port

REPO = Path(__file__).resolve().parents[2]
UP = REPO / "deploy" / "local" / "infra" / "prometheus-up.sh"
DOWN = REPO / "deploy" / "local" / "infra" / "prometheus-down.sh"
SCRAPE_INTERVAL_SECONDS = 1.0
SCRAPE_TIMEOUT_SECONDS = 0.5
UTILIZATION = "observer_gpu_utilization_ratio"


@dataclass
class Prometheus:
    url: str
    directory: Path

    @property
    def pid(self) -> int:
        return int((self.directory / "run" / "prometheus.pid").read_text())


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    components.require("prometheus")
    directory = tmp_path_factory.mktemp("prometheus")
    env = {
        **os.environ,
        "PROM_DIR": str(directory),
        "PROM_PORT": str(free_port()),
        "PROM_SCRAPE_INTERVAL": f"{SCRAPE_INTERVAL_SECONDS:g}s",
        "PROM_SCRAPE_TIMEOUT": f"{SCRAPE_TIMEOUT_SECONDS * 1000:g}ms",
    }
    try:
        done = subprocess.run(
            ["bash", str(UP)], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        reason = None if done.returncode == 0 else (done.stdout + done.stderr).strip()[-500:]
    except subprocess.TimeoutExpired:
        reason = f"{UP.name} did not finish within 300 s"
    if reason is not None:
        components.unavailable(f"no local Prometheus: {reason}")
    yield Prometheus(url=done.stdout.strip().splitlines()[-1], directory=directory)
    subprocess.run(["bash", str(DOWN)], env=env, capture_output=True, timeout=30, check=False)


class GpuUtilization(Collector):
    """One GPU's utilisation: a new value at every scrape, never busy, unless frozen."""

    def __init__(self, uuid: str) -> None:
        self.uuid = uuid
        self.frozen: float | None = None
        self._scrapes = 0

    def collect(self) -> Iterator[Metric]:
        self._scrapes += 1
        value = self.frozen if self.frozen is not None else (self._scrapes % 5) / 10
        family = GaugeMetricFamily(UTILIZATION, "test", labels=["gpu", "uuid"])
        family.add_metric(["0", self.uuid], value)
        yield family


class Exporter:
    """What Prometheus scrapes: the heartbeat and one GPU, on a fixed port, that can stop
    answering, answer slowly, and come back."""

    def __init__(self, job: str, targets_dir: Path) -> None:
        self.job = job
        self.port = free_port()
        self.registry = CollectorRegistry()
        Heartbeat(self.registry, SystemClock())
        self.gpu = GpuUtilization(f"GPU-{job}")
        self.registry.register(self.gpu)
        self.delay_seconds = 0.0
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._sd_file = targets_dir / f"{job}.json"
        self.start()
        tmp = self._sd_file.with_suffix(".tmp")
        tmp.write_text(
            json.dumps([{"targets": [f"127.0.0.1:{self.port}"], "labels": {"job": job}}])
        )
        tmp.rename(self._sd_file)  # file_sd must never read half a file

    def start(self) -> None:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if exporter._closing.wait(exporter.delay_seconds):
                    return
                body = generate_latest(exporter.registry)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # Prometheus gave up on a slow scrape: what the test wants

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
        self._server = None

    def close(self) -> None:
        self._sd_file.unlink(missing_ok=True)
        self._closing.set()
        if self._server is not None:
            self.stop()


class Exporters:
    """Exporters registered ahead of the tests that take them: Prometheus applies new
    targets at most every 5 s, which registering one per test would pay every time."""

    PREPARED = 8

    def __init__(self, targets_dir: Path) -> None:
        self._targets_dir = targets_dir
        self._made = 0
        self._spare = [self._new() for _ in range(self.PREPARED)]
        self._taken: list[Exporter] = []

    def _new(self) -> Exporter:
        self._made += 1
        return Exporter(f"exporter-{self._made}", self._targets_dir)

    def take(self) -> Exporter:
        exporter = self._spare.pop() if self._spare else self._new()
        self._taken.append(exporter)
        return exporter

    def close(self) -> None:
        for exporter in self._spare + self._taken:
            exporter.close()


@pytest.fixture(scope="session")
def exporters(prometheus: Prometheus) -> Iterator[Exporters]:
    pool = Exporters(prometheus.directory / "targets")
    yield pool
    pool.close()
