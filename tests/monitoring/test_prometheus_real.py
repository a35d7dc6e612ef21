"""The monitoring checker against a real Prometheus 2.42 scraping every second.

deploy/local/infra/prometheus-up.sh starts a private Prometheus for the session (its own
directory and a free port, so pausing it disturbs no one); a Prometheus that cannot start
skips these tests, and fails them when CI=true. Each test runs its own exporter (the
heartbeat and a GPU utilisation gauge) as its own job, registered through a file_sd file,
and breaks the pipeline the way production does: the target stops answering, Prometheus
freezes, the exporter gets slower than the scrape timeout, the exported value freezes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from observer.clock import SystemClock
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding
from observer.metrics import Heartbeat, MonitoringMetrics
from observer.monitoring.checker import (
    BusyProbe,
    CheckResult,
    FlatlineWatch,
    MonitoringChecker,
)
from observer.monitoring.prometheus import (
    MonitoringError,
    PrometheusHttp,
    PrometheusUnreachableError,
    TargetState,
    selector,
)
from observer.settings import MonitoringLagSettings

REPO = Path(__file__).resolve().parents[2]
UP = REPO / "deploy" / "local" / "infra" / "prometheus-up.sh"
DOWN = REPO / "deploy" / "local" / "infra" / "prometheus-down.sh"
SCRAPE_INTERVAL_SECONDS = 1.0
SCRAPE_TIMEOUT_SECONDS = 0.5
POLL_SECONDS = 0.25
UTILIZATION = "observer_gpu_utilization_ratio"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Prometheus:
    url: str
    directory: Path

    @property
    def pid(self) -> int:
        return int((self.directory / "run" / "prometheus.pid").read_text())


@pytest.fixture(scope="session")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
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
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(f"no local Prometheus: {reason} (CI=true makes this fail)")
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


@dataclass
class Watch:
    """The checker as the controller runs it: check, feed the tracker, keep what changed."""

    checker: MonitoringChecker
    registry: CollectorRegistry
    tracker: ConditionTracker = field(default_factory=ConditionTracker)
    changes: list[Finding] = field(default_factory=list)
    last: CheckResult | None = None

    def check(self, **watched: Any) -> CheckResult:
        self.last = self.checker.check(**watched)
        self.changes += self.tracker.update(
            self.last.symptoms, self.last.view.now, self.last.covers
        )
        return self.last

    def until(
        self, done: Callable[[CheckResult], bool], within_seconds: float, **watched: Any
    ) -> CheckResult:
        deadline = time.monotonic() + within_seconds
        while not done(result := self.check(**watched)):
            if time.monotonic() > deadline:
                pytest.fail(
                    f"not there within {within_seconds} s; last symptoms: "
                    f"{[s.summary for s in result.symptoms]}, errors: {result.view.read_errors}"
                )
            time.sleep(POLL_SECONDS)
        return result

    def open_checks(self) -> set[str]:
        return {f.subject.get("check", f.detector) for f in self.tracker.open_findings()}

    def current(self, check: str) -> Finding:
        """The open condition of `check`, with the evidence of the latest check."""
        return next(f for f in self.tracker.open_findings() if f.subject.get("check") == check)

    def lag(self, check: str) -> float | None:
        return self.registry.get_sample_value("observer_monitoring_lag_seconds", {"check": check})


@dataclass
class Setup:
    prometheus: Prometheus
    exporter: Exporter
    api: PrometheusHttp
    watch: Watch


# Limits a few scrape intervals wide: conditions open and close within seconds. Hold 0 and
# every tick checked: each break must show on the first check that can see it.
RULES = dict(
    heartbeat_max_lag_seconds=3.0,
    series_max_age_seconds=3.0,
    scrape_max_age_seconds=3.0,
    hold_seconds=0.0,
    flatline_window_seconds=4.0,
    busy_lag_max_seconds=3.0,
)


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


@pytest.fixture
def setup(prometheus: Prometheus, exporters: Exporters) -> Iterator[Setup]:
    exporter = exporters.take()
    job = exporter.job
    api = PrometheusHttp(prometheus.url, timeout_seconds=1.0)
    rules = MonitoringLagSettings(
        **RULES,
        freshness_series=(selector(UTILIZATION, {"job": job}),),
        scrape_jobs=(job,),
    )
    registry = CollectorRegistry()
    checker = MonitoringChecker(
        api, SystemClock(), rules, MonitoringMetrics(registry), {"job": job}
    )
    watch = Watch(checker, registry)
    try:
        # Until discovered and scraped, the heartbeat and the GPU series are missing, as
        # they should be.
        watch.until(lambda r: not r.symptoms and not watch.open_checks(), within_seconds=15)
        watch.changes.clear()
        yield Setup(prometheus, exporter, api, watch)
    finally:
        os.kill(prometheus.pid, signal.SIGCONT)
        exporter.close()
        api.close()


def gpu_watch(setup: Setup, agent_values: list[float]) -> FlatlineWatch:
    job = setup.exporter.job
    return FlatlineWatch(f"{job}/gpu0", selector(UTILIZATION, {"job": job}), agent_values)


# --- normal scraping ------------------------------------------------------------------------


def test_normal_scraping_shows_lag_within_a_scrape_interval_and_no_condition(
    setup: Setup,
) -> None:
    watch = setup.watch
    flat = [gpu_watch(setup, [0.1, 0.5, 0.9])]
    time.sleep(2 * SCRAPE_INTERVAL_SECONDS)  # some history for the flat-line window

    lags = []
    for _ in range(8):
        result = watch.check(flatlines=flat)
        assert result.symptoms == []
        lags.append(watch.lag("heartbeat"))
        time.sleep(POLL_SECONDS)

    slack = 0.5
    assert all(0 <= lag <= 2 * SCRAPE_INTERVAL_SECONDS + slack for lag in lags if lag), lags
    assert None not in lags
    assert 0 <= (watch.lag("freshness") or -1) <= 2 * SCRAPE_INTERVAL_SECONDS + slack
    assert 0 <= (watch.lag("scrape") or -1) <= 2 * SCRAPE_INTERVAL_SECONDS + slack
    [target] = [t for t in result.view.targets if t.job == setup.exporter.job]
    assert target.health is TargetState.UP
    assert target.scrape_interval_seconds == SCRAPE_INTERVAL_SECONDS
    assert target.scrape_timeout_seconds == SCRAPE_TIMEOUT_SECONDS
    assert watch.changes == []


def test_a_gpu_busy_probe_shows_in_prometheus_within_a_scrape_interval(setup: Setup) -> None:
    started = SystemClock().now()
    setup.exporter.gpu.frozen = 0.97  # the probe's workload starts: the GPU is busy
    probe = BusyProbe("run-busy-1", setup.exporter.gpu.uuid, started)

    result = setup.watch.until(
        lambda r: r.view.busy_probes[0].first_busy_at is not None,
        within_seconds=5,
        busy_probes=[probe],
    )

    lag = setup.watch.lag("gpu_busy_lag")
    assert lag is not None and 0 <= lag <= 2 * SCRAPE_INTERVAL_SECONDS
    assert result.symptoms == []


# --- breaks and recoveries ------------------------------------------------------------------


def test_a_target_that_stops_answering_opens_scrape_and_heartbeat_conditions_until_it_is_back(
    setup: Setup,
) -> None:
    watch = setup.watch
    setup.exporter.stop()

    watch.until(lambda r: {"scrape", "heartbeat"} <= watch.open_checks(), within_seconds=10)
    # The scrape that was in flight may have failed otherwise (EOF); the next ones are refused.
    watch.until(
        lambda r: "connection refused" in watch.current("scrape").evidence["last_error"],
        within_seconds=3,
    )
    scrape = watch.current("scrape")
    assert scrape.evidence["health"] == "down"
    assert scrape.subject["instance"] == f"127.0.0.1:{setup.exporter.port}"

    setup.exporter.start()
    watch.until(lambda r: not watch.open_checks(), within_seconds=10)
    assert {f.subject.get("check") for f in watch.changes if not f.is_open} >= {
        "scrape",
        "heartbeat",
    }


def test_a_paused_prometheus_is_unreachable_not_healthy_and_recovers_after_sigcont(
    setup: Setup,
) -> None:
    watch = setup.watch
    os.kill(setup.prometheus.pid, signal.SIGSTOP)
    try:
        result = watch.check()
        assert watch.open_checks() == {"prometheus_unreachable"}
        assert "no answer" in result.symptoms[0].summary
        assert set(result.view.read_errors) == {
            "heartbeat",
            "freshness",
            "scrape",
            "flatline",
            "gpu_busy_lag",
        }
        # Blind: no lag figure rather than the last one, and each unread check counted.
        assert watch.lag("heartbeat") is None
        assert (
            watch.registry.get_sample_value(
                "observer_monitoring_checks_errors_total", {"check": "scrape"}
            )
            == 1
        )
    finally:
        os.kill(setup.prometheus.pid, signal.SIGCONT)

    watch.until(lambda r: not watch.open_checks() and not r.symptoms, within_seconds=10)
    assert [(f.detector, f.is_open) for f in watch.changes if f.detector != "monitoring_lag"] == [
        ("prometheus_unreachable", True),
        ("prometheus_unreachable", False),
    ]


def test_an_exporter_slower_than_the_scrape_timeout_opens_a_scrape_condition_until_fast(
    setup: Setup,
) -> None:
    watch = setup.watch
    setup.exporter.delay_seconds = SCRAPE_TIMEOUT_SECONDS + 0.5

    watch.until(lambda r: "scrape" in watch.open_checks(), within_seconds=10)
    scrape = watch.current("scrape")
    assert "context deadline exceeded" in scrape.evidence["last_error"]
    assert scrape.evidence["scrape_timeout_seconds"] == SCRAPE_TIMEOUT_SECONDS

    setup.exporter.delay_seconds = 0.0
    watch.until(lambda r: not watch.open_checks(), within_seconds=10)


def test_a_value_frozen_in_prometheus_while_the_agent_reads_it_changing_is_a_flat_line(
    setup: Setup,
) -> None:
    watch = setup.watch
    agent = [gpu_watch(setup, [0.12, 0.55, 0.91, 0.34])]
    setup.exporter.gpu.frozen = 0.42

    watch.until(lambda r: "flatline" in watch.open_checks(), within_seconds=10, flatlines=agent)
    flat = watch.current("flatline")
    assert flat.evidence["prometheus_value"] == 0.42
    assert flat.evidence["agent_distinct_values"] == 4

    setup.exporter.gpu.frozen = None
    watch.until(lambda r: not watch.open_checks(), within_seconds=10, flatlines=agent)


# --- the boundary's errors ------------------------------------------------------------------


def test_a_bad_query_is_an_error_with_prometheus_own_words_and_spoils_only_its_check(
    setup: Setup,
) -> None:
    with pytest.raises(MonitoringError, match="parse error") as raised:
        setup.api.query("rate(up)")
    assert not isinstance(raised.value, PrometheusUnreachableError)

    rules = MonitoringLagSettings(**RULES, freshness_series=("up{",))
    checker = MonitoringChecker(
        setup.api,
        SystemClock(),
        rules,
        MonitoringMetrics(CollectorRegistry()),
        {"job": setup.exporter.job},
    )
    result = checker.check()
    assert list(result.view.read_errors) == ["freshness"]
    assert "bad_data" in result.view.read_errors["freshness"]
    assert result.view.heartbeat is not None
    assert result.view.targets


def test_nothing_listening_is_unreachable() -> None:
    api = PrometheusHttp(f"http://127.0.0.1:{free_port()}", timeout_seconds=1.0)
    with pytest.raises(PrometheusUnreachableError):
        api.targets()
    api.close()


def test_a_prometheus_still_starting_is_unreachable_not_a_bad_query() -> None:
    # What Prometheus 2.42 answers on its API before its storage is ready.
    starting = httpx.MockTransport(lambda request: httpx.Response(503, text="Service Unavailable"))
    api = PrometheusHttp("http://prometheus:9090", 1.0, client=httpx.Client(transport=starting))

    with pytest.raises(PrometheusUnreachableError, match="HTTP 503"):
        api.query("up")


def test_an_instant_query_at_a_past_time_sees_the_heartbeat_as_it_was_then(setup: Setup) -> None:
    beat = selector("observer_heartbeat_timestamp_seconds", {"job": setup.exporter.job})
    time.sleep(2 * SCRAPE_INTERVAL_SECONDS)
    then = SystemClock().now() - timedelta(seconds=SCRAPE_INTERVAL_SECONDS)

    [sample] = setup.api.query(beat, at=then)

    assert abs((sample.evaluated_at - then).total_seconds()) <= 0.001  # sent in milliseconds
    assert then.timestamp() - 2 * SCRAPE_INTERVAL_SECONDS <= sample.value <= then.timestamp()
