"""The controller-side detectors, fed by what the controller already reads: unexplained waits
of pending probes and GPUs the scheduler holds with no job behind them (against the latest
scheduler snapshot and the agents' snapshots), persistent unfairness per window
(re-assessed when an occurrence of the window completes), and log loss of each finished log
canary (read back once the pipeline has had time to deliver it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from observer.clock import Clock
from observer.detectors import fairness, log_loss, unreleased
from observer.detectors.conditions import ConditionTracker
from observer.domain import (
    Behaviour,
    Finding,
    NodeSnapshot,
    Outcome,
    ProbeRun,
    SchedulerSnapshot,
)
from observer.errors import BackendError
from observer.logs import get_logger
from observer.logs_pipeline.base import LogReader
from observer.metrics import ControllerMetrics
from observer.probes.catalog import ProbeSpec
from observer.probes.windows import Calendar
from observer.settings import DetectorSettings
from observer.storage.store import Store

_log = get_logger("observer.controller.detect")

FAIRNESS_PROBE = "fairness"
# A canary read that keeps failing is given up (and said so) after this many tries.
CANARY_READ_TRIES = 10
# Slack before a canary's start when asking a log backend for its lines.
CANARY_READ_MARGIN = timedelta(minutes=1)


@dataclass
class _Canary:
    run: ProbeRun
    expected_lines: int
    due: datetime
    tries: int = 0


@dataclass
class Detection:
    store: Store
    clock: Clock
    metrics: ControllerMetrics
    calendar: Calendar
    rules: DetectorSettings
    catalog: Mapping[str, ProbeSpec]
    weights: Mapping[str, float]
    quotas: Mapping[str, int]
    log_reader: LogReader | None
    log_pipeline: str
    log_settle_seconds: float
    _latest: SchedulerSnapshot | None = None
    node_snapshots: dict[str, NodeSnapshot] = field(default_factory=dict)
    _waits: ConditionTracker = field(default_factory=ConditionTracker)
    _allocations: ConditionTracker = field(default_factory=ConditionTracker)
    _fairness: ConditionTracker = field(default_factory=ConditionTracker)
    _assessed_until: dict[str, datetime] = field(default_factory=dict)
    _canaries: list[_Canary] = field(default_factory=list)

    def scheduler_sampled(self, snapshot: SchedulerSnapshot) -> None:
        self._latest = snapshot

    def runs_changed(self, runs: Sequence[ProbeRun]) -> None:
        """Queue the log-canary runs that ended as expected for their read-back."""
        for run in runs:
            spec = self.catalog.get(run.probe)
            if (
                self.log_reader is not None
                and spec is not None
                and spec.workload.behaviour is Behaviour.LOG_CANARY
                and run.outcome is Outcome.PASSED
                and run.finished_at is not None
            ):
                due = run.finished_at + timedelta(seconds=self.log_settle_seconds)
                self._canaries.append(_Canary(run, spec.workload.log_lines, due))

    def check(self, active: Sequence[ProbeRun]) -> list[Finding]:
        """Run every detector that has something new to look at; store and count what
        opened or closed."""
        now = self.clock.now()
        changed = [
            *self._unexplained(active, now),
            *self._unreleased(now),
            *self._persistent(now),
            *self._log_loss(now),
        ]
        if changed:
            self.store.save_findings(changed)
            self.metrics.findings.record(changed, self.store.findings(open_only=True))
        return changed

    def _unexplained(self, active: Sequence[ProbeRun], now: datetime) -> list[Finding]:
        if self._latest is None:  # blind to the scheduler: nothing is confirmed or closed
            return []
        symptoms = []
        for run in active:
            job = fairness.pending_probe(run)
            if job is not None:
                symptoms += fairness.unexplained_waits(
                    job, self._latest, self.rules.fairness, self.quotas
                )
        return self._waits.update(symptoms, now)

    def _unreleased(self, now: datetime) -> list[Finding]:
        if self._latest is None:
            return []
        symptoms = unreleased.evaluate(
            self._latest, self.node_snapshots, self.rules.node.grace_seconds
        )
        return self._allocations.update(symptoms, now)

    def _persistent(self, now: datetime) -> list[Finding]:
        changed: list[Finding] = []
        lookback = timedelta(days=8 * self.rules.fairness.persistence_m)
        for window in self.calendar.windows:
            completed = fairness.occurrences(self.calendar, window.name, now - lookback, now)
            recent = completed[-self.rules.fairness.persistence_m :]
            if not recent or self._assessed_until.get(window.name) == recent[-1].end:
                continue
            self._assessed_until[window.name] = recent[-1].end
            assessments = [self._assess(window.name, occurrence) for occurrence in recent]
            symptoms = fairness.evaluate(assessments, self.rules.fairness)
            changed += self._fairness.update(symptoms, now, partial(fairness.covers, assessments))
            latest = assessments[-1]
            if latest.fairness_index is not None:
                self.metrics.fairness_index.labels(window.name).set(latest.fairness_index)
        return changed

    def _assess(self, window: str, occurrence: fairness.Occurrence) -> fairness.WindowAssessment:
        runs = [
            r
            for r in self.store.runs(
                probe=FAIRNESS_PROBE, since=occurrence.start, until=occurrence.end
            )
            if r.window == window
        ]
        samples = self.store.queue_samples(occurrence.start, occurrence.end)
        capacity = fairness.schedulable_gpus(self.store.node_states(occurrence.end))
        return fairness.assess_window(
            occurrence, runs, samples, self.weights, capacity, self.rules.fairness
        )

    def _log_loss(self, now: datetime) -> list[Finding]:
        if self.log_reader is None:
            return []
        found: list[Finding] = []
        waiting: list[_Canary] = []
        for canary in self._canaries:
            if canary.due > now:
                waiting.append(canary)
                continue
            run = canary.run
            since = (run.started_at or run.submitted_at or now) - CANARY_READ_MARGIN
            try:
                lines = self.log_reader.read(run.run_id, since, now)
            except BackendError as exc:
                canary.tries += 1
                self.metrics.log_reader_errors_total.labels(self.log_pipeline).inc()
                if canary.tries < CANARY_READ_TRIES:
                    waiting.append(canary)
                else:
                    _log.error("log canary never read back", run_id=run.run_id, error=str(exc))
                continue
            report = log_loss.analyse(run.run_id, canary.expected_lines, lines)
            found += log_loss.findings(
                report,
                tenant=run.tenant,
                pipeline=self.log_pipeline,
                rules=self.rules.log,
                at=run.finished_at or now,
            )
        self._canaries = waiting
        return found
