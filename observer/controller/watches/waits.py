"""Unexplained waits: pending probes whose wait the scheduler's latest snapshot does not
explain, held as conditions while the scheduler can be seen."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from observer.controller.watches.base import Checked, Look
from observer.detectors import unexplained_wait
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.domain import Finding
from observer.settings.detectors import FairnessSettings


class UnexplainedWaits:
    def __init__(self, rules: FairnessSettings, quotas: Mapping[str, int]) -> None:
        self._rules = rules
        self._quotas = quotas
        self._waits = ConditionTracker()

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        self._waits.resume(f for f in left_open if f.detector == unexplained_wait.UNEXPLAINED_WAIT)

    def check(self, look: Look) -> Checked:
        scheduler = look.scheduler
        if scheduler is None:  # blind to the scheduler: nothing is confirmed or closed
            self._waits.blind()
            return Checked()
        symptoms = []
        for run in look.active:
            job = unexplained_wait.pending_probe(run)
            if job is not None:
                symptoms += unexplained_wait.unexplained_waits(
                    job, scheduler, self._rules, self._quotas
                )
        # The runs pending now are every wait there is: one no longer listed has ended.
        return Checked(self._waits.update(symptoms, look.now, covers_all, as_of=scheduler.at))
