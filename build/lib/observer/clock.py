"""Time is injected: SystemClock in production, ManualClock in simulation, replay and tests."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC: what records and findings carry."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps: what cadences and durations use."""
        ...

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        """Wait up to `seconds`; return True if `stop` was set meanwhile."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        return stop.wait(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when told to; sleeping advances it instantly."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)
        self._monotonic = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time does not run backwards")
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds

    def set(self, at: datetime) -> None:
        self.advance((at - self._now).total_seconds())

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        if stop.is_set():
            return True
        self.advance(max(0.0, seconds))
        return stop.is_set()


class TraceTimeline:
    """Maps wall time onto the time axis of a recorded trace, optionally looping, so a
    replayed trace and everything derived from it (owners, phases) stay in step."""

    def __init__(self, trace_start: float, trace_end: float, wall_start: float, loop: bool) -> None:
        if trace_end <= trace_start:
            raise ValueError("a trace must span some time")
        self.trace_start = trace_start
        self.trace_end = trace_end
        self._offset = wall_start - trace_start
        self._loop = loop

    @property
    def duration_seconds(self) -> float:
        return self.trace_end - self.trace_start

    def _elapsed(self, wall: datetime) -> float:
        return wall.timestamp() - self._offset - self.trace_start

    def to_trace(self, wall: datetime) -> float:
        elapsed = self._elapsed(wall)
        if self._loop and elapsed >= 0:
            elapsed %= self.duration_seconds
        return self.trace_start + elapsed

    def to_wall(self, trace_t: float, wall_now: datetime) -> datetime:
        """The wall time of trace instant `trace_t` in the loop iteration `wall_now` is in."""
        elapsed = self._elapsed(wall_now)
        laps = (elapsed // self.duration_seconds) if self._loop and elapsed >= 0 else 0.0
        wall = trace_t + self._offset + laps * self.duration_seconds
        return datetime.fromtimestamp(wall, UTC)
