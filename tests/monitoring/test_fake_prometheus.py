"""The scripted Prometheus breaks the way the real one does in tests/monitoring/
test_prometheus_real.py, on a manual clock: the checker reads lag near the scrape interval
while it keeps up, and the right condition for each break."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.domain import TargetState
from observer.metrics import HEARTBEAT_METRIC, MonitoringMetrics
from observer.monitoring.base import MonitoringError
from observer.monitoring.checker import CheckResult, FlatlineWatch, MonitoringChecker
from observer.monitoring.fake import Exposition, FakePrometheus
from observer.settings.detectors import MonitoringLagSettings

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
RULES = MonitoringLagSettings(freshness_series=('observer_gpu_up{job="agent"}',))


def heartbeat(at: datetime) -> Exposition:
    return [(HEARTBEAT_METRIC, {}, at.timestamp())]


def gpu_up(at: datetime) -> Exposition:
    return [("observer_gpu_up", {"uuid": "GPU-1"}, 1.0)]


class Pipeline:
    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.prometheus = FakePrometheus(self.clock, scrape_interval_seconds=30)
        self.observer = self.prometheus.add_target("observer", "c:9401", heartbeat)
        self.agent = self.prometheus.add_target("agent", "n1:9400", gpu_up)
        self.registry = CollectorRegistry()
        self.checker = MonitoringChecker(
            self.prometheus,
            self.clock,
            RULES,
            MonitoringMetrics(self.registry),
            {"job": "observer"},
        )

    def after(self, seconds: float) -> CheckResult:
        self.clock.advance(seconds)
        return self.checker.check()

    def checks(self, result: CheckResult) -> set[str]:
        return {s.subject.get("check", s.detector) for s in result.symptoms}

    def lag(self, check: str) -> float | None:
        return self.registry.get_sample_value("observer_monitoring_lag_seconds", {"check": check})


@pytest.fixture
def pipeline() -> Pipeline:
    return Pipeline()


def test_normal_scraping_shows_lag_within_a_scrape_interval(pipeline: Pipeline):
    for _ in range(20):
        assert pipeline.after(7).symptoms == []
        assert 0 <= (pipeline.lag("heartbeat") or -1) < 30
        assert 0 <= (pipeline.lag("freshness") or -1) < 30
        assert 0 <= (pipeline.lag("scrape") or -1) < 30


def test_late_ingestion_is_heartbeat_and_freshness_lag(pipeline: Pipeline):
    pipeline.prometheus.ingest_delay_seconds = 150
    result = pipeline.after(240)
    assert pipeline.checks(result) == {"heartbeat", "freshness"}
    assert 150 <= (pipeline.lag("heartbeat") or 0) < 180


def test_a_target_that_stops_answering_goes_down_and_its_series_stale(pipeline: Pipeline):
    pipeline.after(60)
    pipeline.agent.answering = False
    result = pipeline.after(30)
    [target] = [t for t in result.view.targets if t.job == "agent"]
    assert target.health is TargetState.DOWN and target.last_error == "connection refused"
    assert pipeline.checks(result) == {"scrape", "freshness"}
    assert result.view.freshness == {'observer_gpu_up{job="agent"}': []}

    pipeline.agent.answering = True
    assert pipeline.after(30).symptoms == []


def test_a_target_prometheus_stopped_scraping_ages(pipeline: Pipeline):
    pipeline.after(60)
    pipeline.observer.scraped = False
    result = pipeline.after(120)
    assert pipeline.checks(result) == {"heartbeat", "scrape"}
    assert (pipeline.lag("scrape") or 0) >= 120


def test_a_paused_prometheus_is_unreachable_and_scrapes_nothing_meanwhile(pipeline: Pipeline):
    pipeline.after(60)
    pipeline.prometheus.pause()
    result = pipeline.after(120)
    assert pipeline.checks(result) == {"prometheus_unreachable"}
    assert pipeline.lag("heartbeat") is None

    pipeline.prometheus.resume()
    result = pipeline.after(1)
    assert (pipeline.lag("heartbeat") or 0) >= 120  # the beat read back is from before


def test_a_frozen_series_repeats_its_last_value_and_thaws(pipeline: Pipeline):
    values = iter(range(1000))
    pipeline.prometheus.add_target(
        "gpu", "n2:9400", lambda at: [("util", {"uuid": "GPU-2"}, float(next(values)))]
    )
    pipeline.after(60)
    pipeline.prometheus.freeze({"uuid": "GPU-2"})
    pipeline.after(90)
    pipeline.prometheus.thaw({"uuid": "GPU-2"})
    pipeline.after(30)
    [series] = pipeline.prometheus.series('util{uuid="GPU-2"}', 300)
    assert [v for _, v in series.points] == [0, 1, 2, 2, 2, 2, 6]


def test_it_reads_only_what_the_checker_asks(pipeline: Pipeline):
    with pytest.raises(MonitoringError, match="bad_data"):
        pipeline.prometheus.query("rate(up[5m])")


def test_a_series_back_after_its_target_was_down_is_compared_over_the_stretch_it_covers(
    pipeline: Pipeline,
):
    # The GPU went busy (constant 0.97) while its exporter was down for longer than the
    # window: Prometheus has only the busy stretch, while the agent also read the moving
    # values before it. Not a flat line.
    busy_from = T0 + timedelta(seconds=300)
    target = pipeline.prometheus.add_target(
        "gpu",
        "n2:9400",
        lambda at: [("util", {"uuid": "GPU-2"}, 0.97 if at >= busy_from else at.minute / 60)],
    )
    pipeline.after(60)
    target.answering = False
    pipeline.after(360)
    target.answering = True
    pipeline.after(60)
    agent = [(T0 + timedelta(seconds=s), 0.97 if s >= 300 else s / 600) for s in range(0, 480, 10)]
    watch = FlatlineWatch("GPU-2", "util", {"uuid": "GPU-2"}, agent)

    result = pipeline.checker.check(flatlines=[watch])

    [reading] = result.view.flatlines
    assert list(reading.prometheus_values) == [0.97, 0.97]
    assert set(reading.agent_values) == {0.97}
    assert result.symptoms == []
