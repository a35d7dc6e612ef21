"""Probe runs from submission to outcome, with no run lost, leaked or counted twice.

A run is stored *before* it is submitted, so a controller that dies between the two finds
the run on restart and either adopts the job the platform holds for it or records that the
submission never landed. Jobs of the observer that the store does not know are cancelled:
nothing runs on the platform that is not accounted for.

An isolation probe (expectation DENIED) submits nothing: each tenant's credentials try to
read every other configured tenant's work, and the run is stored once, already done, PASSED
when every try was refused and FAILED (ISOLATION_BREACH, a must-fix) when any got through.

A copy that came due and was not submitted is stored as a ProbeSkip with its reason, for the
reports' coverage of each probe; one skipped because the store was down cannot be, and is
counted by the metric alone (the outage is its own blind time)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from observer.backends.base import SchedulerBackend
from observer.clock import Clock
from observer.domain import (
    AccessAttempt,
    Attempt,
    Expectation,
    JobPhase,
    JobRequest,
    JobStatus,
    Outcome,
    ProbeRun,
    RunState,
)
from observer.errors import BackendError, ProbeError, StoreError
from observer.logging_setup import get_logger
from observer.metrics import ControllerMetrics
from observer.probes.catalog import DEFAULT_DEADLINE_SECONDS, ProbeSpec
from observer.probes.outcome import (
    CONTROLLER_SHUTDOWN,
    ISOLATION_BREACH,
    JOB_FORGOTTEN,
    PROBE_NOT_RUNNABLE,
    REQUEUED,
    SUBMISSION_ERROR,
    SUBMISSION_FAILED,
    SUBMISSION_NOT_CONFIRMED,
    judge,
)
from observer.records import NO_PENDING_REASON, ProbeSkip, SkipReason
from observer.storage.store import Store
from observer.storage.write_behind import WriteBehind

_log = get_logger("observer.controller.runs")
_ANSWER_CHARS = 300  # of each platform answer kept in an isolation run's message


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    queue: str | None = None
    priority: str | None = None
    quota_gpus: int | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    max_gpus: int
    max_gpus_per_tenant: int


class ProbeRunner:
    """Owned by one thread at a time (the follow loop's, after the start): nothing here is
    locked, and other threads read only `active()`, published whole after each change."""

    def __init__(
        self,
        backend: SchedulerBackend,
        store: Store,
        clock: Clock,
        metrics: ControllerMetrics,
        tenants: Mapping[str, Tenant],
        budget: Budget,
        expected_wait: Callable[[str | None], float | None] = lambda queue: None,
    ) -> None:
        """`expected_wait`: the observer's own estimate of a probe's wait in a queue, made at
        its submission (estimates.py)."""
        self._expected_wait = expected_wait
        self._backend = backend
        self._store = store
        self._clock = clock
        self._metrics = metrics
        self._tenants = tenants
        self._budget = budget
        self._active: dict[str, ProbeRun] = {}
        self._deadlines: dict[str, datetime] = {}
        self._last_seen: dict[str, tuple[datetime, str | None]] = {}
        # The active runs as of the last change, for any thread to read without waiting.
        self._published: tuple[ProbeRun, ...] = ()
        # What a store outage kept from the store: written first by the next follow.
        self._unsaved: WriteBehind[ProbeRun] = WriteBehind(store.save_runs, lambda r: r.run_id)

    def active(self) -> tuple[ProbeRun, ...]:
        return self._published

    def reconcile(self, catalog: Mapping[str, ProbeSpec]) -> list[ProbeRun]:
        """On start: take over the runs the store says are active and square them with the
        jobs the platform holds. Returns the runs that changed."""
        on_platform = {j.run_id: j for j in self._backend.probe_jobs() if j.run_id}
        changed: list[ProbeRun] = []
        for run in self._store.runs(active_only=True):
            job = on_platform.pop(run.run_id, None)
            spec = catalog.get(run.probe)
            self._deadlines[run.run_id] = _deadline(run, spec)
            if run.job_id is None and job is None:
                changed.append(
                    self._end(
                        run,
                        Outcome.LOST,
                        SUBMISSION_NOT_CONFIRMED,
                        "the controller stopped before the platform confirmed "
                        "the submission, and the platform holds no such job",
                    )
                )
                continue
            if run.job_id is None and job is not None:
                adopted = replace(run, job_id=job.job_id)
                changed.append(adopted)
                self._active[run.run_id] = adopted
            else:
                self._active[run.run_id] = run
        for job in on_platform.values():
            _log.warning(
                "cancelling a probe job no run accounts for", job_id=job.job_id, run_id=job.run_id
            )
            self._backend.cancel(job.job_id)
        self._unsaved.save(changed)
        changed += self.follow()
        self._publish_active()
        return changed

    def launch(self, spec: ProbeSpec, tenants: Iterable[str], window: str | None) -> list[ProbeRun]:
        if spec.expectation is Expectation.DENIED:
            # No job and no GPUs: nothing to budget or follow.
            return [run for name in tenants if (run := self._isolation(spec, name, window))]
        launched: list[ProbeRun] = []
        for name in tenants:
            tenant = self._tenants[name]
            for _ in range(spec.copies):
                if not self._within_budget(tenant.name, spec.workload.gpus):
                    _log.info("probe skipped: over budget", probe=spec.name, tenant=name)
                    self._skipped(spec, name, window, SkipReason.BUDGET)
                    continue
                run = self._submit(spec, tenant, window)
                if run is not None:
                    launched.append(run)
        self._publish_active()
        return launched

    def reclaim(self, spec: ProbeSpec, over_quota: ProbeRun) -> ProbeRun | None:
        """After an over-quota run ended as it should (refused, or held and cancelled): a
        probe within the tenant's quota, whose wait to start counts from that run's end."""
        tenant = self._tenants[over_quota.tenant]
        if tenant.quota_gpus is not None and spec.workload.gpus > tenant.quota_gpus:
            return None  # no probe fits within it
        if not self._within_budget(tenant.name, spec.workload.gpus):
            _log.info("probe skipped: over budget", probe=spec.name, tenant=tenant.name)
            self._skipped(spec, tenant.name, over_quota.window, SkipReason.BUDGET)
            return None
        run = self._submit(spec, tenant, over_quota.window, reclaims=over_quota.run_id)
        self._publish_active()
        return run

    def _skipped(
        self, spec: ProbeSpec, tenant: str, window: str | None, reason: SkipReason
    ) -> None:
        self._metrics.probe_runs_skipped_total.labels(spec.name, reason.value).inc()
        skip = ProbeSkip(self._clock.now(), spec.name, tenant, window, reason)
        try:
            self._store.add_probe_skips([skip])
        except StoreError as exc:  # not kept: the store's outage is its own blind time
            _log.warning("probe skip not stored", probe=spec.name, error=str(exc))

    def _isolation(self, spec: ProbeSpec, name: str, window: str | None) -> ProbeRun | None:
        """One tenant's isolation run: its credentials against every other tenant's work."""
        tenant = self._tenants[name]
        others = [other for other in self._tenants if other != name]
        if not others:
            _log.info("isolation probe skipped: no other tenant", probe=spec.name, tenant=name)
            self._skipped(spec, name, window, SkipReason.NO_OTHER_TENANT)
            return None
        run = ProbeRun(
            run_id=uuid.uuid4().hex,
            probe=spec.name,
            tenant=name,
            queue=tenant.queue,
            window=window,
            expectation=spec.expectation,
            gpus=spec.workload.gpus,
            nodes=spec.workload.nodes,
            state=RunState.RUNNING,
            submitted_at=self._clock.now(),  # no start: it waited in no queue
        )
        attempts: list[AccessAttempt] = []
        try:
            for other in others:
                attempts += self._backend.probe_isolation(name, other)
        except ProbeError as exc:
            return self._save(self._end(run, Outcome.REJECTED, PROBE_NOT_RUNNABLE, str(exc)))
        except BackendError as exc:
            # No verdict either way: counted as blind time, tried again at the next launch.
            _log.warning("isolation probe not judged", tenant=name, error=str(exc))
            self._skipped(spec, name, window, SkipReason.BACKEND_ERROR)
            return None
        breaches = [a for a in attempts if a.allowed]
        if breaches:
            _log.warning(
                "isolation breach",
                tenant=name,
                allowed=[f"{a.action} in {a.target}" for a in breaches],
            )
        outcome, reason = (Outcome.FAILED, ISOLATION_BREACH) if breaches else (Outcome.PASSED, None)
        return self._save(self._end(run, outcome, reason, isolation_message(attempts)))

    def follow(self) -> list[ProbeRun]:
        """Bring every active run up to date with the platform; return those that changed."""
        if not self._active:
            self._unsaved.save(())
            return []
        now = self._clock.now()
        changed: list[ProbeRun] = []
        unconfirmed = [r for r in self._active.values() if r.job_id is None]
        if unconfirmed:
            held = {j.run_id: j for j in self._backend.probe_jobs() if j.run_id}
            for run in unconfirmed:
                job = held.get(run.run_id)
                if job is not None:
                    self._active[run.run_id] = replace(run, job_id=job.job_id)
                else:
                    # The platform answers and holds no such job: the submission never landed.
                    changed.append(self._end(run, Outcome.REJECTED, SUBMISSION_FAILED, run.message))
        ids = [r.job_id for r in self._active.values() if r.job_id]
        statuses = self._backend.jobs(ids)
        for run in [r for r in self._active.values() if r.job_id]:
            updated = self._update(run, statuses.get(run.job_id or ""), now)
            if updated != run:
                changed.append(updated)
        self._unsaved.save(changed)
        self._publish_active()
        return changed

    def cancel_all(self, why: str) -> list[ProbeRun]:
        """Cancel every active run's job (controller shutdown): no probe outlives us."""
        ended = []
        for run in list(self._active.values()):
            if run.job_id is not None:
                try:
                    self._backend.cancel(run.job_id)
                except BackendError as exc:
                    _log.error("could not cancel a probe job", job_id=run.job_id, error=str(exc))
                    continue
            ended.append(self._end(run, Outcome.CANCELLED, CONTROLLER_SHUTDOWN, why))
        self._unsaved.save(ended)
        self._publish_active()
        return ended

    def _submit(
        self, spec: ProbeSpec, tenant: Tenant, window: str | None, reclaims: str | None = None
    ) -> ProbeRun | None:
        now = self._clock.now()
        run = ProbeRun(
            run_id=uuid.uuid4().hex,
            probe=spec.name,
            tenant=tenant.name,
            queue=tenant.queue,
            window=window,
            expectation=spec.expectation,
            gpus=spec.workload.gpus,
            nodes=spec.workload.nodes,
            state=RunState.SUBMITTED,
            submitted_at=now,
            reclaims_run_id=reclaims,
            expected_wait_seconds=self._expected_wait(tenant.queue),
        )
        try:
            # Stored before it is submitted, or not submitted: see the module's docstring.
            self._store.save_runs([run])
        except StoreError as exc:
            self._metrics.probe_runs_skipped_total.labels(spec.name, "store_error").inc()
            _log.warning("probe skipped: store unreachable", probe=spec.name, error=str(exc))
            return None
        self._active[run.run_id] = run
        self._deadlines[run.run_id] = _deadline(run, spec)
        request = JobRequest(
            run.run_id, spec.name, tenant.name, tenant.queue, spec.workload, tenant.priority
        )
        try:
            job_id = self._backend.submit(request)
        except ProbeError as exc:
            outcome = (
                Outcome.PASSED if spec.expectation is Expectation.BLOCKED else Outcome.REJECTED
            )
            return self._save(self._end(run, outcome, "Rejected", str(exc)))
        except BackendError as exc:
            # Whether the platform took it is unknown: follow() looks for it by run id.
            _log.warning("submission unconfirmed", run_id=run.run_id, error=str(exc))
            return self._save(replace(run, message=f"submission failed: {exc}"))
        except Exception as exc:  # a bug or a bad host: this run fails, not the whole launch
            _log.error("submission failed", run_id=run.run_id, error=repr(exc))
            message = f"submit raised {type(exc).__name__}: {exc}"
            return self._save(self._end(run, Outcome.REJECTED, SUBMISSION_ERROR, message))
        return self._save(replace(run, job_id=job_id, state=RunState.PENDING))

    def _update(self, run: ProbeRun, status: JobStatus | None, now: datetime) -> ProbeRun:
        if status is None:
            return self._end(
                run, Outcome.LOST, JOB_FORGOTTEN, "the platform no longer knows the job"
            )
        seen_at, seen_reason = self._last_seen.get(run.run_id, (now, None))
        reasons = dict(run.pending_reasons)
        if seen_reason is not None:
            reasons[seen_reason] = reasons.get(seen_reason, 0.0) + (now - seen_at).total_seconds()
        pending = status.phase is JobPhase.PENDING
        held = (status.reason or NO_PENDING_REASON) if pending else None
        self._last_seen[run.run_id] = (now, held)
        if pending and status.reason:
            reasons.setdefault(status.reason, 0.0)
        run = _requeued(run, status, now)
        run = replace(
            run,
            job_id=status.job_id,
            queue=status.queue or run.queue,
            user=status.user or run.user,
            state=_state(status.phase),
            # a requeue resets the platform's submit time (Slurm's): the first one stays
            submitted_at=run.submitted_at
            if run.attempts
            else status.submitted_at or run.submitted_at,
            started_at=status.started_at or run.started_at,
            eligible_at=(status.eligible_at or run.eligible_at) if run.attempts else None,
            finished_at=status.finished_at or run.finished_at,
            exit_code=status.exit_code,
            reason=status.reason,
            message=status.message,
            pending_reasons=reasons,
            node_names=status.nodes or run.node_names,
            owner_ids=status.owner_ids or run.owner_ids,
        )
        self._active[run.run_id] = run
        outcome = judge(run.expectation, status)
        if outcome is not None:
            if not status.phase.finished:
                # Settled while still held (a quota probe, a bad image): release it.
                self._backend.cancel(status.job_id)
            return self._end(run, outcome, run.reason, run.message)
        if now >= self._deadlines[run.run_id]:
            # The observer gave up: the outcome says so, the reason stays the platform's last
            # word on the job (what held it pending), and the reports explain from both.
            self._backend.cancel(status.job_id)
            return self._end(run, Outcome.TIMED_OUT, run.reason, run.message)
        return run

    def _end(
        self, run: ProbeRun, outcome: Outcome, reason: str | None, message: str | None
    ) -> ProbeRun:
        ended = replace(
            run,
            state=RunState.DONE,
            outcome=outcome,
            finished_at=run.finished_at or self._clock.now(),
            reason=reason,
            message=message,
        )
        self._active.pop(run.run_id, None)
        self._deadlines.pop(run.run_id, None)
        self._last_seen.pop(run.run_id, None)
        self._metrics.probe_runs_total.labels(
            run.probe, run.tenant, run.window or "", outcome.value
        ).inc()
        if ended.queue_wait_seconds is not None:
            self._metrics.probe_queue_wait_seconds.labels(
                run.probe, run.tenant, run.window or ""
            ).observe(ended.queue_wait_seconds)
        error = ended.expected_wait_error_seconds
        if error is not None:
            self._metrics.wait_estimate_error_seconds.labels("observer").observe(error)
        if ended.run_seconds is not None:
            self._metrics.probe_run_seconds.labels(run.probe, run.tenant).observe(ended.run_seconds)
        _log.info(
            "probe run ended",
            run_id=run.run_id,
            probe=run.probe,
            tenant=run.tenant,
            outcome=outcome.value,
            reason=reason,
        )
        return ended

    def _save(self, run: ProbeRun) -> ProbeRun:
        self._unsaved.save([run])
        if run.state is not RunState.DONE:
            self._active[run.run_id] = run
        return run

    def _within_budget(self, tenant: str, gpus: int) -> bool:
        active = self._active.values()
        total = sum(r.gpus for r in active)
        mine = sum(r.gpus for r in active if r.tenant == tenant)
        return (
            total + gpus <= self._budget.max_gpus
            and mine + gpus <= self._budget.max_gpus_per_tenant
        )

    def _publish_active(self) -> None:
        self._published = tuple(self._active.values())
        for name in self._tenants:
            runs = [r for r in self._active.values() if r.tenant == name]
            self._metrics.probe_runs_active.labels(name).set(len(runs))
            self._metrics.probe_gpus_active.labels(name).set(sum(r.gpus for r in runs))


def isolation_message(attempts: Sequence[AccessAttempt]) -> str:
    """What an isolation run records: what got through, what was refused, then every try with
    the platform's answer ('allowed: list pods in prod; denied: ... Answers: ...')."""

    def tried(attempt: AccessAttempt) -> str:
        return f"{attempt.action} in {attempt.target}"

    allowed = [tried(a) for a in attempts if a.allowed]
    denied = [tried(a) for a in attempts if not a.allowed]
    summary = "; ".join(
        f"{word}: {', '.join(items)}"
        for word, items in (("allowed", allowed), ("denied", denied))
        if items
    )
    answers = " | ".join(
        f"{tried(a)}: {_shorten(a.detail, _ANSWER_CHARS)}"
        for a in sorted(attempts, key=lambda a: not a.allowed)
    )
    return f"{summary}. Answers: {answers}" if attempts else "nothing tried"


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _deadline(run: ProbeRun, spec: ProbeSpec | None) -> datetime:
    # A run whose probe left the catalog keeps the default deadline.
    seconds = spec.deadline_seconds if spec else DEFAULT_DEADLINE_SECONDS
    assert run.submitted_at is not None  # the runner stamps every run it creates
    return run.submitted_at + timedelta(seconds=seconds)


def _requeued(run: ProbeRun, status: JobStatus, now: datetime) -> ProbeRun:
    """The run with the attempts the platform ended and queued again: in the platform's own
    words where it names them, else (its accounting unreachable, or only a count, or only a
    running job seen pending again) as the runner saw the attempt. A new attempt starts with
    no start and no nodes, eligible from when the platform queued it again."""
    seen = len(run.attempts)
    back_to_pending = run.state is RunState.RUNNING and status.phase is JobPhase.PENDING
    ended = max(status.restarts, len(status.attempts), seen + back_to_pending)
    attempts = status.attempts if len(status.attempts) >= seen else run.attempts
    if len(attempts) < ended:
        # Slurm resets the submit time on a requeue: later than the start, it is the requeue.
        queued_again = status.submitted_at
        if queued_again is None or run.started_at is None or queued_again < run.started_at:
            queued_again = now
        seen_ending = Attempt(
            eligible_at=run.eligible_at or run.submitted_at,
            started_at=run.started_at,
            ended_at=queued_again,
            nodes=run.node_names,
            state=REQUEUED,
        )
        # attempts that began and ended between two looks left no trace but their count
        unseen = [Attempt(None, None, None, (), REQUEUED)] * (ended - len(attempts) - 1)
        attempts = (*attempts, seen_ending, *unseen)
    if ended == seen:  # nothing new; the platform may name what the runner recorded
        return run if attempts == run.attempts else replace(run, attempts=attempts)
    _log.warning(
        "probe job queued again",
        run_id=run.run_id,
        job_id=status.job_id,
        nodes=list(attempts[-1].nodes),
        state=attempts[-1].state,
        reason=attempts[-1].reason,
    )
    return replace(
        run,
        attempts=attempts,
        started_at=None,
        node_names=(),
        eligible_at=status.eligible_at or status.submitted_at or now,
    )


def _state(phase: JobPhase) -> RunState:
    if phase is JobPhase.PENDING:
        return RunState.PENDING
    if phase is JobPhase.RUNNING:
        return RunState.RUNNING
    return RunState.DONE
