"""Persistent unfairness per window: the last M completed occurrences of every window,
re-weighed each time one more completes, each occurrence assessed once from the store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial

from observer.controller.watches.base import Checked, Look
from observer.detectors import fairness
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding
from observer.metrics import ControllerMetrics
from observer.probes.windows import Calendar, Occurrence, next_completion, occurrences
from observer.settings.detectors import FairnessSettings
from observer.storage.store import Store

FAIRNESS_PROBE = "fairness"


class PersistentUnfairness:
    def __init__(
        self,
        store: Store,
        metrics: ControllerMetrics,
        calendar: Calendar,
        rules: FairnessSettings,
        weights: Mapping[str, float],
        quotas: Mapping[str, int],
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._calendar = calendar
        self._rules = rules
        self._weights = weights
        self._quotas = quotas
        self._fairness = ConditionTracker()
        self._next_completion: datetime | None = None  # nothing new to weigh before it
        self._assessments: dict[tuple[str, datetime], fairness.WindowAssessment] = {}

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        self._fairness.resume(f for f in left_open if f.detector == fairness.PERSISTENT_UNFAIRNESS)

    def check(self, look: Look) -> Checked:
        now = look.now
        if self._next_completion is not None and now < self._next_completion:
            return Checked()
        self._next_completion = next_completion(self._calendar, now)
        m = self._rules.persistence_m
        lookback = now - timedelta(days=8 * m)
        completed = sorted(
            (
                occurrence
                for window in self._calendar.windows
                for occurrence in occurrences(self._calendar, window.name, lookback, now)
            ),
            key=lambda o: o.end,
        )
        recent = completed[-m:]
        if not recent:
            return Checked()
        # A completed occurrence's assessment does not change: each is made once.
        self._assessments = {
            (o.window, o.start): self._assessments.get((o.window, o.start)) or self._assess(o)
            for o in recent
        }
        assessments = list(self._assessments.values())
        for assessment in assessments:
            if assessment.fairness_index is not None:
                window = assessment.occurrence.window
                self._metrics.fairness_index.labels(window).set(assessment.fairness_index)
        symptoms = fairness.evaluate(assessments, self._rules)
        return Checked(self._fairness.update(symptoms, now, partial(fairness.covers, assessments)))

    def assessments(self) -> list[fairness.WindowAssessment]:
        """The window occurrences the last check weighed, oldest first."""
        return sorted(self._assessments.values(), key=lambda a: a.occurrence.start)

    def _assess(self, occurrence: Occurrence) -> fairness.WindowAssessment:
        runs = [
            r
            for r in self._store.runs(
                probe=FAIRNESS_PROBE, since=occurrence.start, until=occurrence.end
            )
            if r.window == occurrence.window
        ]
        samples = self._store.queue_samples(occurrence.start, occurrence.end)
        capacity = fairness.capacity_over(
            self._store.node_states(occurrence.start),
            self._store.node_changes(occurrence.start, occurrence.end),
        )
        return fairness.assess_window(
            occurrence,
            runs,
            samples,
            self._weights,
            capacity,
            self._rules,
            quotas=self._quotas,
        )
