"""Windows of the platform's day, in its own timezone."""

from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

import pytest

from observer.probes.windows import Calendar, Window, next_completion, parse_days

SHANGHAI = ZoneInfo("Asia/Shanghai")
PEAK = Window("weekday-peak", parse_days("mon-fri"), time(9), time(18))
NIGHT = Window("night", parse_days("*"), time(22), time(6))
WEEKEND = Window("weekend", parse_days("sat,sun"), time(0), time(0))
CALENDAR = Calendar(SHANGHAI, [PEAK, NIGHT, WEEKEND])


@pytest.mark.parametrize(
    ("spec", "days"),
    [
        ("*", set(range(7))),
        ("mon-fri", {0, 1, 2, 3, 4}),
        ("sat,sun", {5, 6}),
        ("fri-mon", {4, 5, 6, 0}),
        ("wed", {2}),
    ],
)
def test_days_read_like_crons_day_of_week_field(spec: str, days: set[int]):
    assert parse_days(spec) == days


def test_an_unknown_day_is_refused_with_the_names_it_knows():
    with pytest.raises(ValueError, match="mon, tue"):
        parse_days("mon-fry")


@pytest.mark.parametrize(
    ("local", "windows"),
    [
        (datetime(2026, 11, 30, 9, 0), ["weekday-peak"]),  # Monday 09:00 opens the peak
        (datetime(2026, 11, 30, 17, 59), ["weekday-peak"]),
        (datetime(2026, 11, 30, 18, 0), []),  # the end is not in the window
        (datetime(2026, 11, 30, 23, 0), ["night"]),
        (datetime(2026, 12, 1, 5, 59), ["night"]),  # Monday's night runs into Tuesday
        (datetime(2026, 12, 5, 10, 0), ["weekend"]),  # Saturday: no peak
        (datetime(2026, 12, 5, 23, 30), ["night", "weekend"]),  # windows overlap
        (datetime(2026, 12, 7, 1, 0), ["night"]),  # Sunday's weekend ended at midnight
    ],
)
def test_the_windows_an_instant_falls_in_are_read_in_the_platforms_timezone(
    local: datetime, windows: list[str]
):
    at = local.replace(tzinfo=SHANGHAI).astimezone(UTC)
    assert CALENDAR.windows_at(at) == windows


def test_a_night_window_on_some_days_only_belongs_to_the_day_it_starts():
    friday_night = Window("friday-night", parse_days("fri"), time(22), time(6))
    calendar = Calendar(SHANGHAI, [friday_night])
    saturday_3am = datetime(2026, 12, 5, 3, 0, tzinfo=SHANGHAI)
    sunday_3am = datetime(2026, 12, 6, 3, 0, tzinfo=SHANGHAI)
    assert calendar.windows_at(saturday_3am) == ["friday-night"]
    assert calendar.windows_at(sunday_3am) == []


@pytest.mark.parametrize(
    ("local", "completes"),
    [
        (datetime(2026, 11, 30, 12, 0), datetime(2026, 11, 30, 18, 0)),  # Monday: the peak
        (datetime(2026, 11, 30, 18, 0), datetime(2026, 12, 1, 6, 0)),  # then the night
        (datetime(2026, 12, 4, 18, 0), datetime(2026, 12, 5, 6, 0)),  # Friday night
        (datetime(2026, 12, 5, 6, 0), datetime(2026, 12, 6, 0, 0)),  # Saturday, all day
    ],
)
def test_the_next_completion_is_the_first_end_of_any_window_after_the_instant(
    local: datetime, completes: datetime
):
    at = local.replace(tzinfo=SHANGHAI)
    assert next_completion(CALENDAR, at) == completes.replace(tzinfo=SHANGHAI).astimezone(UTC)


def test_the_next_completion_of_a_weekly_window_is_days_ahead():
    wednesday = Calendar(SHANGHAI, [Window("wed", parse_days("wed"), time(9), time(10))])
    thursday = datetime(2026, 12, 3, 12, 0, tzinfo=SHANGHAI)
    assert next_completion(wednesday, thursday) == datetime(2026, 12, 9, 2, 0, tzinfo=UTC)
    assert next_completion(Calendar(SHANGHAI, []), thursday) is None
