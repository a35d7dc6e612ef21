"""The controller's tasks run one step at a time, as the daemon's loops and APScheduler run
them: each task when it falls due on the clock, a planned task first one interval after the
start, in the composition's order within a step; the caller says what a step is (advance a
ManualClock, let an emulated platform play its part, or wait in real time)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from observer.clock import Clock, ManualClock
from observer.controller.compose import Task
from observer.loops import PeriodicLoop
from observer.metrics import LoopMetrics


@dataclass
class _Due:
    loop: PeriodicLoop
    every_seconds: float
    next_at: float


class SteppedRunner:
    def __init__(self, tasks: Sequence[Task], clock: Clock, metrics: LoopMetrics) -> None:
        self._clock = clock
        never = threading.Event()
        self._tasks = [
            _Due(
                PeriodicLoop(t.name, t.interval_seconds, t.tick, clock, never, metrics),
                t.interval_seconds,
                t.interval_seconds if t.planned else 0.0,
            )
            for t in tasks
        ]
        self._planned = [t.planned for t in tasks]
        self.restart()

    def restart(self) -> None:
        """Every task due again as at the start, from now: after the clock was moved past a
        stretch the tasks were not run for (a quiet day skipped), as the daemon's loops would
        be had they kept their cadence through it."""
        now = self._clock.monotonic()
        for task, planned in zip(self._tasks, self._planned, strict=True):
            task.next_at = now + (task.every_seconds if planned else 0.0)

    def run_for(self, seconds: float, step: Callable[[], object] | None = None) -> None:
        """Run due tasks, step, repeat, for `seconds` of the clock. The default step moves a
        ManualClock on by one second."""
        clock = self._clock
        if step is None:
            assert isinstance(clock, ManualClock), "a real clock needs a step that waits"
            step = partial(clock.advance, 1.0)
        end = clock.monotonic() + seconds
        while clock.monotonic() < end:
            now = clock.monotonic()
            for task in self._tasks:
                if now >= task.next_at:
                    task.loop.run_once()
                    task.next_at += task.every_seconds
            step()
