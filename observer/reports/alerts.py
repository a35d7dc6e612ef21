"""The alert boundary: which alerts are firing, as Alertmanager's API v2 says, kept in the
store as firings (one per fingerprint and start) so that a day's report can count them.

Alertmanager forgets an alert soon after it resolves, so the firings are polled while they
fire (`record_alerts`, on a loop) rather than asked for afterwards."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol, Self

import httpx

from observer.clock import Clock
from observer.errors import BackendError
from observer.metrics import ReportMetrics
from observer.storage.store import Store, StoredAlert


@dataclass(frozen=True, slots=True)
class FiringAlert:
    fingerprint: str
    name: str  # the alertname label
    severity: str | None  # the severity label, when the rule sets one
    starts_at: datetime
    ends_at: datetime | None  # while firing: when it resolves unless Prometheus refreshes it
    labels: Mapping[str, str]
    summary: str | None  # the summary (else description) annotation


class AlertSource(Protocol):
    def firing(self) -> list[FiringAlert]:
        """Every alert firing now (silenced and inhibited ones too: they fired). Raises
        BackendError when the source cannot be read."""
        ...


class AlertmanagerHttp:
    """GET {url}/api/v2/alerts."""

    def __init__(self, url: str, timeout_seconds: float) -> None:
        self._url = url.rstrip("/") + "/api/v2/alerts"
        self._client = httpx.Client(timeout=timeout_seconds)

    def firing(self) -> list[FiringAlert]:
        params = {"active": "true", "silenced": "true", "inhibited": "true"}
        try:
            response = self._client.get(self._url, params=params)
            response.raise_for_status()
            body = response.json()
        except httpx.HTTPStatusError as exc:
            raise BackendError(
                f"alertmanager {self._url}: HTTP {exc.response.status_code} "
                f"{exc.response.text[:200]}"
            ) from exc
        except httpx.HTTPError as exc:
            raise BackendError(f"alertmanager {self._url}: {exc!r}") from exc
        except ValueError as exc:
            raise BackendError(f"alertmanager {self._url}: not JSON: {exc}") from exc
        if not isinstance(body, list):
            raise BackendError(f"alertmanager {self._url}: expected a list of alerts")
        try:
            return [_alert(item) for item in body]
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(f"alertmanager {self._url}: unexpected alert: {exc!r}") from exc

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _alert(item: Mapping[str, Any]) -> FiringAlert:
    labels = {str(k): str(v) for k, v in item["labels"].items()}
    annotations = item.get("annotations") or {}
    ends = item.get("endsAt")
    return FiringAlert(
        fingerprint=str(item["fingerprint"]),
        name=labels.get("alertname", ""),
        severity=labels.get("severity"),
        starts_at=_instant(item["startsAt"]),
        ends_at=_instant(ends) if ends else None,
        labels=labels,
        summary=annotations.get("summary") or annotations.get("description"),
    )


def _instant(text: str) -> datetime:
    at = datetime.fromisoformat(text)
    if at.tzinfo is None:
        raise ValueError(f"time without zone: {text}")
    return at


def record_alerts(
    source: AlertSource,
    store: Store,
    clock: Clock,
    metrics: ReportMetrics,
    ignored: Collection[str] = (),
) -> int:
    """Read what fires now and store it; returns how many firings were stored. A failed read
    is counted and raised for the loop to record: it is never taken for 'nothing firing'."""
    try:
        firing = [a for a in source.firing() if a.name not in ignored]
    except BackendError:
        metrics.alert_source_errors_total.inc()
        raise
    now = clock.now()
    store.save_alerts(
        StoredAlert(
            fingerprint=a.fingerprint,
            name=a.name,
            severity=a.severity,
            starts_at=a.starts_at,
            ends_at=a.ends_at,
            last_seen_at=now,
            labels=a.labels,
            summary=a.summary,
        )
        for a in firing
    )
    metrics.alerts_firing.set(len(firing))
    return len(firing)
