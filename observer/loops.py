"""The one periodic-loop helper: cadence on a monotonic clock (and, for a task that must also
run at wall-clock moments, at those), per-item error capture, a finite backoff after failed
ticks, a stop event and a shutdown deadline."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TypeVar

from observer.clock import Clock
from observer.logging_setup import get_logger
from observer.metrics import LoopMetrics

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)

_log = get_logger("observer.loops")


class PeriodicLoop:
    def __init__(
        self,
        name: str,
        interval_seconds: float,
        tick: Callable[[], object],
        clock: Clock,
        stop: threading.Event,
        metrics: LoopMetrics,
        backoff_seconds: Sequence[float] = DEFAULT_BACKOFF_SECONDS,
        also_at: Callable[[datetime], datetime] | None = None,
    ) -> None:
        """`also_at`: the next wall time after a given one at which to tick besides the
        cadence (the daily build time); the cadence then counts on from that tick."""
        self.name = name
        self._interval = interval_seconds
        self._tick = tick
        self._clock = clock
        self._stop = stop
        self._metrics = metrics
        self._backoff = tuple(backoff_seconds)
        self._also_at = also_at
        self._failures = 0
        self._last_success: float | None = None
        self._thread: threading.Thread | None = None
        self._ticks = metrics.ticks_total.labels(loop=name)

    def last_success_age_seconds(self) -> float | None:
        """Seconds since the last tick that completed; None before the first one."""
        if self._last_success is None:
            return None
        return self._clock.monotonic() - self._last_success

    def run_once(self) -> bool:
        """One tick with its error captured and counted; True when it succeeded."""
        self._ticks.inc()
        try:
            self._tick()
        except Exception as exc:
            self._failures += 1
            self._metrics.errors_total.labels(loop=self.name, stage="tick").inc()
            _log.error("tick failed", loop=self.name, error=repr(exc), failures=self._failures)
            return False
        self._failures = 0
        self._last_success = self._clock.monotonic()
        self._metrics.last_success_timestamp_seconds.labels(loop=self.name).set(
            self._clock.now().timestamp()
        )
        return True

    def run(self) -> None:
        """Tick on cadence, and at each moment `also_at` names, until stopped. A tick that
        overruns skips the slots it missed rather than bursting to catch up; after failures
        the next tick waits the backoff (or the next `also_at` moment, if sooner)."""
        next_at = self._clock.monotonic()
        while not self._stop.is_set():
            ok = self.run_once()
            next_at += self._interval
            now = self._clock.monotonic()
            if not ok:
                next_at = max(
                    next_at, now + self._backoff[min(self._failures, len(self._backoff)) - 1]
                )
            elif next_at < now:
                next_at += math.ceil((now - next_at) / self._interval) * self._interval
            if self._also_at is not None:
                # Wall time read afresh each round: a clock stepped meanwhile is followed within
                # one interval.
                wall = self._clock.now()
                next_at = min(next_at, now + (self._also_at(wall) - wall).total_seconds())
            if self._clock.sleep(next_at - now, self._stop):
                break

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"loop-{self.name}", daemon=True)
        self._thread.start()

    def join(self, deadline_seconds: float) -> bool:
        """Wait for the loop to end after stop is set; False if it overran the deadline."""
        if self._thread is None:
            return True
        self._thread.join(deadline_seconds)
        return not self._thread.is_alive()

    def each(self, items: Iterable[T], work: Callable[[T], R]) -> list[R]:
        """Run `work` per item; one item's failure is logged and counted, not fatal."""
        results: list[R] = []
        for item in items:
            try:
                results.append(work(item))
            except Exception as exc:
                self._metrics.errors_total.labels(loop=self.name, stage="item").inc()
                _log.warning("item failed", loop=self.name, item=repr(item), error=repr(exc))
        return results
