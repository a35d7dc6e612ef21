"""The monitoring checker against a real Prometheus 2.42 scraping every second (conftest.py
starts it). Each test takes its own exporter (the heartbeat and a GPU utilisation gauge, its
own job) and breaks the pipeline the way production does: the target stops answering,
Prometheus freezes, the exporter gets slower than the scrape timeout, the exported value
freezes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from observer.clock import SystemClock
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding, TargetState
from observer.metrics import MonitoringMetrics
from observer.monitoring.base import MonitoringError, PrometheusUnreachableError, selector
from observer.monitoring.checker import (
    BusyProbe,
    CheckResult,
    FlatlineWatch,
    MonitoringChecker,
)
from observer.monitoring.prometheus import PrometheusHttp
from observer.settings.detectors import MonitoringLagSettings
from tests.monitoring.conftest import (
    SCRAPE_INTERVAL_SECONDS,
    SCRAPE_TIMEOUT_SECONDS,
    UTILIZATION,
    Exporter,
    Exporters,
    Prometheus,
)
from tests.support.net import free_port

pytestmark = pytest.mark.prometheus

POLL_SECONDS = 0.25


@dataclass
class Watch:
    """The checker as the controller runs it: check, feed the tracker, keep what changed."""

    checker: MonitoringChecker
    registry: CollectorRegistry
    tracker: ConditionTracker = field(default_factory=ConditionTracker)
    changes: list[Finding] = field(default_factory=list)
    last: CheckResult | None = None

    def check(self, **watched: Any) -> CheckResult:
        """A watched input given as a function is read at each check, as the controller
        reads the agents' latest readings."""
        inputs = {name: w() if callable(w) else w for name, w in watched.items()}
        self.last = self.checker.check(**inputs)
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
    """The agent's readings, read 0.3 s apart until a scrape and a half ago: within
    the stretch the flat-line window shows in Prometheus."""
    job = setup.exporter.job
    newest = SystemClock().now() - timedelta(seconds=1.5 * SCRAPE_INTERVAL_SECONDS)
    readings = [
        (newest - timedelta(seconds=0.3 * i), value)
        for i, value in enumerate(reversed(agent_values))
    ][::-1]
    return FlatlineWatch(f"{job}/gpu0", UTILIZATION, {"job": job}, readings)


# --- normal scraping ------------------------------------------------------------------------


def test_normal_scraping_shows_lag_within_a_scrape_interval_and_no_condition(
    setup: Setup,
) -> None:
    watch = setup.watch

    def flat() -> list[FlatlineWatch]:
        return [gpu_watch(setup, [0.1, 0.5, 0.9])]

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

    def agent() -> list[FlatlineWatch]:
        return [gpu_watch(setup, [0.12, 0.55, 0.91, 0.34])]

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
