"""The inference service's day, built from hand-made looks and phases: percentiles by nearest
rank over the answered requests, each window's own figures beside the whole day's, the looks
while it started left out of its availability, nothing at all when the probe did not run."""

from __future__ import annotations

from observer.records import InferencePhase, InferenceSample, PhaseKind
from observer.reports.compute.inference import (
    OUTSIDE_WINDOWS,
    WHOLE_DAY,
    inference_figures,
    percentile,
)
from tests.reports.builders import CALENDAR, at


def look(hour: int, minute: int, latencies: tuple[float, ...], requests: int) -> InferenceSample:
    errors = requests - len(latencies)
    return InferenceSample(at(hour, minute), "svc", 2, 2, 0, requests, errors, latencies)


START = InferencePhase("svc", PhaseKind.START, at(8, 0), at(8, 2), 0, 2, 0.0, None, 0.0)


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, p) for p in (50, 95, 99)] == [50.0, 95.0, 99.0]
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_each_window_beside_the_whole_day_without_the_start():
    looks = [
        look(8, 1, (), 0),  # starting: its time to ready, not unavailability
        look(8, 30, (30.0, 40.0), 2),  # no window
        look(10, 0, (20.0, 22.0), 2),  # weekday-peak (a Tuesday)
        look(10, 1, (), 2),  # both requests failed
        look(23, 0, (25.0,), 2),  # night
    ]
    figures = inference_figures(looks, [START], CALENDAR)

    assert figures is not None
    rows = {row.window: row for row in figures.windows}
    assert list(rows) == [WHOLE_DAY, "weekday-peak", "night", OUTSIDE_WINDOWS]
    whole = rows[WHOLE_DAY]
    assert (whole.looks, whole.available, whole.requests, whole.errors) == (4, 3, 8, 3)
    assert whole.availability == 0.75
    assert (whole.p50_ms, whole.p95_ms, whole.p99_ms) == (25.0, 40.0, 40.0)
    peak = rows["weekday-peak"]
    assert (peak.availability, peak.p50_ms, peak.p99_ms) == (0.5, 20.0, 22.0)
    assert rows["night"].looks == 1 and rows[OUTSIDE_WINDOWS].p50_ms == 30.0
    assert [p.ready_seconds for p in figures.phases] == [120.0]


def test_no_figures_when_the_probe_did_not_run():
    assert inference_figures([], [], CALENDAR) is None
