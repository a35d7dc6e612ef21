"""The controller-side detectors, fed by what the controller already reads: unexplained waits
of pending probes, GPUs the scheduler holds with no job behind them or for jobs stuck ending
(against the latest scheduler snapshot and the agents' snapshots), our own probes' GPUs not
back to idle after they end (each run and node judged until clean), persistent unfairness per window
(re-assessed when an occurrence of the window completes), and log loss of each finished log
canary (read back once the pipeline has had time to deliver it; each run checked once, across
restarts), with the log pipeline's own blind time while it cannot be read, nodes that were
allocated GPUs a probe's program could not use, and nodes the scheduler keeps in service after
their agent reported a fatal GPU fault."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from queue import SimpleQueue

from observer.clock import Clock
from observer.controller.outbox import FindingsOutbox
from observer.controller.views import Published
from observer.detectors import (
    fairness,
    gpu_in_service,
    gpu_unusable,
    log_loss,
    probe_release,
    quota_reclaim,
    unexplained_wait,
    unreleased,
)
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.domain import (
    Behaviour,
    Finding,
    FindingKind,
    NodeSnapshot,
    Outcome,
    ProbeRun,
    SchedulerSnapshot,
    Severity,
)
from observer.errors import BackendError
from observer.log_readers.base import LogReader
from observer.logging_setup import get_logger
from observer.metrics import ControllerMetrics
from observer.probes.catalog import ProbeSpec
from observer.probes.windows import Calendar, Occurrence, next_completion, occurrences
from observer.settings.detectors import DetectorSettings
from observer.storage.store import Store

_log = get_logger("observer.controller.detect")

FAIRNESS_PROBE = "fairness"
# A canary read that keeps failing is given up (and said so) after this many tries.
CANARY_READ_TRIES = 10
# Slack before a canary's start when asking a log backend for its lines.
CANARY_READ_MARGIN = timedelta(minutes=1)
# A restarted controller still checks the canaries that ended this recently; older ones are
# likely past the log backend's retention (and a day-long outage is its own finding).
CANARY_RESUME_LOOKBACK = timedelta(days=1)
PIPELINE_UNREACHABLE = "log_pipeline_unreachable"
STORE_UNREACHABLE = "store_unreachable"
# A probe's node that no agent has reported on this long after the run's end is not judged
# (the agent's own unreachable condition says why); the check is let go to stay bounded.
RELEASE_CHECK_HORIZON = timedelta(hours=1)


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
    # A scheduler snapshot older than this no longer speaks for the scheduler: it is blind.
    scheduler_max_age_seconds: float
    # How long a within-quota probe may be held by its quota after an over-quota one ended.
    quota_reclaim_seconds: float
    # The agents' latest snapshots by node, as the fleet loop publishes them, and the latest
    # scheduler snapshot, as the scheduler loop does: read once per check.
    nodes: Published[Mapping[str, NodeSnapshot]]
    scheduler: Published[SchedulerSnapshot | None]
    _latest: SchedulerSnapshot | None = None
    _waits: ConditionTracker = field(default_factory=ConditionTracker)
    _allocations: ConditionTracker = field(default_factory=ConditionTracker)
    _releases: dict[tuple[str, str], ProbeRun] = field(default_factory=dict)  # (run id, node)
    # Our jobs' owner ids as the scheduler last listed them, and when, by job id: a run is
    # judged once it ended, when the scheduler may no longer list its job.
    _owners: dict[str, tuple[tuple[str, ...], datetime]] = field(default_factory=dict)
    # Runs that changed, handed over by the follow loop's thread; everything else here is
    # the detect loop's own.
    _changed: SimpleQueue[ProbeRun] = field(default_factory=SimpleQueue)
    _release_tracker: ConditionTracker = field(default_factory=ConditionTracker)
    _fairness: ConditionTracker = field(default_factory=ConditionTracker)
    _next_completion: datetime | None = None  # nothing new to weigh before it
    _assessments: dict[tuple[str, datetime], fairness.WindowAssessment] = field(
        default_factory=dict
    )
    _canaries: dict[str, _Canary] = field(default_factory=dict)  # by run id
    _in_service: ConditionTracker = field(default_factory=ConditionTracker)
    _reclaims: ConditionTracker = field(default_factory=ConditionTracker)
    # When each over-quota run that a reclaim run follows ended (None: not stored), by run id.
    _over_quota_ends: dict[str, datetime | None] = field(default_factory=dict)
    # Since when each waiting reclaim run's tenant has had room for it, by run id.
    _room_since: dict[str, datetime] = field(default_factory=dict)
    _faults: dict[str, gpu_in_service.Fault] = field(default_factory=dict)  # by node
    _pipeline_down: Finding | None = None  # the open log_pipeline_unreachable condition
    _store_down: Finding | None = None  # the open store_unreachable condition
    _outbox: FindingsOutbox = field(init=False)

    def __post_init__(self) -> None:
        self._outbox = FindingsOutbox(self.store, self.metrics.findings)

    def _sampled(self, snapshot: SchedulerSnapshot) -> None:
        self._latest = snapshot
        for job in snapshot.jobs:
            if job.run_id is not None and job.owner_ids:
                self._owners[job.job_id] = (job.owner_ids, snapshot.at)
        judging = {run.job_id for run in self._releases.values()}
        horizon = snapshot.at - RELEASE_CHECK_HORIZON
        self._owners = {
            job: seen for job, seen in self._owners.items() if seen[1] >= horizon or job in judging
        }

    def resume(self) -> None:
        """After a (re)start: take over every condition a previous controller left open
        (the release checks of its open probe_unreleased findings queued again, the waits of
        its open quota_not_reclaimed findings timed on from their start), queue the
        canaries that ended within CANARY_RESUME_LOOKBACK and were never checked, and adopt
        the pipeline's open unreachable condition so that the next successful read closes
        it."""
        left_open = self.store.findings(open_only=True)
        for tracker, detectors in (
            (self._waits, {unexplained_wait.UNEXPLAINED_WAIT}),
            (self._allocations, unreleased.DETECTORS),
            (self._release_tracker, {probe_release.DETECTOR}),
            (self._fairness, {fairness.PERSISTENT_UNFAIRNESS}),
            (self._in_service, gpu_in_service.DETECTORS),
            (self._reclaims, {quota_reclaim.DETECTOR}),
        ):
            tracker.resume(f for f in left_open if f.detector in detectors)
        for finding in left_open:
            if finding.detector == probe_release.DETECTOR:
                run = self.store.run(finding.subject["run_id"])
                if run is not None:
                    self._releases[run.run_id, finding.subject["node"]] = run
            elif finding.detector == STORE_UNREACHABLE:
                self._store_down = finding
            elif finding.detector == quota_reclaim.DETECTOR:
                since = finding.evidence.get("since")
                if isinstance(since, str):  # the wait it was opened on goes on being timed
                    self._room_since[finding.subject["run_id"]] = datetime.fromisoformat(since)
        if self.log_reader is None:
            return
        probes = [
            name
            for name, spec in self.catalog.items()
            if spec.workload.behaviour is Behaviour.LOG_CANARY
        ]
        since = self.clock.now() - CANARY_RESUME_LOOKBACK
        for run in self.store.runs_to_log_check(probes, since):
            self._queue_canary(run)
        for finding in left_open:
            if (
                finding.detector == PIPELINE_UNREACHABLE
                and finding.subject == self._pipeline_subject
            ):
                self._pipeline_down = finding

    def runs_changed(self, runs: Sequence[ProbeRun]) -> None:
        """Hand over runs that changed (from any thread); the next check takes them."""
        for run in runs:
            self._changed.put(run)

    def _take_changed(self) -> list[Finding]:
        """Queue every run that ended on nodes for its release check, and the log-canary runs
        that ended as expected for their read-back; return the events ended runs raise."""
        events = []
        while not self._changed.empty():
            run = self._changed.get()
            if run.finished_at is not None and run.job_id is not None:
                self._releases.update(((run.run_id, node), run) for node in run.node_names)
            self._queue_canary(run)
            events += gpu_unusable.evaluate(run)
        return events

    def _queue_canary(self, run: ProbeRun) -> None:
        spec = self.catalog.get(run.probe)
        if (
            self.log_reader is not None
            and spec is not None
            and spec.workload.behaviour is Behaviour.LOG_CANARY
            and run.outcome is Outcome.PASSED
            and run.finished_at is not None
            and run.run_id not in self._canaries
        ):
            due = run.finished_at + timedelta(seconds=self.log_settle_seconds)
            self._canaries[run.run_id] = _Canary(run, spec.workload.log_lines, due)

    def check(self, active: Sequence[ProbeRun]) -> list[Finding]:
        """Run every detector that has something new to look at; store and count what
        opened or closed."""
        snapshot = self.scheduler.get()
        if snapshot is not None and snapshot is not self._latest:
            self._sampled(snapshot)
        events = self._take_changed()
        nodes = self.nodes.get()
        now = self.clock.now()
        log_findings, log_checked = self._log_loss(now)
        changed = [
            *events,
            *self._store_reachable(now),
            *self._unexplained(active, now),
            *self._quota_reclaims(active, now),
            *self._unreleased(nodes, now),
            *self._gpus_in_service(nodes, now),
            *self._probe_release(nodes, now),
            *self._persistent(now),
            *log_findings,
        ]
        if self._pipeline_down is not None and log_checked:  # it names the canaries given up
            changed_or_named = [*changed, self._pipeline_down]
        else:
            changed_or_named = changed
        saved = self._outbox.put(changed_or_named)
        # Only once its findings are stored: a crash in between checks the run again after the
        # restart, and an event stored twice is one row (same key and time).
        if log_checked and saved:
            self.store.mark_log_checked(log_checked, now)
            for run_id in log_checked:
                del self._canaries[run_id]
        return changed

    def _fresh_scheduler(self, now: datetime) -> SchedulerSnapshot | None:
        """The latest scheduler snapshot while it still speaks for now; None once it is older
        than scheduler_max_age_seconds (the scheduler cannot be read: blind time)."""
        latest = self._latest
        if latest is None or (now - latest.at).total_seconds() > self.scheduler_max_age_seconds:
            return None
        return latest

    def _unexplained(self, active: Sequence[ProbeRun], now: datetime) -> list[Finding]:
        scheduler = self._fresh_scheduler(now)
        if scheduler is None:  # blind to the scheduler: nothing is confirmed or closed
            self._waits.blind()
            return []
        symptoms = []
        for run in active:
            job = unexplained_wait.pending_probe(run)
            if job is not None:
                symptoms += unexplained_wait.unexplained_waits(
                    job, scheduler, self.rules.fairness, self.quotas
                )
        # The runs pending now are every wait there is: one no longer listed has ended.
        return self._waits.update(symptoms, now, covers_all, as_of=scheduler.at)

    def _quota_reclaims(self, active: Sequence[ProbeRun], now: datetime) -> list[Finding]:
        """Within-quota probes still held by the quota after an over-quota one ended and the
        tenant's own usage left room. The runs' reasons come from following them; a stale
        scheduler snapshot says the platform cannot be read, so nothing is judged then."""
        scheduler = self._fresh_scheduler(now)
        if scheduler is None:
            self._reclaims.blind()
            return []
        reclaims = []
        for run in active:
            over = run.reclaims_run_id
            if over is None:
                continue
            if over not in self._over_quota_ends:
                stored = self.store.run(over)
                self._over_quota_ends[over] = stored.finished_at if stored else None
            ended = self._over_quota_ends[over]
            if ended is None:
                continue
            # Room counts from the first snapshot that shows it, and starts over when the
            # tenant's own work fills the quota again.
            if scheduler.at >= ended and quota_reclaim.has_room(run, scheduler, self.quotas):
                self._room_since.setdefault(run.run_id, max(ended, scheduler.at))
            else:
                self._room_since.pop(run.run_id, None)
            reclaims.append(
                quota_reclaim.Reclaim(run, over, ended, self._room_since.get(run.run_id))
            )
        waiting = {r.reclaims_run_id for r in active}
        self._over_quota_ends = {k: v for k, v in self._over_quota_ends.items() if k in waiting}
        pending = {r.run_id for r in active}
        self._room_since = {k: v for k, v in self._room_since.items() if k in pending}
        symptoms = quota_reclaim.evaluate(
            reclaims,
            scheduler,
            now,
            reclaim_seconds=self.quota_reclaim_seconds,
            quotas=self.quotas,
        )
        # The active runs are every reclaim still waiting: one no longer listed has ended.
        return self._reclaims.update(symptoms, now, covers_all, as_of=scheduler.at)

    def _unreleased(self, nodes: Mapping[str, NodeSnapshot], now: datetime) -> list[Finding]:
        scheduler = self._fresh_scheduler(now)
        if scheduler is None:
            self._allocations.blind()
            return []
        symptoms = unreleased.evaluate(
            scheduler,
            nodes,
            now,
            grace_seconds=self.rules.node.grace_seconds,
            stuck_grace_seconds=self.rules.stuck_terminating.grace_seconds,
            snapshot_max_age_seconds=self.rules.probe_release.snapshot_max_age_seconds,
            memory_tolerance_bytes=self.rules.node.memory_tolerance_bytes,
        )
        # A fresh snapshot lists every node and job: what it no longer shows is gone.
        return self._allocations.update(symptoms, now, covers_all, as_of=scheduler.at)

    def _gpus_in_service(self, nodes: Mapping[str, NodeSnapshot], now: datetime) -> list[Finding]:
        """Nodes kept in service after a fatal GPU fault their agent reported."""
        scheduler = self._fresh_scheduler(now)
        seen = [fault for snapshot in nodes.values() for fault in gpu_in_service.faults(snapshot)]
        self._faults = gpu_in_service.remember(self._faults, seen, scheduler, now)
        if scheduler is None:
            self._in_service.blind()
            return []
        symptoms = gpu_in_service.evaluate(
            self._faults, scheduler, self.rules.gpu_in_service.grace_seconds
        )
        return self._in_service.update(symptoms, now, covers_all, as_of=scheduler.at)

    def _probe_release(self, nodes: Mapping[str, NodeSnapshot], now: datetime) -> list[Finding]:
        """A (run, node) is forgotten once judged clean (a finding on it closes then too), or
        unjudged after RELEASE_CHECK_HORIZON without an open finding: the work per cycle is
        the runs that ended within the horizon, plus open findings."""
        if not self._releases:
            return []
        rules = self.rules.probe_release
        check = probe_release.evaluate(
            [(run, node) for (_, node), run in self._releases.items()],
            self._fresh_scheduler(now),
            nodes,
            now,
            owners={job: ids for job, (ids, _) in self._owners.items()},
            grace_seconds=rules.grace_seconds,
            snapshot_max_age_seconds=rules.snapshot_max_age_seconds,
            memory_tolerance_bytes=self.rules.node.memory_tolerance_bytes,
        )
        changed = self._release_tracker.update(
            check.symptoms, now, partial(probe_release.covers, check)
        )
        still_open = {
            (f.subject["run_id"], f.subject["node"]) for f in self._release_tracker.open_findings()
        }
        for key, run in list(self._releases.items()):
            ended = run.finished_at or now
            if key in check.clean:
                del self._releases[key]
            elif ended < now - RELEASE_CHECK_HORIZON and key not in still_open:
                _log.info(
                    "probe release not checked: no agent snapshot", run_id=key[0], node=key[1]
                )
                del self._releases[key]
        return changed

    def _persistent(self, now: datetime) -> list[Finding]:
        """Re-weigh the last M completed window occurrences, of every window, each time one
        more completes."""
        if self._next_completion is not None and now < self._next_completion:
            return []
        self._next_completion = next_completion(self.calendar, now)
        m = self.rules.fairness.persistence_m
        lookback = now - timedelta(days=8 * m)
        completed = sorted(
            (
                occurrence
                for window in self.calendar.windows
                for occurrence in occurrences(self.calendar, window.name, lookback, now)
            ),
            key=lambda o: o.end,
        )
        recent = completed[-m:]
        if not recent:
            return []
        # A completed occurrence's assessment does not change: each is made once.
        self._assessments = {
            (o.window, o.start): self._assessments.get((o.window, o.start)) or self._assess(o)
            for o in recent
        }
        assessments = list(self._assessments.values())
        for assessment in assessments:
            if assessment.fairness_index is not None:
                window = assessment.occurrence.window
                self.metrics.fairness_index.labels(window).set(assessment.fairness_index)
        symptoms = fairness.evaluate(assessments, self.rules.fairness)
        return self._fairness.update(symptoms, now, partial(fairness.covers, assessments))

    def assessments(self) -> list[fairness.WindowAssessment]:
        """The window occurrences the last persistence check weighed, oldest first."""
        return sorted(self._assessments.values(), key=lambda a: a.occurrence.start)

    def _assess(self, occurrence: Occurrence) -> fairness.WindowAssessment:
        runs = [
            r
            for r in self.store.runs(
                probe=FAIRNESS_PROBE, since=occurrence.start, until=occurrence.end
            )
            if r.window == occurrence.window
        ]
        samples = self.store.queue_samples(occurrence.start, occurrence.end)
        capacity = fairness.capacity_over(
            self.store.node_states(occurrence.start),
            self.store.node_changes(occurrence.start, occurrence.end),
        )
        return fairness.assess_window(
            occurrence,
            runs,
            samples,
            self.weights,
            capacity,
            self.rules.fairness,
            quotas=self.quotas,
        )

    def _log_loss(self, now: datetime) -> tuple[list[Finding], list[str]]:
        """Findings of the canaries due now, and the run ids whose check is done: read back,
        or given up after CANARY_READ_TRIES failed reads."""
        if self.log_reader is None:
            return [], []
        found: list[Finding] = []
        done: list[str] = []
        for canary in self._canaries.values():
            if canary.due > now:
                continue
            run = canary.run
            since = (run.started_at or run.submitted_at or now) - CANARY_READ_MARGIN
            try:
                lines = self.log_reader.read(run.run_id, since, now)
            except BackendError as exc:
                canary.tries += 1
                self.metrics.log_reader_errors_total.labels(self.log_pipeline).inc()
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
                pipeline=self.log_pipeline,
                rules=self.rules.log,
                at=run.finished_at or now,
            )
            done.append(run.run_id)
        return found, done

    @property
    def _pipeline_subject(self) -> dict[str, str]:
        return {"pipeline": self.log_pipeline}

    def _pipeline_read(self, now: datetime, error: str | None) -> list[Finding]:
        """The pipeline's unreachable condition: opened by the first failed read, closed by
        the next one that succeeds (a tick that reads nothing leaves it as it is)."""
        down = self._pipeline_down
        if error is None:
            if down is None:
                return []
            self._pipeline_down = None
            return [replace(down, closed_at=now)]
        if down is not None:
            self._pipeline_down = replace(down, evidence={**down.evidence, "last_error": error})
            return []
        self._pipeline_down = Finding(
            detector=PIPELINE_UNREACHABLE,
            kind=FindingKind.CONDITION,
            subject=self._pipeline_subject,
            severity=Severity.CRITICAL,
            summary=f"log pipeline {self.log_pipeline} could not be read, log loss is unknown: "
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
        return [self._pipeline_down]

    def _store_reachable(self, now: datetime) -> list[Finding]:
        """The store's unreachable condition: open from the first operation that failed
        (any thread's) until the next one that succeeds. Stored once the store is back."""
        outage, down = self.store.outage, self._store_down
        if outage is None:
            self._store_down = None
            return [] if down is None else [replace(down, closed_at=now)]
        if down is not None:
            self._store_down = replace(down, evidence={**down.evidence, "last_error": outage.error})
            return []
        self._store_down = Finding(
            detector=STORE_UNREACHABLE,
            kind=FindingKind.CONDITION,
            subject={"store": self.store.where},
            severity=Severity.CRITICAL,
            summary=f"the store {self.store.where} failed, what the observer saw is kept in "
            f"memory until it is back: {outage.error}",
            opened_at=outage.since,
            closed_at=None,
            evidence={
                "error": outage.error,
                "last_error": outage.error,
                "rule": "a store operation failed; closed by the next one that succeeds",
            },
        )
        return [self._store_down]

    def _give_up(self, run_id: str) -> None:
        """Name a canary never read back in the open condition (a failed read opened it)."""
        down = self._pipeline_down
        if down is not None:
            given_up = down.evidence.get("canaries_given_up")
            named = [*given_up, run_id] if isinstance(given_up, list) else [run_id]
            self._pipeline_down = replace(
                down, evidence={**down.evidence, "canaries_given_up": named}
            )
