"""Drives a controller the way the daemon's loops and APScheduler do, one step at a time:
each task runs when it falls due on the controller's clock, and the caller says what a step
is (advance a ManualClock, let an emulated platform play its part, or wait in real time)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from observer.clock import Clock, ManualClock
from observer.controller.service import Controller
from observer.loops import PeriodicLoop
from observer.metrics import LoopMetrics


@dataclass
class _Due:
    loop: PeriodicLoop
    every_seconds: float
    next_at: float


class SteppedSchedule:
    def __init__(
        self,
        controller: Controller,
        clock: Clock,
        metrics: LoopMetrics,
        follow_interval_seconds: float,
        snapshot_interval_seconds: float,
        extra: Sequence[tuple[str, float, Callable[[], object]]] = (),
    ) -> None:
        """`extra`: more periodic tasks as (name, every_seconds, tick), e.g. the fleet reader."""
        self._clock = clock
        never = threading.Event()

        def due(name: str, every: float, tick: Callable[[], object], first: float) -> _Due:
            loop = PeriodicLoop(name, every, tick, clock, never, metrics)
            return _Due(loop, every, clock.monotonic() + first)

        # As APScheduler's interval trigger: a plan entry first fires one interval after start.
        self._tasks = [
            due(f"plan-{e.probe}", e.every_seconds, partial(controller.launch, e), e.every_seconds)
            for e in controller.plan
        ] + [
            due("follow", follow_interval_seconds, controller.follow, 0.0),
            due("detect", follow_interval_seconds, controller.detect, 0.0),
            due("scheduler", snapshot_interval_seconds, controller.sample_scheduler, 0.0),
            *(due(name, every, tick, 0.0) for name, every, tick in extra),
        ]

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
