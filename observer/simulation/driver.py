"""Drives a controller on a ManualClock the way the daemon's loops and APScheduler do, as
fast as the machine goes: each task runs when it falls due on the simulated clock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from observer.clock import ManualClock
from observer.controller.service import Controller
from observer.loops import PeriodicLoop
from observer.metrics import LoopMetrics


@dataclass
class _Due:
    loop: PeriodicLoop
    every_seconds: float
    next_at: float


class SimulatedSchedule:
    def __init__(
        self,
        controller: Controller,
        clock: ManualClock,
        metrics: LoopMetrics,
        follow_interval_seconds: float,
        snapshot_interval_seconds: float,
    ) -> None:
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
            due("scheduler", snapshot_interval_seconds, controller.sample_scheduler, 0.0),
        ]

    def run_for(self, seconds: float, step_seconds: float = 1.0) -> None:
        end = self._clock.monotonic() + seconds
        while self._clock.monotonic() < end:
            now = self._clock.monotonic()
            for task in self._tasks:
                if now >= task.next_at:
                    task.loop.run_once()
                    task.next_at += task.every_seconds
            self._clock.advance(step_seconds)
