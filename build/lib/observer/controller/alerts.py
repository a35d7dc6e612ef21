"""Polls the alert source on the controller's loop and keeps what fires in the store as
firings (one per fingerprint and start), so that a day's report can count them.

Alertmanager forgets an alert soon after it resolves, so the firings are polled while they
fire rather than asked for afterwards."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime

from observer.alerting.base import AlertSource
from observer.clock import Clock
from observer.controller.outbox import FindingsOutbox
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.domain import Finding, Severity, Symptom
from observer.errors import BackendError
from observer.metrics import FindingMetrics, ReportMetrics
from observer.records import StoredAlert
from observer.storage.store import Store

ALERTMANAGER_UNREACHABLE = "alertmanager_unreachable"


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
        self._outbox = FindingsOutbox(store, findings)
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
            self._save(self._tracker.update([_unreachable(str(exc))], now, covers_all))
            raise
        self._save(self._tracker.update([], now, covers_all))
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
        self._outbox.put(changed)


def _unreachable(error: str) -> Symptom:
    return Symptom(
        detector=ALERTMANAGER_UNREACHABLE,
        subject={"source": "alertmanager"},
        severity=Severity.WARNING,
        summary="Alertmanager cannot be read: alerts firing now are not counted",
        rule="a poll of Alertmanager's /api/v2/alerts failed",
        evidence={"error": error},
    )
