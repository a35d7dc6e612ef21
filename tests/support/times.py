"""The moments a test names: so many seconds after its start, or a time of its day."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol


class TimeOfDay(Protocol):
    def __call__(self, hour: int, minute: int = 0, second: int = 0) -> datetime: ...


def seconds_after(start: datetime) -> Callable[[float], datetime]:
    """`at(seconds)`: the moment `seconds` after `start`."""

    def at(seconds: float) -> datetime:
        return start + timedelta(seconds=seconds)

    return at


def on_day(midnight: datetime) -> TimeOfDay:
    """`at(hour, minute, second)`: that time of the day that begins at `midnight`."""

    def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
        return midnight + timedelta(hours=hour, minutes=minute, seconds=second)

    return at
