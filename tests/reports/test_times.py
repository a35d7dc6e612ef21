"""Every time a report gives is in the platform's timezone: the JSON and the CSV in ISO 8601
with the offset, whatever zone the store gave the instant in."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import Period, PeriodData
from observer.reports.render.daily import render_daily
from tests.reports.builders import DAY, TZ, at, context, run, utc

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
