"""Nodes the scheduler keeps in service after their agent reported a fatal GPU fault: the
faults remembered per node (also while the scheduler cannot be seen), judged against the
scheduler's latest snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from observer.controller.watches.base import Checked, Look
from observer.detectors import gpu_in_service
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.domain import Finding
from observer.settings.detectors import GpuInServiceSettings


class GpusInService:
    def __init__(self, rules: GpuInServiceSettings) -> None:
        self._rules = rules
        self._in_service = ConditionTracker()
        self._faults: dict[str, gpu_in_service.Fault] = {}  # by node

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        self._in_service.resume(f for f in left_open if f.detector in gpu_in_service.DETECTORS)

    def check(self, look: Look) -> Checked:
        scheduler = look.scheduler
        seen = [f for snapshot in look.nodes.values() for f in gpu_in_service.faults(snapshot)]
        self._faults = gpu_in_service.remember(self._faults, seen, scheduler, look.now)
        if scheduler is None:
            self._in_service.blind()
            return Checked()
        symptoms = gpu_in_service.evaluate(self._faults, scheduler, self._rules.grace_seconds)
        return Checked(self._in_service.update(symptoms, look.now, covers_all, as_of=scheduler.at))
