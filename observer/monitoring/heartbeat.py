"""The heartbeat: the observer's clock, exported at every scrape, so that reading it back
through Prometheus measures the pipeline's lag end to end on one clock (no skew)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from observer.clock import Clock

HEARTBEAT_METRIC = "observer_heartbeat_timestamp_seconds"
_DOC = "Wall time of the observer when this scrape was served; read back to measure lag."


class Heartbeat(Collector):
    def __init__(self, registry: CollectorRegistry, clock: Clock) -> None:
        self._clock = clock
        registry.register(self)

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(HEARTBEAT_METRIC, _DOC)

    def collect(self) -> Iterator[Metric]:
        # Read at collection time, so the value is the scrape's own time.
        yield GaugeMetricFamily(HEARTBEAT_METRIC, _DOC, value=self._clock.now().timestamp())
