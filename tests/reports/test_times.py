"""Every time a report gives is in the platform's timezone: the JSON and the CSV in ISO 8601
with the offset, whatever zone the store gave the instant in; a page names the zone once at
its top, as its readers call it, and says an instant's zone only on a day its offset
changes."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from observer.domain import ProbeRun
from observer.reports.compute.daily import DailyInputs, DailyReport, build_daily
from observer.reports.compute.data import Period, PeriodData
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language
from tests.reports.builders import CALENDAR, DAY, TZ, at, context, run, utc

EIGHT_HOURS = timedelta(hours=8)


def instants(value: Any) -> Iterator[str]:
    """Every string in a JSON document that is an ISO 8601 date and time."""
    if isinstance(value, dict):
        for item in value.values():
            yield from instants(item)
    elif isinstance(value, list):
        for item in value:
            yield from instants(item)
    elif isinstance(value, str) and len(value) > 10 and value[10:11] == "T":
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return
        yield value


def test_the_daily_json_and_csv_give_every_instant_in_the_platforms_zone():
    # As the store gives them: in UTC.
    runs = [run(submitted=utc(at(1, 30))), run(submitted=utc(at(23, 10)), wait_seconds=1800)]
    data = PeriodData(Period(utc(DAY.start), utc(DAY.end)), runs=runs)
    inputs = DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1)

    rendered = render_daily(build_daily(inputs), "en")

    document = json.loads(rendered.json)
    said = list(instants(document))
    assert said and all(datetime.fromisoformat(s).utcoffset() == EIGHT_HOURS for s in said)
    period = {k: datetime.fromisoformat(v) for k, v in document["period"].items()}
    assert period == {"start": DAY.start, "end": DAY.end}
    assert [datetime.fromisoformat(r["submitted_at"]) for r in document["task_records"]] == [
        r.submitted_at for r in runs
    ]
    assert rendered.csv is not None
    rows = list(csv.DictReader(io.StringIO(rendered.csv)))
    for column in ("submitted_at", "started_at", "finished_at"):
        times = [datetime.fromisoformat(row[column]) for row in rows]
        assert times == [getattr(r, column) for r in runs]
        assert {t.utcoffset() for t in times} == {EIGHT_HOURS}
    assert TZ.key == document["timezone"]


def daily_in(zone: str, day: date, *runs: ProbeRun) -> DailyReport:
    """The day's summary of a platform in `zone`."""
    tz = ZoneInfo(zone)
    start = datetime.combine(day, time(), tz)
    data = PeriodData(Period(start, datetime.combine(day + timedelta(days=1), time(), tz)), runs)
    ctx = replace(context(), calendar=replace(CALENDAR, timezone=tz), soak_started_at=start)
    return build_daily(DailyInputs(ctx, day, data, None, data, 900.0, 0.1))


def top(page: str) -> str:
    """What a page says before its first section."""
    return re.split(r"\n## |<h2", page, maxsplit=1)[0]


@pytest.mark.parametrize(
    ("language", "zone", "named"),
    [
        ("en", "Asia/Shanghai", "Platform timezone: China Standard Time (UTC+8)"),
        ("zh-CN", "Asia/Shanghai", "平台时区：北京时间（UTC+8）"),
        ("en", "Asia/Kolkata", "Platform timezone: India Standard Time (UTC+5:30)"),
        # The day the clocks go back: both offsets, under the name of neither.
        ("en", "America/Chicago", "Platform timezone: Central Time (UTC-5/UTC-6)"),
    ],
)
def test_a_page_names_its_zone_once_at_its_top_as_its_readers_know_it(
    language: Language, zone: str, named: str
):
    rendered = render_daily(daily_in(zone, date(2026, 11, 1)), language)

    for page in (rendered.markdown, rendered.html):
        assert named in top(page) and page.count(named) == 1


def test_on_the_day_the_clocks_go_back_the_repeated_hour_says_which_it_is():
    # 01:30 in Chicago twice: in daylight time, then an hour later in standard time.
    first = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    runs = [run(submitted=first), run(submitted=first + timedelta(hours=1))]

    page = render_daily(daily_in("America/Chicago", date(2026, 11, 1), *runs), "en").markdown

    assert "| 2026-11-01 01:30 CDT |" in page
    assert "| 2026-11-01 01:30 CST |" in page


def test_on_a_day_the_offset_stays_the_times_are_the_pages_zone_alone():
    submitted = datetime(2026, 11, 2, 7, 30, tzinfo=UTC)

    page = render_daily(
        daily_in("America/Chicago", date(2026, 11, 2), run(submitted=submitted)), "en"
    )

    assert "Platform timezone: Central Standard Time (UTC-6)" in top(page.markdown)
    assert "| 2026-11-02 01:30 |" in page.markdown
