"""One contract for every implementation of the Prometheus boundary: the HTTP adapter against
a real Prometheus 2.42 (conftest.py) and the scripted fake the benchmark and the controller
tests use. Both scrape an exporter of the heartbeat and one GPU's utilisation every second;
each must answer the checker's three reads the same way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

import pytest

from observer.clock import ManualClock, SystemClock
from observer.domain import TargetState
from observer.metrics import HEARTBEAT_METRIC
from observer.monitoring.base import (
    MonitoringError,
    PrometheusApi,
    PrometheusUnreachableError,
    selector,
)
from observer.monitoring.fake import Exposition, FakePrometheus
from observer.monitoring.prometheus import PrometheusHttp
from tests.monitoring.conftest import (
    SCRAPE_INTERVAL_SECONDS,
    SCRAPE_TIMEOUT_SECONDS,
    UTILIZATION,
    Exporters,
)
from tests.support.waiting import wait_until

SLACK_SECONDS = 0.5  # a real scrape and query take a little time


class Side(Protocol):
    @property
    def api(self) -> PrometheusApi: ...

    job: str
    uuid: str

    def now(self) -> datetime: ...
    def wait(self, seconds: float) -> None: ...


@dataclass
class Fake:
    api: FakePrometheus
    clock: ManualClock
    job: str = "exporter-fake"
    uuid: str = "GPU-exporter-fake"

    def now(self) -> datetime:
        return self.clock.now()

    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)


@dataclass
class Real:
    api: PrometheusHttp
    job: str
    uuid: str

    def now(self) -> datetime:
        return SystemClock().now()

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)


def _fake() -> Fake:
    clock = ManualClock(datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    api = FakePrometheus(clock, SCRAPE_INTERVAL_SECONDS, SCRAPE_TIMEOUT_SECONDS)
    side = Fake(api, clock)
    scrapes = iter(range(10**6))

    def collect(at: datetime) -> Exposition:
        # As the real test exporter: a new utilisation at every scrape, never busy.
        value = (next(scrapes) % 5) / 10
        return [
            (HEARTBEAT_METRIC, {}, at.timestamp()),
            (UTILIZATION, {"gpu": "0", "uuid": side.uuid}, value),
        ]

    api.add_target(side.job, "127.0.0.1:9400", collect)
    return side


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.prometheus)])
def side(request: pytest.FixtureRequest) -> Iterator[Side]:
    if request.param == "fake":
        yield _fake()
        return
    exporters: Exporters = request.getfixturevalue("exporters")
    exporter = exporters.take()
    real = Real(
        PrometheusHttp(request.getfixturevalue("prometheus").url, 1.0),
        exporter.job,
        exporter.gpu.uuid,
    )
    try:
        wait_until(
            lambda: (
                len(_points(real, HEARTBEAT_METRIC, 10)) >= 3
            ),  # discovered, scraped a few times
            "the exporter was never scraped",
            seconds=15,
            poll_seconds=SCRAPE_INTERVAL_SECONDS / 4,
        )
        yield real
    finally:
        exporter.close()
        real.api.close()


def _points(side: Side, metric: str, window_seconds: float) -> list[tuple[datetime, float]]:
    return [
        p
        for s in side.api.series(selector(metric, {"job": side.job}), window_seconds)
        for p in s.points
    ]


def test_raw_samples_come_oldest_first_with_every_label(side: Side):
    side.wait(4 * SCRAPE_INTERVAL_SECONDS)
    now = side.now()

    [series] = side.api.series(
        selector(UTILIZATION, {"job": side.job}), 3 * SCRAPE_INTERVAL_SECONDS
    )

    assert {k: series.labels[k] for k in ("__name__", "job", "gpu", "uuid")} == {
        "__name__": UTILIZATION,
        "job": side.job,
        "gpu": "0",
        "uuid": side.uuid,
    }
    assert "instance" in series.labels
    times = [at for at, _ in series.points]
    assert len(times) >= 2 and times == sorted(set(times))
    assert now - timedelta(seconds=3 * SCRAPE_INTERVAL_SECONDS + SLACK_SECONDS) <= times[0]
    assert times[-1] <= now + timedelta(seconds=SLACK_SECONDS)
    assert {v for _, v in series.points} <= {0.0, 0.1, 0.2, 0.3, 0.4}


def test_the_heartbeat_read_back_is_the_exporters_clock_at_the_scrape(side: Side):
    side.wait(2 * SCRAPE_INTERVAL_SECONDS)

    for scraped_at, value in _points(side, HEARTBEAT_METRIC, 3 * SCRAPE_INTERVAL_SECONDS):
        assert abs(value - scraped_at.timestamp()) <= SLACK_SECONDS


def test_the_freshness_query_gives_each_series_age_without_its_name(side: Side):
    side.wait(2 * SCRAPE_INTERVAL_SECONDS)

    [age] = side.api.query(f"time() - timestamp({selector(UTILIZATION, {'job': side.job})})")

    assert "__name__" not in age.labels
    assert (age.labels["job"], age.labels["uuid"]) == (side.job, side.uuid)
    assert 0 <= age.value <= SCRAPE_INTERVAL_SECONDS + SLACK_SECONDS


def test_targets_report_health_last_scrape_and_the_scrape_settings(side: Side):
    side.wait(2 * SCRAPE_INTERVAL_SECONDS)
    now = side.now()

    [target] = [t for t in side.api.targets() if t.job == side.job]

    assert (target.health, target.last_error) == (TargetState.UP, "")
    assert target.labels["job"] == side.job and target.instance
    assert target.scrape_interval_seconds == SCRAPE_INTERVAL_SECONDS
    assert target.scrape_timeout_seconds == SCRAPE_TIMEOUT_SECONDS
    assert target.last_scrape is not None
    assert (
        abs((now - target.last_scrape).total_seconds()) <= SCRAPE_INTERVAL_SECONDS + SLACK_SECONDS
    )


def test_a_selector_that_matches_nothing_is_an_empty_answer(side: Side):
    nothing = selector(UTILIZATION, {"job": "no-such-job"})
    assert side.api.series(nothing, 5) == []
    assert side.api.query(f"time() - timestamp({nothing})") == []


def test_a_query_that_cannot_be_read_is_an_error_not_an_unreachable_prometheus(side: Side):
    with pytest.raises(MonitoringError) as raised:
        side.api.query("rate(up)")
    assert not isinstance(raised.value, PrometheusUnreachableError)
