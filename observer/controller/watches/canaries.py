"""Log loss: each log canary that ended as expected is read back once the pipeline has had
time to deliver it, and its lost lines counted (each run checked once, across restarts), with
the log pipeline's own blind time, the log_pipeline_unreachable condition, while it cannot be
read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial

from observer.controller.watches.base import Checked, Look
from observer.detectors import log_loss
from observer.domain import Behaviour, Finding, FindingKind, Outcome, ProbeRun, Severity
from observer.errors import BackendError, StoreError
from observer.log_readers.base import LogReader
from observer.logging_setup import get_logger
from observer.metrics import ControllerMetrics
from observer.probes.catalog import ProbeSpec
from observer.settings.detectors import LogLossSettings
from observer.storage.store import Store

_log = get_logger("observer.controller.watches.canaries")

# A canary read that keeps failing is given up (and said so) after this many tries.
CANARY_READ_TRIES = 10
# Slack before a canary's start when asking a log backend for its lines.
CANARY_READ_MARGIN = timedelta(minutes=1)
# A restarted controller still checks the canaries that ended this recently; older ones are
# likely past the log backend's retention (and a day-long outage is its own finding).
CANARY_RESUME_LOOKBACK = timedelta(days=1)
PIPELINE_UNREACHABLE = "log_pipeline_unreachable"


@dataclass
class _Canary:
    run: ProbeRun
    expected_lines: int
    due: datetime
    tries: int = 0


class LogCanaries:
    def __init__(
        self,
        store: Store,
        metrics: ControllerMetrics,
        catalog: Mapping[str, ProbeSpec],
        reader: LogReader | None,
        pipeline: str,
        settle_seconds: float,
        rules: LogLossSettings,
    ) -> None:
        """`reader`: None when canaries are not read back (this watch then does nothing);
        `pipeline`: the log pipeline's name; `settle_seconds`: how long after a canary's end
        the pipeline has to deliver it."""
        self._store = store
        self._metrics = metrics
        self._catalog = catalog
        self._reader = reader
        self._pipeline = pipeline
        self._settle_seconds = settle_seconds
        self._rules = rules
        self._canaries: dict[str, _Canary] = {}  # by run id
        self._down: Finding | None = None  # the open log_pipeline_unreachable condition

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        """Queue the canaries that ended within CANARY_RESUME_LOOKBACK and were never checked,
        and adopt the pipeline's open unreachable condition so that the next successful read
        closes it."""
        if self._reader is None:
            return
        probes = [
            name
            for name, spec in self._catalog.items()
            if spec.workload.behaviour is Behaviour.LOG_CANARY
        ]
        for run in self._store.runs_to_log_check(probes, now - CANARY_RESUME_LOOKBACK):
            self._queue(run)
        for finding in left_open:
            if finding.detector == PIPELINE_UNREACHABLE and finding.subject == self._subject:
                self._down = finding

    def check(self, look: Look) -> Checked:
        """The findings of the canaries due now. The watches check this one first, so that a
        read that raises leaves every other watch as it was; its findings are stored after
        theirs (late), with the open pipeline condition again when it names canaries given
        up. A canary is forgotten, and marked checked in the store, only once its findings
        are stored: a crash in between checks the run again after the restart, and an event
        stored twice is one row (same key and time)."""
        for run in look.changed:
            self._queue(run)
        if self._reader is None:
            return Checked()
        found, done = self._read_back(self._reader, look.now)
        if not done:
            return Checked(late=found)
        return Checked(
            late=found,
            restated=() if self._down is None else (self._down,),
            stored=partial(self._checked, done, look.now),
        )

    def _queue(self, run: ProbeRun) -> None:
        spec = self._catalog.get(run.probe)
        if (
            self._reader is not None
            and spec is not None
            and spec.workload.behaviour is Behaviour.LOG_CANARY
            and run.outcome is Outcome.PASSED
            and run.finished_at is not None
            and run.run_id not in self._canaries
        ):
            due = run.finished_at + timedelta(seconds=self._settle_seconds)
            self._canaries[run.run_id] = _Canary(run, spec.workload.log_lines, due)

    def _checked(self, run_ids: list[str], now: datetime) -> None:
        self._store.mark_log_checked(run_ids, now)
        for run_id in run_ids:
            del self._canaries[run_id]

    def _read_back(self, reader: LogReader, now: datetime) -> tuple[list[Finding], list[str]]:
        """Findings of the canaries due now, and the run ids whose check is done: read back,
        or given up after CANARY_READ_TRIES failed reads."""
        found: list[Finding] = []
        done: list[str] = []
        for canary in self._canaries.values():
            if canary.due > now:
                continue
            run = canary.run
            since = (run.started_at or run.submitted_at or now) - CANARY_READ_MARGIN
            try:
                lines = reader.read(run.run_id, since, now)
            except StoreError:
                # The pod-log reader finds the run's job in the store: the store's outage is
                # its own condition (store_unreachable, checked after this watch), not the
                # pipeline's, and the canary is read once the store is back.
                continue
            except BackendError as exc:
                canary.tries += 1
                self._metrics.log_reader_errors_total.labels(self._pipeline).inc()
                found += self._pipeline_read(now, str(exc))
                if canary.tries >= CANARY_READ_TRIES:
                    _log.error(
                        "log canary given up: never read back, not checked",
                        run_id=run.run_id,
                        tries=canary.tries,
                        error=str(exc),
                    )
                    self._give_up(run.run_id)
                    done.append(run.run_id)
                continue
            found += self._pipeline_read(now, None)
            report = log_loss.analyse(run.run_id, canary.expected_lines, lines)
            found += log_loss.findings(
                report,
                tenant=run.tenant,
                pipeline=self._pipeline,
                rules=self._rules,
                at=run.finished_at or now,
            )
            done.append(run.run_id)
        return found, done

    @property
    def _subject(self) -> dict[str, str]:
        return {"pipeline": self._pipeline}

    def _pipeline_read(self, now: datetime, error: str | None) -> list[Finding]:
        """The pipeline's unreachable condition: opened by the first failed read, closed by
        the next one that succeeds (a check that reads nothing leaves it as it is)."""
        down = self._down
        if error is None:
            if down is None:
                return []
            self._down = None
            return [replace(down, closed_at=now)]
        if down is not None:
            self._down = replace(down, evidence={**down.evidence, "last_error": error})
            return []
        self._down = Finding(
            detector=PIPELINE_UNREACHABLE,
            kind=FindingKind.CONDITION,
            subject=self._subject,
            severity=Severity.CRITICAL,
            summary=f"log pipeline {self._pipeline} could not be read, log loss is unknown: "
            f"{error}",
            opened_at=now,
            closed_at=None,
            evidence={
                "error": error,
                "last_error": error,
                "canaries_given_up": [],
                "rule": "a log canary's read-back failed; closed by the next read-back that "
                "succeeds",
            },
        )
        return [self._down]

    def _give_up(self, run_id: str) -> None:
        """Name a canary never read back in the open condition (a failed read opened it)."""
        down = self._down
        if down is not None:
            given_up = down.evidence.get("canaries_given_up")
            named = [*given_up, run_id] if isinstance(given_up, list) else [run_id]
            self._down = replace(down, evidence={**down.evidence, "canaries_given_up": named})
