"""Named windows of the platform's day (weekday peak, night, weekend) in its own timezone.

A window is a set of weekdays and a start and end time of day; one whose end is not after
its start runs past midnight and belongs to the day it started on (Friday's night window runs
into Saturday morning)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time
from zoneinfo import ZoneInfo

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def parse_days(spec: str) -> frozenset[int]:
    """Cron's day-of-week field by name: '*', 'mon-fri', 'sat,sun', 'fri-mon'."""
    spec = spec.strip().lower()
    if spec in ("*", ""):
        return frozenset(range(7))
    days: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.strip().partition("-")
        if first not in DAY_NAMES or (last and last not in DAY_NAMES):
            raise ValueError(f"unknown day in {spec!r}: use {', '.join(DAY_NAMES)}, ranges and '*'")
        start = DAY_NAMES.index(first)
        end = DAY_NAMES.index(last) if last else start
        days.update((start + i) % 7 for i in range((end - start) % 7 + 1))
    return frozenset(days)


@dataclass(frozen=True, slots=True)
class Window:
    name: str
    days: frozenset[int]  # 0 = Monday
    start: time
    end: time  # time(0) with start time(0) means the whole day

    def contains(self, local: datetime) -> bool:
        """Whether `local` (aware, in the platform's timezone) falls in this window."""
        clock = local.time().replace(tzinfo=None)
        weekday = local.weekday()
        if self.start < self.end:
            return weekday in self.days and self.start <= clock < self.end
        # runs past midnight (or all day when start == end)
        if weekday in self.days and clock >= self.start:
            return True
        return (weekday - 1) % 7 in self.days and clock < self.end


@dataclass(frozen=True, slots=True)
class Calendar:
    timezone: ZoneInfo
    windows: Sequence[Window]

    def windows_at(self, at: datetime) -> list[str]:
        """Names of the windows `at` falls in (windows may overlap: a weekend night)."""
        local = at.astimezone(self.timezone)
        return [w.name for w in self.windows if w.contains(local)]
