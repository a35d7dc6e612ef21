"""The detect loop's tick: the controller-side watches (watches/, listed by compose.py) resumed
at start and checked in turn against one Look per check, what the controller already reads
(the runs in flight and those the follow loop handed over, the agents' and the scheduler's
latest snapshots, whether the scheduler can be seen); what they found stored and counted as
one batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from queue import SimpleQueue

from observer.clock import Clock
from observer.controller.outbox import FindingsOutbox
from observer.controller.views import Published
from observer.controller.watches.base import Look, Watch
from observer.controller.watches.unfairness import PersistentUnfairness
from observer.detectors.fairness import WindowAssessment
from observer.domain import Finding, NodeSnapshot, ProbeRun, SchedulerSnapshot
from observer.metrics import ControllerMetrics
from observer.storage.store import Store


@dataclass
class Detection:
    store: Store
    clock: Clock
    metrics: ControllerMetrics
    # A scheduler snapshot older than this no longer speaks for the scheduler: it is blind.
    scheduler_max_age_seconds: float
    # The agents' latest snapshots by node, as the fleet loop publishes them, and the latest
    # scheduler snapshot, as the scheduler loop does: read once per check.
    nodes: Published[Mapping[str, NodeSnapshot]]
    scheduler: Published[SchedulerSnapshot | None]
    # In the order they are checked and their findings stored (see Checked).
    watches: Sequence[Watch]
    # Runs that changed, handed over by the follow loop's thread; everything else here, the
    # watches included, is the detect loop's own.
    _changed: SimpleQueue[ProbeRun] = field(default_factory=SimpleQueue)
    _outbox: FindingsOutbox = field(init=False)

    def __post_init__(self) -> None:
        self._outbox = FindingsOutbox(self.store, self.metrics.findings)

    def resume(self) -> None:
        """After a (re)start: every watch takes over what a previous controller left open."""
        left_open = self.store.findings(open_only=True)
        now = self.clock.now()
        for watch in self.watches:
            watch.resume(left_open, now)

    def runs_changed(self, runs: Sequence[ProbeRun]) -> None:
        """Hand over runs that changed (from any thread); the next check takes them."""
        for run in runs:
            self._changed.put(run)

    def check(self, active: Sequence[ProbeRun]) -> list[Finding]:
        """Check every watch; store and count what opened or closed."""
        look = self._look(active)
        checked = [watch.check(look) for watch in self.watches]
        changed = [f for c in checked for f in c.changed] + [f for c in checked for f in c.late]
        saved = self._outbox.put(changed + [f for c in checked for f in c.restated])
        if saved:
            for c in checked:
                if c.stored is not None:
                    c.stored()
        return changed

    def _look(self, active: Sequence[ProbeRun]) -> Look:
        latest = self.scheduler.get()
        changed = []
        while not self._changed.empty():
            changed.append(self._changed.get())
        nodes = self.nodes.get()
        now = self.clock.now()
        blind = latest is None or (now - latest.at).total_seconds() > self.scheduler_max_age_seconds
        return Look(now, tuple(active), tuple(changed), nodes, latest, blind)

    def assessments(self) -> list[WindowAssessment]:
        """The window occurrences the fairness watch last weighed, oldest first."""
        return [
            a
            for watch in self.watches
            if isinstance(watch, PersistentUnfairness)
            for a in watch.assessments()
        ]
