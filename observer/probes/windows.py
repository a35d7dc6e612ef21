"""Named windows of the platform's day (weekday peak, night, weekend) in its own timezone, and
their occurrences (Monday's night, Tuesday's night...).

A window is a set of weekdays and a start and end time of day; one whose end is not after
its start runs past midnight and belongs to the day it started on (Friday's night window runs
into Saturday morning)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
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


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One occurrence of a window: [start, end), aware, in the platform's timezone."""

    window: str
    start: datetime
    end: datetime

    def __contains__(self, at: datetime) -> bool:
        return _utc(self.start) <= _utc(at) < _utc(self.end)


def occurrence_of(calendar: Calendar, window_name: str, at: datetime) -> Occurrence | None:
    """The occurrence of the named window that `at` falls in, if any. A window that runs past
    midnight belongs to the day it started on."""
    window = _window(calendar, window_name)
    local = at.astimezone(calendar.timezone)
    for day in (local.date(), local.date() - timedelta(days=1)):
        occurrence = _on(calendar, window, day)
        if occurrence is not None and at in occurrence:
            return occurrence
    return None


def occurrences(
    calendar: Calendar, window_name: str, since: datetime, until: datetime
) -> list[Occurrence]:
    """Occurrences of the named window lying wholly within [since, until], oldest first: the
    completed ones, when `until` is now."""
    window = _window(calendar, window_name)
    day = since.astimezone(calendar.timezone).date()
    last = until.astimezone(calendar.timezone).date()
    found = []
    while day <= last:
        occurrence = _on(calendar, window, day)
        if (
            occurrence is not None
            and _utc(since) <= _utc(occurrence.start)
            and _utc(occurrence.end) <= _utc(until)
        ):
            found.append(occurrence)
        day += timedelta(days=1)
    return found


def next_completion(calendar: Calendar, after: datetime) -> datetime | None:
    """The first instant after `after` at which an occurrence of any window completes, in
    UTC; None without windows. A window occurs at least once a week, running into the next
    day at most."""
    day = after.astimezone(calendar.timezone).date() - timedelta(days=1)
    ends = (
        _utc(occurrence.end)
        for window in calendar.windows
        for offset in range(9)
        if (occurrence := _on(calendar, window, day + timedelta(days=offset))) is not None
    )
    return min((end for end in ends if end > _utc(after)), default=None)


def parts_in(
    calendar: Calendar, window_name: str, since: datetime, until: datetime
) -> list[Occurrence]:
    """The named window's occurrences that overlap [since, until), each cut to it, oldest
    first: together they hold every instant of the period the window contains."""
    window = _window(calendar, window_name)
    tz = calendar.timezone
    day = since.astimezone(tz).date() - timedelta(days=1)  # one run past midnight into it
    last = until.astimezone(tz).date()
    parts = []
    while day <= last:
        occurrence = _on(calendar, window, day)
        if occurrence is not None:
            start = max(_utc(occurrence.start), _utc(since))
            end = min(_utc(occurrence.end), _utc(until))
            if start < end:
                parts.append(Occurrence(window.name, start.astimezone(tz), end.astimezone(tz)))
        day += timedelta(days=1)
    return parts


def _window(calendar: Calendar, name: str) -> Window:
    for window in calendar.windows:
        if window.name == name:
            return window
    raise KeyError(f"no window named {name!r}")


def _on(calendar: Calendar, window: Window, day: date) -> Occurrence | None:
    if day.weekday() not in window.days:
        return None
    start = datetime.combine(day, window.start, tzinfo=calendar.timezone)
    # A window whose end is not after its start runs into the next day (all day when equal).
    end_day = day if window.start < window.end else day + timedelta(days=1)
    end = datetime.combine(end_day, window.end, tzinfo=calendar.timezone)
    return Occurrence(window.name, start, end)


def _utc(at: datetime) -> datetime:
    # Same-zone comparisons of aware datetimes compare wall times; UTC compares instants.
    return at.astimezone(UTC)
