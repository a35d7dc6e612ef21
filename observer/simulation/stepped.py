"""The controller's tasks run one step at a time, as the daemon's loops and APScheduler run
them: each task when it falls due on the clock (on its cadence, or at the wall time its
`also_at` names), a planned task first one interval after the start, in the composition's
order within a step; the caller says what a step is (advance a ManualClock, let an emulated
platform play its part, or wait in real time)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from observer.clock import Clock, ManualClock
from observer.controller.compose import Task
from observer.loops import PeriodicLoop
from observer.metrics import LoopMetrics


@dataclass
class _Due:
    loop: PeriodicLoop
    task: Task
    next_at: float
    next_wall: datetime | None = None  # the next moment task.also_at names


class SteppedRunner:
    def __init__(self, tasks: Sequence[Task], clock: Clock, metrics: LoopMetrics) -> None:
        self._clock = clock
        never = threading.Event()
        self._tasks = [
            _Due(PeriodicLoop(t.name, t.interval_seconds, t.tick, clock, never, metrics), t, 0.0)
            for t in tasks
        ]
        self.restart()

    def restart(self) -> None:
        """Every task due again as at the start, from now: after the clock was moved past a
        stretch the tasks were not run for (a quiet day skipped), as the daemon's loops would
        be had they kept their cadence through it."""
        now = self._clock.monotonic()
        for due in self._tasks:
            due.next_at = now + (due.task.interval_seconds if due.task.planned else 0.0)
            due.next_wall = self._next_wall(due.task)

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
            wall = clock.now()
            for due in self._tasks:
                on_cadence = now >= due.next_at
                if on_cadence or (due.next_wall is not None and wall >= due.next_wall):
                    due.loop.run_once()
                    # As PeriodicLoop.run: the cadence counts on from a tick at a wall time.
                    due.next_at = (due.next_at if on_cadence else now) + due.task.interval_seconds
                    due.next_wall = self._next_wall(due.task)
            step()

    def _next_wall(self, task: Task) -> datetime | None:
        return None if task.also_at is None else task.also_at(self._clock.now())
