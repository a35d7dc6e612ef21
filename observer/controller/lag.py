"""The monitoring-lag watch on the controller's loop: one check against Prometheus, its
symptoms tracked as conditions (a check that could not be read closes nothing), stored."""

from __future__ import annotations

from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding
from observer.metrics import ControllerMetrics
from observer.monitoring.checker import MonitoringChecker
from observer.storage.store import Store


class LagWatch:
    def __init__(
        self, checker: MonitoringChecker, store: Store, metrics: ControllerMetrics
    ) -> None:
        self._checker = checker
        self._store = store
        self._metrics = metrics
        self._tracker = ConditionTracker()

    def check(self) -> list[Finding]:
        result = self._checker.check()
        changed = self._tracker.update(result.symptoms, result.view.now, result.covers)
        if changed:
            self._store.save_findings(changed)
            self._metrics.findings.record(changed, self._store.findings(open_only=True))
        return changed
