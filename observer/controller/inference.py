"""The inference probe on the controller's loop: a service kept up on the platform, looked at
every few seconds (its replicas as the platform shows them, one real /infer request to each
ready one), carried through its changes (start; then in each plan window it runs through,
scaled back in, one scale-out and one rolling restart), each timed to ready with how long its
replicas waited for a node; the looks and phases stored, its two conditions tracked
(detectors/inference.py).

Owned by its loop's thread; nothing is shared but the store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from observer.backends.base import Replica, ServiceBackend, ServiceSpec
from observer.clock import Clock
from observer.controller.outbox import FindingsOutbox
from observer.detectors import inference
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.errors import BackendError, ProbeError, StoreError
from observer.logging_setup import get_logger
from observer.metrics import ControllerMetrics
from observer.probes.windows import Calendar, occurrence_of
from observer.records import InferencePhase, InferenceSample, PhaseKind
from observer.settings.inference import InferenceSettings
from observer.storage.store import Store
from observer.storage.write_behind import WriteBehind
from observer.workloads.serve import Answer, infer

_log = get_logger("observer.controller.inference")

Request = Callable[[str, float], Answer]


@dataclass(slots=True)
class _Phase:
    kind: PhaseKind
    started_at: datetime
    replicas_from: int
    replicas_to: int
    old_revisions: frozenset[str] = frozenset()  # a restart is over when none is left
    pending_seconds: float = 0.0
    pending_since: datetime | None = None
    pending_reason: str | None = None
    unavailable_seconds: float = 0.0


class InferenceWatch:
    def __init__(
        self,
        services: ServiceBackend,
        spec: ServiceSpec,
        rules: InferenceSettings,
        store: Store,
        clock: Clock,
        calendar: Calendar,
        metrics: ControllerMetrics,
        request: Request = infer,
    ) -> None:
        """`calendar`: the plan's windows, each of whose occurrences gets its own scale-out and
        restart. `request` sends one /infer to an address and times it on its own clock:
        latency is the real request's, whatever clock the controller runs on."""
        self._services = services
        self._spec = spec
        self._rules = rules
        self._store = store
        self._clock = clock
        self._calendar = calendar
        self._request = request
        self._metrics = metrics
        self._tracker = ConditionTracker()
        self._outbox = FindingsOutbox(store, metrics.findings)
        self._phases: WriteBehind[InferencePhase] = WriteBehind(
            store.save_inference_phases, lambda p: (p.kind, p.started_at)
        )
        self._desired = 0  # 0: not deployed yet
        self._started = False
        self._phase: _Phase | None = None
        self._next: tuple[PhaseKind, float] | None = None  # the next change and when (monotonic)
        self._last_look: datetime | None = None
        self._windows: frozenset[tuple[str, datetime]] = frozenset()  # occurrences now
        self._cycle_due = False  # a window began: scale in, then its scale-out and restart

    def resume(self) -> None:
        """Take over the service's conditions a previous controller left open."""
        self._tracker.resume(
            f for f in self._store.findings(open_only=True) if f.detector in inference.DETECTORS
        )

    def tick(self) -> None:
        now = self._clock.now()
        try:
            self._change(now)
        except (BackendError, ProbeError) as exc:  # still due: tried again at the next look
            _log.warning("inference service not changed", service=self._spec.name, error=str(exc))
        try:
            replicas = self._services.service_replicas(self._spec)
        except (BackendError, ProbeError) as exc:
            # Blind: nothing is known of the service, so no condition opens or closes.
            _log.warning("inference service not read", service=self._spec.name, error=str(exc))
            self._tracker.blind()
            return
        self._look(now, replicas)

    def stop(self) -> None:
        """Remove the service: it holds GPUs only while the observer watches it."""
        if self._desired:
            try:
                self._services.delete_service(self._spec)
            except (BackendError, ProbeError) as exc:
                _log.warning("inference service left", service=self._spec.name, error=str(exc))

    def _change(self, now: datetime) -> None:
        """Deploy, or make the change that is due (the platform's refusal leaves it due). A
        window's cycle waits for a change under way, so that none is cut short."""
        rules = self._rules
        windows = frozenset(
            (name, occurrence.start)
            for name in self._calendar.windows_at(now)
            if (occurrence := occurrence_of(self._calendar, name, now)) is not None
        )
        self._cycle_due |= bool(windows - self._windows) and self._started
        self._windows = windows
        if not self._desired:
            self._services.deploy_service(self._spec, rules.replicas)
            self._desired = rules.replicas
            self._phase = _Phase(PhaseKind.START, now, 0, rules.replicas)
            return
        if self._cycle_due and self._phase is None:
            if self._desired != rules.replicas:
                self._services.scale_service(self._spec, rules.replicas)
                self._desired = rules.replicas
            self._cycle_due = False
            self._plan_cycle()
            return
        if self._next is None or self._clock.monotonic() < self._next[1]:
            return
        kind = self._next[0]
        if kind is PhaseKind.SCALE_OUT:
            self._services.scale_service(self._spec, rules.scale_out_replicas)
            self._phase = _Phase(kind, now, self._desired, rules.scale_out_replicas)
            self._desired = rules.scale_out_replicas
        else:
            revisions = {r.revision for r in self._services.service_replicas(self._spec)}
            self._services.restart_service(self._spec)
            self._phase = _Phase(kind, now, self._desired, self._desired, frozenset(revisions))
        self._next = None

    def _look(self, now: datetime, replicas: Sequence[Replica]) -> None:
        ready = [r for r in replicas if r.ready and r.address]
        answers = [
            self._request(r.address or "", self._rules.request_timeout_seconds) for r in ready
        ]
        errors = sum(not a.ok for a in answers)
        for replica, answer in zip(ready, answers, strict=True):
            if not answer.ok:
                _log.info(
                    "inference request failed",
                    replica=replica.name,
                    status=answer.status,
                    error=answer.error,
                )
        pending = [r for r in replicas if r.pending_reason is not None]
        self._count(answers, len(ready), len(pending))
        sample = InferenceSample(
            at=now,
            service=self._spec.name,
            desired_replicas=self._desired,
            ready_replicas=len(ready),
            pending_replicas=len(pending),
            requests=len(answers),
            errors=errors,
            latencies_ms=tuple(round(a.seconds * 1000, 3) for a in answers if a.ok),
        )
        try:
            self._store.add_inference_samples([sample])
        except StoreError as exc:  # not kept: the store's outage is its own blind time
            _log.warning("inference sample not stored", error=str(exc))
        self._follow_phase(now, replicas, ready, pending, unavailable=len(answers) == errors)
        self._last_look = now
        phase = self._phase
        look = inference.ServiceLook(
            service=self._spec.name,
            tenant=self._spec.tenant,
            at=now,
            started=self._started,
            ready_replicas=len(ready),
            requests=len(answers),
            errors=errors,
            scale_out_since=phase.started_at
            if phase is not None and phase.kind is PhaseKind.SCALE_OUT
            else None,
            scale_out_to=phase.replicas_to if phase is not None else 0,
            # a replica that waited and now starts keeps its wait's words in the evidence
            pending_reason=next(
                (r.pending_reason for r in pending), phase.pending_reason if phase else None
            ),
        )
        self._outbox.put(
            self._tracker.update(inference.symptoms(look, self._rules), now, covers_all)
        )
        self._phases.save([])  # a phase the store could not take is written once it can

    def _count(self, answers: Sequence[Answer], ready: int, pending: int) -> None:
        m, name = self._metrics, self._spec.name
        for state, count in (("desired", self._desired), ("ready", ready), ("pending", pending)):
            m.inference_replicas.labels(name, state).set(count)
        for answer in answers:
            m.inference_requests_total.labels(name, "ok" if answer.ok else "error").inc()
            if answer.ok:
                m.inference_request_seconds.labels(name).observe(answer.seconds)

    def _follow_phase(
        self,
        now: datetime,
        replicas: Sequence[Replica],
        ready: Sequence[Replica],
        pending: Sequence[Replica],
        unavailable: bool,
    ) -> None:
        phase = self._phase
        if phase is None:
            return
        if pending:
            phase.pending_reason = pending[0].pending_reason
            if phase.pending_since is None:
                created = [r.created_at for r in pending if r.created_at is not None]
                phase.pending_since = max(min(created, default=now), phase.started_at)
        elif phase.pending_since is not None:
            phase.pending_seconds += (now - phase.pending_since).total_seconds()
            phase.pending_since = None
        if unavailable and self._started and self._last_look is not None:
            phase.unavailable_seconds += (
                now - max(self._last_look, phase.started_at)
            ).total_seconds()
        renewed = all(r.revision not in phase.old_revisions for r in replicas)
        if len(ready) < phase.replicas_to or not renewed:
            return
        if phase.pending_since is not None:
            phase.pending_seconds += (now - phase.pending_since).total_seconds()
        done = InferencePhase(
            service=self._spec.name,
            kind=phase.kind,
            started_at=phase.started_at,
            ready_at=now,
            replicas_from=phase.replicas_from,
            replicas_to=phase.replicas_to,
            pending_seconds=phase.pending_seconds,
            pending_reason=phase.pending_reason,
            unavailable_seconds=phase.unavailable_seconds,
        )
        _log.info(
            "inference phase ready",
            service=done.service,
            phase=done.kind.value,
            seconds=(now - done.started_at).total_seconds(),
            pending_seconds=done.pending_seconds,
        )
        self._phases.save([done])
        self._phase = None
        self._started = True
        if phase.kind is PhaseKind.START:
            self._plan_cycle()
        elif phase.kind is PhaseKind.SCALE_OUT:
            self._next = (
                PhaseKind.RESTART,
                self._clock.monotonic() + self._rules.restart_after_seconds,
            )

    def _plan_cycle(self) -> None:
        """The scale-out (when it scales out at all), then the restart."""
        rules, at = self._rules, self._clock.monotonic()
        if rules.scale_out_replicas > rules.replicas:
            self._next = (PhaseKind.SCALE_OUT, at + rules.scale_out_after_seconds)
        else:
            self._next = (PhaseKind.RESTART, at + rules.restart_after_seconds)
