"""The alert boundary: which alerts are firing, as Alertmanager's API v2 says, kept in the
store as firings (one per fingerprint and start) so that a day's report can count them.

Alertmanager forgets an alert soon after it resolves, so the firings are polled while they
fire (`AlertPoller`, on a loop) rather than asked for afterwards."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import Any, Protocol, Self

import httpx

from observer.clock import Clock
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding, Severity, Symptom
from observer.errors import BackendError
from observer.metrics import FindingMetrics, ReportMetrics
from observer.records import StoredAlert
from observer.storage.store import Store

ALERTMANAGER_UNREACHABLE = "alertmanager_unreachable"


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


class AlertPoller:
    """Reads what fires now and stores it, on the controller's loop. A read that fails opens
    the alertmanager_unreachable condition, closed by the next good read: the alert count's
    blind time, so that a day without stored alerts is not read as a day without alerts.
    `findings` is the controller's one FindingMetrics, which counts the condition with every
    other finding."""

    def __init__(
        self,
        source: AlertSource,
        store: Store,
        clock: Clock,
        metrics: ReportMetrics,
        findings: FindingMetrics,
        ignored: Collection[str] = (),
    ) -> None:
        self._source = source
        self._store = store
        self._clock = clock
        self._metrics = metrics
        self._findings = findings
        self._ignored = frozenset(ignored)
        self._tracker = ConditionTracker()
        self._started = False

    def poll(self) -> int:
        """Store the firings read now; returns how many. A failed read is counted, recorded
        and raised for the loop: it is never taken for 'nothing firing'."""
        now = self._clock.now()
        if not self._started:
            self._close_left_open(now)
            self._started = True
        try:
            firing = [a for a in self._source.firing() if a.name not in self._ignored]
        except BackendError as exc:
            self._metrics.alert_source_errors_total.inc()
            self._save(self._tracker.update([_unreachable(str(exc))], now))
            raise
        self._save(self._tracker.update([], now))
        self._store.save_alerts(
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
        self._metrics.alerts_firing.set(len(firing))
        return len(firing)

    def _close_left_open(self, now: datetime) -> None:
        """A condition a previous controller left open ends now: alerts went unread until
        this one started polling."""
        left = self._store.findings(open_only=True, detector=ALERTMANAGER_UNREACHABLE)
        self._save([replace(f, closed_at=now) for f in left])

    def _save(self, changed: list[Finding]) -> None:
        """Store the findings that opened or closed and count them."""
        if changed:
            self._store.save_findings(changed)
            self._findings.record(changed, partial(self._store.findings, open_only=True))


def _unreachable(error: str) -> Symptom:
    return Symptom(
        detector=ALERTMANAGER_UNREACHABLE,
        subject={"source": "alertmanager"},
        severity=Severity.WARNING,
        summary="Alertmanager cannot be read: alerts firing now are not counted",
        rule="a poll of Alertmanager's /api/v2/alerts failed",
        evidence={"error": error},
    )
