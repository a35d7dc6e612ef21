"""The controller's work as plain functions of (clock, backend, store): launch the plan's
probes in their windows, follow the runs, sample the scheduler. APScheduler (schedule.py) or
the simulator call them; neither is needed to reason about them."""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from queue import SimpleQueue

from observer.backends.base import FinishedJobs, QuotaChange
from observer.backends.counted import CountedBackend
from observer.clock import Clock
from observer.controller.detect import Detection
from observer.controller.estimates import ExpectedStarts
from observer.controller.runs import ProbeRunner
from observer.controller.views import Published
from observer.controller.watches.outages import SpaceLow
from observer.domain import (
    Finding,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Outcome,
    ProbeRun,
    RunState,
    SchedulerSnapshot,
)
from observer.errors import BackendError, StoreError
from observer.logging_setup import get_logger
from observer.metrics import ControllerMetrics
from observer.probes.catalog import QUOTA_PROBE, RECLAIM_PROBE, ProbeSpec
from observer.probes.windows import Calendar
from observer.records import (
    JOB_SLOT,
    NO_PENDING_REASON,
    QUOTA_CHANGED,
    ControllerRun,
    InterventionSource,
    JobOrigin,
    JobSlot,
    JobTally,
    JobWait,
    PendingTime,
    StoredIntervention,
    job_origin,
    job_slot,
)
from observer.reports.compute.causes import MARGIN, Classified, classify_job
from observer.storage.store import Store

_log = get_logger("observer.controller")

# How far before a listing the evidence on its failed jobs is read, at most: a job that ran
# for a week is judged by its last day, not every tally reading the week.
JOB_EVIDENCE_LOOKBACK = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class PlanEntry:
    window: str
    probe: str
    every_seconds: float
    tenants: tuple[str, ...]


class Controller:
    def __init__(
        self,
        backend: CountedBackend,
        store: Store,
        runner: ProbeRunner,
        calendar: Calendar,
        plan: Sequence[PlanEntry],
        catalog: Mapping[str, ProbeSpec],
        clock: Clock,
        metrics: ControllerMetrics,
        detection: Detection,
        nodes: Published[Mapping[str, NodeSnapshot]],
        scheduler: Published[SchedulerSnapshot | None],
        room: Published[SpaceLow | None],
        expected: ExpectedStarts,
    ) -> None:
        """`nodes` is published by the fleet reader; `scheduler` by sample_scheduler; `room`
        by the store's upkeep; `expected` follows the snapshots for the runner's estimates."""
        self.expected = expected
        self.backend = backend
        self.store = store
        self.runner = runner
        self.calendar = calendar
        self.plan = tuple(plan)
        self.catalog = catalog
        self._clock = clock
        self._metrics = metrics
        self.detection = detection
        self._queues_seen: set[tuple[str, str]] = set()
        self.nodes = nodes
        # The last snapshot read, whose jobs name the tenant of each GPU the agents report.
        self.scheduler = scheduler
        self.room = room
        # Launches the plan asked for, made by the follow loop: the runner is that loop's own,
        # so a submission that hangs holds up no other loop.
        self._launches: SimpleQueue[PlanEntry] = SimpleQueue()
        self._run: ControllerRun | None = None

    def start(self, watching: tuple[str, ...]) -> list[ProbeRun]:
        """Record this run and the optional sources it reads (`watching`), adopt or reconcile
        what a previous controller left on the platform, and pick up the log checks it left
        undone."""
        previous = self.store.controller_runs()[-1:]
        self._run = self.store.start_controller_run(
            self._clock.now(), socket.gethostname(), os.getpid(), watching
        )
        for run in previous:
            _log.info(
                "previous controller run ended",
                at=run.ended_at.isoformat(),
                cause="stopped" if run.stopped_at else "killed or crashed",
            )
        changed = self.runner.reconcile(self.catalog)
        self.detection.runs_changed(changed)
        self.detection.resume()
        return changed

    def request_launch(self, entry: PlanEntry) -> None:
        """Ask for one plan entry's launch if its window is open now (from the plan's
        thread); the next follow makes it."""
        if self._open(entry):
            self._launches.put(entry)

    def launch(self, entry: PlanEntry) -> list[ProbeRun]:
        """Launch one plan entry's probe now if its window is open."""
        return self._launch(entry) if self._open(entry) else []

    def _open(self, entry: PlanEntry) -> bool:
        return entry.window in self.calendar.windows_at(self._clock.now())

    def _launch(self, entry: PlanEntry) -> list[ProbeRun]:
        launched = self.runner.launch(self.catalog[entry.probe], entry.tenants, entry.window)
        return launched + self._reclaim(launched)

    def follow(self) -> list[ProbeRun]:
        """Make the launches asked for, then bring every active run up to date."""
        while not self._launches.empty():
            self._launch(self._launches.get())
        changed = self.runner.follow()
        changed += self._reclaim(changed)
        self.detection.runs_changed(changed)
        return changed

    def _reclaim(self, runs: Sequence[ProbeRun]) -> list[ProbeRun]:
        """A within-quota probe for each tenant whose over-quota run just ended as it should:
        the release half of the quota's lifecycle."""
        spec = self.catalog.get(RECLAIM_PROBE)
        if spec is None:
            return []
        ended = [
            run
            for run in runs
            if run.probe == QUOTA_PROBE
            and run.state is RunState.DONE
            and run.outcome is Outcome.PASSED
        ]
        return [r for run in ended if (r := self.runner.reclaim(spec, run)) is not None]

    def detect(self) -> list[Finding]:
        """The controller-side detectors over what follow and sampling last saw."""
        return self.detection.check(self.runner.active())

    def sample_scheduler(self) -> SchedulerSnapshot:
        """Read the scheduler, publish and store its snapshot, with the time the tenants'
        jobs pending in the one before spent pending since, by reason, and the platform's
        estimates of waiting jobs' starts (first seen, and at their start)."""
        snapshot = self.backend.snapshot()
        before = self.scheduler.get()
        self.scheduler.publish(snapshot)
        pending = pending_times(before, snapshot.at) if before is not None else []
        estimates = self.expected.observe(snapshot)
        try:
            self.store.save_scheduler_snapshot(snapshot, pending, estimates)
        except StoreError as exc:  # not kept: the store's outage is its own blind time
            _log.warning("scheduler snapshot not stored", error=str(exc))
        m = self._metrics
        for record in estimates:
            if record.started_at is not None and record.first_expected_start_at is not None:
                error = (record.started_at - record.first_expected_start_at).total_seconds()
                m.wait_estimate_error_seconds.labels("platform").observe(error)
        current: set[tuple[str, str]] = set()
        for q in snapshot.queues:
            labels = (q.tenant, q.queue or "")
            current.add(labels)
            m.scheduler_pending_jobs.labels(*labels).set(q.pending_jobs)
            m.scheduler_pending_gpus.labels(*labels).set(q.pending_gpus)
            m.scheduler_running_gpus.labels(*labels).set(q.running_gpus)
            m.scheduler_longest_wait_seconds.labels(*labels).set(q.longest_wait_seconds)
        # A queue that emptied reads 0, not its last value.
        for labels in self._queues_seen - current:
            for gauge in (
                m.scheduler_pending_jobs,
                m.scheduler_pending_gpus,
                m.scheduler_running_gpus,
                m.scheduler_longest_wait_seconds,
            ):
                gauge.labels(*labels).set(0)
        self._queues_seen |= current
        for node in snapshot.nodes:
            pool = node.pool or ""
            m.scheduler_node_gpus.labels(node.name, pool, "total").set(node.gpus_total)
            m.scheduler_node_gpus.labels(node.name, pool, "allocated").set(node.gpus_allocated)
        m.scheduler_last_snapshot_timestamp_seconds.set(snapshot.at.timestamp())
        return snapshot

    def tally_jobs(self) -> list[JobSlot]:
        """Count every tenant's jobs that finished since the last listing ended (from the
        start of its slot, so a slot's counts are replaced whole) up to now, each failed one
        by its cause, and store the quota changes made in that time as detected
        interventions. A listing that fails raises, stores nothing, and the next one covers
        the same time again."""
        now = self._clock.now()
        since = job_slot(self.store.jobs_listed_until() or now)
        listing = self.backend.finished_jobs(since, now)
        changes = self.backend.quota_changes(since, now)
        slots = tally_slots(listing, self._job_classifier(listing))
        # before the slots: they mark the period read, and the changes are stored once
        for change in changes:
            self.store.add_detected_intervention(quota_intervention(change))
        self.store.save_job_slots(slots)
        return slots

    def _job_classifier(self, listing: FinishedJobs) -> Callable[[JobStatus], Classified | None]:
        """Classes the listing's failed jobs by what happened on their nodes while they ran:
        the findings and node changes from the first one's start (JOB_EVIDENCE_LOOKBACK
        before the listing at most), read once for them all; the observer's probes against
        what each expects, from its stored run."""
        began = [
            job.started_at or job.submitted_at or listing.since
            for job in listing.jobs
            if job.phase is JobPhase.FAILED
        ]
        if not began:
            return lambda job: None
        start = max(min(began), listing.since - JOB_EVIDENCE_LOOKBACK) - MARGIN
        end = listing.until + MARGIN
        findings = [f for f in self.store.findings(since=start) if f.opened_at <= end]
        changes = self.store.node_changes(start, end)
        probes = [job.run_id for job in listing.jobs if job.phase is JobPhase.FAILED and job.run_id]
        expected = {r.run_id: r.expectation for i in probes if (r := self.store.run(i))}

        def classify(job: JobStatus) -> Classified | None:
            expectation = expected.get(job.run_id) if job.run_id else None
            return classify_job(job, findings, changes, expectation)

        return classify

    def alive(self) -> None:
        """Record that this run is still alive: the last record is where a kill cut it off."""
        assert self._run is not None, "alive() before start()"
        self.store.controller_alive(self._run.id, self._clock.now())

    def stop(self) -> list[ProbeRun]:
        """Cancel every active probe, list the jobs once more (the last stretch, the
        cancelled probes too, would otherwise wait for the next run to be counted), and
        record this run's clean stop."""
        cancelled = self.runner.cancel_all("the controller shut down")
        try:
            self.tally_jobs()
        except (BackendError, StoreError) as exc:  # the next run lists the same stretch
            _log.warning("last job listing failed", error=str(exc))
        if self._run is not None:
            self.store.controller_stopped(self._run.id, self._clock.now())
        return cancelled


def quota_intervention(change: QuotaChange) -> StoredIntervention:
    """A quota change the platform recorded, as the intervention it is."""
    return StoredIntervention(
        at=change.at,
        by=change.actor,
        reason=change.change,
        subject=dict(change.subject),
        source=InterventionSource.DETECTED,
        detail={"action": QUOTA_CHANGED, "change": change.change}
        | ({"manager": change.manager} if change.manager else {}),
    )


def pending_times(before: SchedulerSnapshot, now: datetime) -> list[PendingTime]:
    """The time from snapshot `before` to `now` of every tenant's own job pending in it (not
    the observer's: its runs keep their own), counted under the reason it had then, as a
    probe run's is, cut at the slots' edges; one record per slot, tenant and reason."""
    held = Counter(
        (job.tenant, job.reason or NO_PENDING_REASON)
        for job in before.jobs
        if job.phase is JobPhase.PENDING and job_origin(job) is JobOrigin.TENANT
    )
    times: list[PendingTime] = []
    start = before.at
    while held and start < now:
        slot = job_slot(start)
        end = min(slot + JOB_SLOT, now)
        seconds = (end - start).total_seconds()
        times += [
            PendingTime(slot, tenant, reason, jobs * seconds)
            for (tenant, reason), jobs in sorted(held.items())
        ]
        start = end
    return times


def tally_slots(
    listing: FinishedJobs, classify: Callable[[JobStatus], Classified | None]
) -> list[JobSlot]:
    """A listing that starts on a slot, as the slots it covers: jobs counted by the slot of
    their end, tenant, phase, reason, the cause `classify` gives a failed one and who
    submitted it (the observer's own probes apart), and the waits of those that started, by
    tenant and who submitted it, to the whole second; the last slot listed as far as the
    listing goes."""
    if job_slot(listing.since) != listing.since:
        raise ValueError(f"a listing from {listing.since} does not start on a slot")
    counts = Counter(
        (
            job_slot(job.finished_at),
            job.tenant,
            job.phase,
            job.reason or "",
            classified.cause.value if (classified := classify(job)) else "",
            job_origin(job),
        )
        for job in listing.jobs
        if job.finished_at is not None
    )
    by_slot: dict[datetime, list[JobTally]] = {}
    for (at, tenant, phase, reason, cause, origin), jobs in sorted(counts.items()):
        tally = JobTally(tenant, phase, reason or None, cause or None, jobs, origin)
        by_slot.setdefault(at, []).append(tally)
    waited = Counter(
        (
            job_slot(job.finished_at),
            job.tenant,
            job_origin(job),
            round((job.started_at - job.submitted_at).total_seconds()),
        )
        for job in listing.jobs
        if job.finished_at is not None
        and job.started_at is not None
        and job.submitted_at is not None
    )
    waits_by_slot: dict[datetime, list[JobWait]] = {}
    for (at, tenant, origin, seconds), jobs in sorted(waited.items()):
        waits_by_slot.setdefault(at, []).append(JobWait(tenant, max(seconds, 0), jobs, origin))
    slots = []
    start = listing.since
    while start < listing.until:
        end = min(start + JOB_SLOT, listing.until)
        tallies = tuple(by_slot.get(start, ()))
        waits = tuple(waits_by_slot.get(start, ()))
        slots.append(JobSlot(start, end, listing.complete, listing.note, tallies, waits))
        start += JOB_SLOT
    return slots
