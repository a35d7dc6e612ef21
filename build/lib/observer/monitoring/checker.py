"""One monitoring-lag check: read the pipeline's state from Prometheus into a LagView, run the
pure detector over it, and publish the lag it measured.

Reads are isolated per check: an error answer to one query leaves the others readable. Once
Prometheus is unreachable the remaining reads are not attempted (each would wait out the same
timeout) and are recorded as unread with the same error."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from observer.clock import Clock
from observer.detectors import monitoring_lag
from observer.detectors.monitoring_lag import (
    FLATLINE,
    FRESHNESS,
    GPU_BUSY_LAG,
    HEARTBEAT,
    SCRAPE,
    BusyProbeReading,
    FlatlineReading,
    HeartbeatReading,
    LagView,
    SeriesAge,
)
from observer.domain import Subject, Symptom
from observer.metrics import HEARTBEAT_METRIC, MonitoringMetrics
from observer.monitoring.base import (
    MonitoringError,
    PrometheusApi,
    PrometheusUnreachableError,
    SeriesSamples,
    selector,
)
from observer.settings.detectors import MonitoringLagSettings

T = TypeVar("T")

# Prometheus's default lookback: an instant query would not see an older heartbeat either.
HEARTBEAT_LOOKBACK_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class FlatlineWatch:
    """A series to compare: the metric and labels that pick it out in Prometheus, and the
    agent's own readings of it over the flat-line window, (read at, value), oldest first."""

    series: str
    metric: str
    labels: Mapping[str, str]
    agent_readings: Sequence[tuple[datetime, float]]


@dataclass(frozen=True, slots=True)
class BusyProbe:
    run_id: str
    gpu_uuid: str
    started_at: datetime


@dataclass(frozen=True, slots=True)
class CheckResult:
    view: LagView
    symptoms: list[Symptom]

    def covers(self, detector: str, subject: Subject) -> bool:
        """For ConditionTracker.update: what this check could see."""
        return monitoring_lag.covers(self.view, detector, subject)


class MonitoringChecker:
    def __init__(
        self,
        api: PrometheusApi,
        clock: Clock,
        settings: MonitoringLagSettings,
        metrics: MonitoringMetrics,
        heartbeat_labels: Mapping[str, str],
    ) -> None:
        """`heartbeat_labels` select the observer's own heartbeat series, e.g. its job and
        instance as Prometheus labels them."""
        self._api = api
        self._clock = clock
        self._settings = settings
        self._metrics = metrics
        self._heartbeat_selector = selector(HEARTBEAT_METRIC, heartbeat_labels)
        self._published: set[str] = set()
        # (run, GPU) -> the last check that did not see the busy probe's GPU busy yet.
        self._unseen: dict[tuple[str, str], datetime] = {}

    def check(
        self, flatlines: Sequence[FlatlineWatch] = (), busy_probes: Sequence[BusyProbe] = ()
    ) -> CheckResult:
        reader = _Reader(self._metrics)
        heartbeat = reader.read(HEARTBEAT, self._read_heartbeat, None)
        # After the heartbeat read: the lag includes the time its answer took to arrive.
        now = self._clock.now()
        view = LagView(
            now=now,
            heartbeat=heartbeat,
            freshness=reader.read(FRESHNESS, self._read_freshness, {}),
            targets=reader.read(SCRAPE, self._api.targets, []),
            flatlines=reader.read(FLATLINE, lambda: self._read_flatlines(flatlines), []),
            busy_probes=reader.read(
                GPU_BUSY_LAG, lambda: [self._read_busy(p, now) for p in busy_probes], []
            ),
            read_errors=reader.errors,
        )
        if GPU_BUSY_LAG not in view.read_errors:
            self._unseen = {
                key: now if p.first_busy_at is None else self._unseen[key]
                for p in view.busy_probes
                if (key := (p.run_id, p.gpu_uuid)) in self._unseen or p.first_busy_at is None
            }
        self._publish(monitoring_lag.lag_seconds(view, self._settings))
        return CheckResult(view, monitoring_lag.evaluate(view, self._settings))

    def _read_heartbeat(self) -> HeartbeatReading | None:
        series = self._api.series(self._heartbeat_selector, HEARTBEAT_LOOKBACK_SECONDS)
        # The newest beat of any matching series: a restarted observer may leave an old one.
        newest = max((s.points[-1] for s in series if s.points), key=lambda p: p[1], default=None)
        if newest is None:
            return None
        scraped_at, value = newest
        return HeartbeatReading(value=datetime.fromtimestamp(value, UTC), scraped_at=scraped_at)

    def _read_freshness(self) -> dict[str, list[SeriesAge]]:
        return {
            series: [
                SeriesAge(labels=s.labels, age_seconds=s.value)
                # Prometheus's own clock on both sides: no skew against the observer.
                for s in self._api.query(f"time() - timestamp({series})")
            ]
            # Resolved by the composition from what is configured; unresolved, none.
            for series in self._settings.freshness_series or ()
        }

    def _read_flatlines(self, watches: Sequence[FlatlineWatch]) -> list[FlatlineReading]:
        # One read per metric, not per series: a fleet's GPUs are thousands of series.
        window = self._settings.flatline_window_seconds
        by_label: dict[tuple[str, str, str], list[SeriesSamples]] = {}
        for metric in sorted({w.metric for w in watches}):
            for series in self._api.series(metric, window):
                for label in series.labels.items():
                    by_label.setdefault((metric, *label), []).append(series)
        readings = []
        for watch in watches:
            wanted = watch.labels.items()
            some = next(iter(wanted), ("__name__", watch.metric))
            found = by_label.get((watch.metric, *some), [])
            readings.append(_flatline(watch, [s for s in found if wanted <= s.labels.items()]))
        return readings

    def _read_busy(self, probe: BusyProbe, now: datetime) -> BusyProbeReading:
        rules = self._settings
        gpu = selector(rules.gpu_utilization_metric, {rules.gpu_uuid_label: probe.gpu_uuid})
        window = max((now - probe.started_at).total_seconds(), 1.0)
        points = sorted(p for s in self._api.series(gpu, window) for p in s.points)
        shown = monitoring_lag.first_busy(
            points, probe.started_at, rules.busy_utilization_threshold_ratio
        )
        # A sample stamped before an earlier check that did not see it arrived late (remote
        # write, a stalled ingester): it was shown no earlier than that check.
        unseen = self._unseen.get((probe.run_id, probe.gpu_uuid))
        if shown is not None and unseen is not None:
            shown = max(shown, unseen)
        return BusyProbeReading(
            run_id=probe.run_id,
            gpu_uuid=probe.gpu_uuid,
            started_at=probe.started_at,
            first_busy_at=shown,
        )

    def _publish(self, lags: Mapping[str, float]) -> None:
        for check, seconds in lags.items():
            self._metrics.lag_seconds.labels(check).set(seconds)
        # A check that measured nothing this time must not keep showing its last lag.
        for check in self._published - lags.keys():
            self._metrics.lag_seconds.remove(check)
        self._published = set(lags)


class _Reader:
    """Runs each check's reads, keeping the error of any that failed."""

    def __init__(self, metrics: MonitoringMetrics) -> None:
        self.errors: dict[str, str] = {}
        self._metrics = metrics
        self._unreachable: str | None = None

    def read(self, check: str, read: Callable[[], T], unread: T) -> T:
        if self._unreachable is None:
            try:
                return read()
            except PrometheusUnreachableError as e:
                self._unreachable = self.errors[check] = str(e)
            except MonitoringError as e:
                self.errors[check] = str(e)
        else:
            self.errors[check] = self._unreachable
        self._metrics.check_errors_total.labels(check).inc()
        return unread


def _flatline(watch: FlatlineWatch, series: Sequence[SeriesSamples]) -> FlatlineReading:
    points = sorted(p for s in series for p in s.points)
    # Over the stretch Prometheus covers only: a series it has just regained (its target
    # was down) or that arrives late is not flat because the agent saw it move outside
    # that stretch; lateness is the heartbeat's and freshness's to report.
    agent = []
    if points:
        first, last = points[0][0], points[-1][0]
        agent = [v for at, v in watch.agent_readings if first <= at <= last]
    return FlatlineReading(
        series=watch.series, prometheus_values=[v for _, v in points], agent_values=agent
    )
