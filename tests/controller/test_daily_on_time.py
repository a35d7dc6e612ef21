"""The daily summary is on time: built within a minute of reports.daily_build_time in the
platform's timezone, every day, whatever the reports task's ten-minute cadence; a day missed
while the controller was down is built as soon as it is back, and a build that failed is
tried again at the next look."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from observer.clock import ManualClock
from observer.reports.publish import daily_paths, next_build_at
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

TZ = ZoneInfo("Asia/Shanghai")
MONDAY = date(2026, 11, 30)
# Off the reports task's ten-minute grid from START, so that only the build time can be on time.
BUILD_TIME = time(0, 7, 30)
START = datetime.combine(MONDAY, time(23, 50), TZ)  # Monday 23:50 in Shanghai
STEP_SECONDS = 30.0
ON_TIME = timedelta(seconds=60)


def _settings(reports: Path) -> Settings:
    return controller_settings(
        timezone="Asia/Shanghai",
        plan=[{"window": "always", "probe": "short", "every_seconds": 600}],
        simulation={"nodes": 2, "gpus_per_node": 4, "pools": ["a"]},
        reports={
            "output_dir": str(reports),
            "daily_build_time": BUILD_TIME,
            "soak_started_at": datetime.combine(MONDAY, time(0), TZ),
        },
    )


def _soak(tmp_path: Path, clock: ManualClock) -> SimulatedSoak:
    settings = _settings(tmp_path / "reports")
    store = Store(migrated_sqlite(tmp_path / "observer.db"), clock, durable=False)
    return SimulatedSoak(settings, clock, store, simulated_cluster(settings, clock))


def _built(soak: SimulatedSoak, day: date) -> bool:
    return all(p.exists() for p in daily_paths(soak.settings, day))


def _watching(
    soak: SimulatedSoak, clock: ManualClock, days: list[date], seen: dict[date, datetime]
) -> Callable[[], None]:
    """A step of STEP_SECONDS that notes when each day's summary first exists."""

    def step() -> None:
        for day in days:
            if day not in seen and _built(soak, day):
                seen[day] = clock.now()
        clock.advance(STEP_SECONDS)

    return step


def test_each_day_is_built_within_a_minute_of_the_next_days_build_time(tmp_path: Path):
    clock = ManualClock(START)
    soak = _soak(tmp_path, clock)
    days = [MONDAY, MONDAY + timedelta(days=1)]
    seen: dict[date, datetime] = {}

    soak.run_for(26 * 3600, _watching(soak, clock, days, seen))

    for day in days:
        due = datetime.combine(day + timedelta(days=1), BUILD_TIME, TZ)
        assert day in seen, f"the summary of {day} was never built"
        assert due <= seen[day] <= due + ON_TIME, (day, seen[day].astimezone(TZ))


def test_a_day_missed_while_the_controller_was_down_is_built_when_it_is_back(tmp_path: Path):
    clock = ManualClock(START)
    soak = _soak(tmp_path, clock)
    soak.run_for(5 * 60)
    # Down from 23:55 to 02:00: the build time passes with no controller.
    clock.set(datetime.combine(MONDAY + timedelta(days=1), time(2), TZ))
    assert not _built(soak, MONDAY)

    back = SimulatedSoak(soak.settings, clock, soak.store, simulated_cluster(soak.settings, clock))
    back.run_for(STEP_SECONDS)

    assert _built(back, MONDAY)


def test_a_build_that_failed_is_tried_again_at_the_next_look(tmp_path: Path):
    clock = ManualClock(START)
    soak = _soak(tmp_path, clock)
    blocker = tmp_path / "reports"
    blocker.write_text("not a directory")  # every write into reports.output_dir fails
    due = datetime.combine(MONDAY + timedelta(days=1), BUILD_TIME, TZ)

    soak.run_for((due - clock.now()).total_seconds() + 5 * 60, lambda: clock.advance(STEP_SECONDS))
    failures = soak.registry.get_sample_value("observer_report_errors_total", {"kind": "daily"})
    assert failures == 1  # at the build time; the next look is ten minutes on
    blocker.unlink()
    soak.run_for(10 * 60, lambda: clock.advance(STEP_SECONDS))

    assert _built(soak, MONDAY)


def test_the_next_build_time_is_one_moment_ahead_across_clock_changes():
    settings = Settings.model_validate(
        {
            "controller": {"timezone": "Europe/Berlin"},
            "reports": {"daily_build_time": time(2, 30)},
        }
    )
    berlin = ZoneInfo("Europe/Berlin")
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST, so 02:30 is never shown; the build is an hour
    # after 02:00 CET, at 03:30 CEST.
    spring = datetime(2026, 3, 29, 1, 0, tzinfo=berlin)
    assert next_build_at(settings, spring) == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    # 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 is shown twice; built at the
    # first, and on the second 02:10 the next build is the next day's.
    first = datetime(2026, 10, 25, 0, 10, tzinfo=UTC)  # 02:10 CEST
    second = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10 CET
    assert next_build_at(settings, first) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert next_build_at(settings, second) == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)
    at_build_time = datetime(2026, 10, 26, 1, 30, tzinfo=UTC)
    assert next_build_at(settings, at_build_time) == at_build_time + timedelta(days=1)
