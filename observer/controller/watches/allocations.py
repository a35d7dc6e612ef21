"""Unreleased allocations at the scheduler's layer: GPUs the scheduler holds with no job behind
them or for jobs stuck ending, judged against its latest snapshot and the agents' snapshots."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from observer.controller.watches.base import Checked, Look
from observer.detectors import unreleased
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.domain import Finding
from observer.settings.detectors import DetectorSettings


class Allocations:
    def __init__(self, rules: DetectorSettings) -> None:
        self._rules = rules
        self._allocations = ConditionTracker()

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        self._allocations.resume(f for f in left_open if f.detector in unreleased.DETECTORS)

    def check(self, look: Look) -> Checked:
        scheduler = look.scheduler
        if scheduler is None:
            self._allocations.blind()
            return Checked()
        symptoms = unreleased.evaluate(
            scheduler,
            look.nodes,
            look.now,
            grace_seconds=self._rules.node.grace_seconds,
            stuck_grace_seconds=self._rules.stuck_terminating.grace_seconds,
            snapshot_max_age_seconds=self._rules.probe_release.snapshot_max_age_seconds,
            memory_tolerance_bytes=self._rules.node.memory_tolerance_bytes,
        )
        # A fresh snapshot lists every node and job: what it no longer shows is gone.
        return Checked(self._allocations.update(symptoms, look.now, covers_all, as_of=scheduler.at))
