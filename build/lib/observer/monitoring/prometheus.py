"""The Prometheus boundary's adapter: instant queries, raw samples over a window and scrape
targets through Prometheus's HTTP API (which Thanos Query and Mimir serve too). The only
httpx use for Prometheus; every failure becomes a MonitoringError carrying Prometheus's own
words."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from observer.domain import TargetHealth, TargetState
from observer.monitoring.base import (
    MonitoringError,
    PrometheusUnreachableError,
    SeriesSamples,
    VectorSample,
)


class PrometheusHttp:
    def __init__(
        self, base_url: str, timeout_seconds: float, client: httpx.Client | None = None
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._timeout_seconds = timeout_seconds
        self._owns_client = client is None
        self._client = client or httpx.Client()

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def query(self, expr: str, at: datetime | None = None) -> list[VectorSample]:
        data = self._query(expr, at)
        try:
            if data["resultType"] != "vector":
                raise MonitoringError(
                    f"query {expr!r} gave a {data['resultType']}, not an instant vector"
                )
            return [
                VectorSample(
                    labels=dict(item["metric"]),
                    value=float(item["value"][1]),
                    evaluated_at=_from_unix(item["value"][0]),
                )
                for item in data["result"]
            ]
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise MonitoringError(f"query {expr!r}: unexpected answer: {e!r}") from e

    def series(
        self, selector: str, window_seconds: float, at: datetime | None = None
    ) -> list[SeriesSamples]:
        # Milliseconds: Prometheus durations take integers only.
        expr = f"{selector}[{max(1, round(window_seconds * 1000))}ms]"
        data = self._query(expr, at)
        try:
            return [
                SeriesSamples(
                    labels=dict(item["metric"]),
                    points=tuple((_from_unix(t), float(v)) for t, v in item["values"]),
                )
                for item in data["result"]
            ]
        except (KeyError, TypeError, ValueError) as e:
            raise MonitoringError(f"query {expr!r}: unexpected answer: {e!r}") from e

    def targets(self) -> list[TargetHealth]:
        data = self._call("GET", "/api/v1/targets", {"state": "active"}, "targets")
        try:
            return [_target(t) for t in data["activeTargets"]]
        except (KeyError, TypeError, ValueError) as e:
            raise MonitoringError(f"targets: unexpected answer: {e!r}") from e

    def _query(self, expr: str, at: datetime | None) -> Any:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at.timestamp():.3f}"
        return self._call("POST", "/api/v1/query", params, f"query {expr!r}")

    def _call(self, method: str, path: str, params: dict[str, str], what: str) -> Any:
        url = self._base_url + path
        try:
            response = self._client.request(
                method,
                url,
                params=params if method == "GET" else None,
                data=params if method == "POST" else None,
                timeout=self._timeout_seconds,
            )
        except httpx.TimeoutException as e:
            raise PrometheusUnreachableError(
                f"{what}: no answer from {url} within {self._timeout_seconds:g} s"
            ) from e
        except httpx.HTTPError as e:
            raise PrometheusUnreachableError(f"{what}: {url}: {e}") from e
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "status" not in body:
            raise _status_error(response.status_code, f"{what}: HTTP {response.status_code}")
        if body["status"] != "success":
            detail = f"{what}: {body.get('errorType', 'error')}: {body.get('error', '')}"
            raise _status_error(response.status_code, detail)
        return body.get("data")


def _status_error(status_code: int, message: str) -> MonitoringError:
    # 5xx is Prometheus failing (not ready, overloaded, query timeout), not our query being
    # wrong: the same as not reaching it.
    if status_code >= 500:
        return PrometheusUnreachableError(message)
    return MonitoringError(message)


def _target(t: Mapping[str, Any]) -> TargetHealth:
    labels: dict[str, str] = dict(t["labels"])
    return TargetHealth(
        job=labels.get("job", ""),
        instance=labels.get("instance", ""),
        labels=labels,
        health=TargetState(t["health"]),
        last_scrape=_from_rfc3339(t["lastScrape"]),
        last_scrape_duration_seconds=float(t["lastScrapeDuration"]),
        last_error=str(t["lastError"]),
        scrape_interval_seconds=parse_duration(t["scrapeInterval"]),
        scrape_timeout_seconds=parse_duration(t["scrapeTimeout"]),
    )


def _from_unix(seconds: float | str) -> datetime:
    return datetime.fromtimestamp(float(seconds), UTC)


def _from_rfc3339(text: str) -> datetime | None:
    at = datetime.fromisoformat(text)
    # Go's zero time (year 1) stands for "never".
    return None if at.year == 1 else at.astimezone(UTC)


_DURATION_PART = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_DURATION_SECONDS = {
    "y": 365 * 86400.0,
    "w": 7 * 86400.0,
    "d": 86400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 0.001,
}


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration such as '15s', '500ms' or '1m30s'."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _DURATION_SECONDS[u] for n, u in parts)
