"""The Prometheus boundary: what the observer asks of Prometheus (instant queries, raw
samples over a window, scrape targets), the answers' value types and the errors. The HTTP
adapter is prometheus.py; a scripted stand-in is fake.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from observer.domain import TargetHealth
from observer.errors import BackendError


class MonitoringError(BackendError):
    """Prometheus answered, but not with a usable result: a PromQL error, an unexpected shape."""


class PrometheusUnreachableError(MonitoringError):
    """Prometheus could not be asked at all: refused, timed out, or failing on its side."""


@dataclass(frozen=True, slots=True)
class VectorSample:
    """One element of an instant query's result. `evaluated_at` is the query's evaluation
    time, not when the sample was scraped: read raw samples (`series`) for that."""

    labels: Mapping[str, str]
    value: float
    evaluated_at: datetime


@dataclass(frozen=True, slots=True)
class SeriesSamples:
    """One series' raw samples in a window: (scrape time, value), oldest first."""

    labels: Mapping[str, str]
    points: tuple[tuple[datetime, float], ...]


class PrometheusApi(Protocol):
    def query(self, expr: str, at: datetime | None = None) -> list[VectorSample]:
        """Evaluate an instant-vector expression at `at` (Prometheus's now if None)."""
        ...

    def series(
        self, selector: str, window_seconds: float, at: datetime | None = None
    ) -> list[SeriesSamples]:
        """The raw samples of every series `selector` matches, in the window ending at `at`."""
        ...

    def targets(self) -> list[TargetHealth]:
        """Every active scrape target with the health of its last scrape."""
        ...


def selector(metric: str, labels: Mapping[str, str]) -> str:
    """A PromQL series selector matching `labels` exactly, values escaped."""
    matchers = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{metric}{{{matchers}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
