"""The store keeps to a budget: raw GPU samples past storage.raw_retention_days are deleted,
all but those of the hours a report reads raw (a local day or a window beginning inside a
UTC hour, the soak's start), so that every report built afterwards says what it said before;
and the store's size is measured each hour, store_space_low opening when its volume would
fill within storage.space_warning_days at the growth of the last day."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.upkeep import StoreUpkeep
from observer.controller.views import Published
from observer.controller.watches import outages
from observer.controller.watches.base import Look
from observer.controller.watches.outages import SpaceLow
from observer.domain import Finding
from observer.metrics import ControllerMetrics
from observer.records import StoreSize
from observer.reports.publish import write_daily, write_verdict
from observer.settings import Settings
from observer.storage.store import Store
from tests.storage.test_gpu_sample_counts import START
from tests.storage.test_gpu_sample_counts import samples as kolkata_samples
from tests.support.databases import migrated_sqlite

# Half an hour off UTC, so a local day begins inside a UTC hour; a window that does too.
KOLKATA = ZoneInfo("Asia/Kolkata")
STARTED = START + timedelta(hours=10, minutes=17)  # the soak, inside an hour
WINDOWS = [
    {"name": "peak", "days": "mon-fri", "start": "09:30", "end": "18:00"},
    {"name": "night", "days": "*", "start": "22:00", "end": "06:00"},
]


def _settings(tmp_path: Path, **storage: object) -> Settings:
    return Settings.model_validate(
        {
            "controller": {
                "timezone": "Asia/Kolkata",
                "windows": WINDOWS,
                "plan": [{"window": "peak", "probe": "short", "every_seconds": 600}],
            },
            "reports": {
                "output_dir": str(tmp_path / "reports"),
                "soak_started_at": STARTED.isoformat(),
            },
            "storage": {"sqlite_path": str(tmp_path / "observer.db"), **storage},
        }
    )


def _upkeep(store: Store, settings: Settings, clock: ManualClock) -> StoreUpkeep:
    metrics = ControllerMetrics(CollectorRegistry())
    return StoreUpkeep(store, settings, clock, threading.Event(), metrics, Published(None))


def _reports(store: Store, settings: Settings, now: datetime) -> dict[str, str]:
    days = [(START + timedelta(days=n)).date() for n in range(3)]
    paths = [p for day in days for p in write_daily(store, settings, day, now)]
    paths += write_verdict(store, settings, now)
    return {p.name: p.read_text() for p in paths}


def test_reports_say_the_same_once_the_raw_samples_past_retention_are_deleted(tmp_path: Path):
    settings = _settings(tmp_path, raw_retention_days=7)
    clock = ManualClock(START + timedelta(days=11))
    store = Store(migrated_sqlite(tmp_path / "observer.db"), clock)
    samples = kolkata_samples(random.Random(5), days=3)
    store.add_gpu_samples(samples)
    before = _reports(store, settings, clock.now())

    _upkeep(store, settings, clock).tick()

    left = store.gpu_samples(None, START, START + timedelta(days=3))
    assert 0 < len(left) < len(samples) / 4
    # What is left is the UTC hours a period begins or ends inside of: local midnight (18:30
    # UTC), the night's start and end (16:30, 00:30), the peak's end (12:30) and the soak's
    # start (04:47); not the peak's start (09:30 local is 04:00 UTC, on the hour).
    assert {s.at.astimezone(UTC).hour for s in left} == {18, 16, 0, 12, 4}
    assert {s.at.date() for s in left if s.at.astimezone(UTC).hour == 4} == {STARTED.date()}
    assert _reports(store, settings, clock.now()) == before


def _condition(upkeep: StoreUpkeep, store: Store, now: datetime) -> list[Finding]:
    """What the store_space_low watch finds after the upkeep's tick at `now`."""
    watch = outages.Unreachable(outages.room(store, upkeep.room.get))
    return list(watch.check(Look(now, (), (), {}, None, blind=False)).changed)


def test_store_space_low_opens_when_the_last_days_growth_would_fill_the_volume_in_time(
    tmp_path: Path,
):
    # Whatever this machine's disk holds, a warning this far ahead is within the growth.
    settings = _settings(tmp_path, space_warning_days=1e8)
    clock = ManualClock(START)
    store = Store(migrated_sqlite(tmp_path / "observer.db"), clock)
    upkeep = _upkeep(store, settings, clock)
    upkeep.tick()
    assert upkeep.room.get() is None  # one measure: no growth known yet

    store.add_gpu_samples(kolkata_samples(random.Random(5), days=1))
    clock.advance(12 * 3600)
    upkeep.tick()

    low = upkeep.room.get()
    assert isinstance(low, SpaceLow)
    assert low.since == clock.now()
    assert low.growth_bytes_per_day > 0
    assert low.fills_in < low.limit == timedelta(days=1e8)
    (opened,) = _condition(upkeep, store, clock.now())
    assert (opened.detector, opened.subject) == ("store_space_low", {"store": store.where})
    assert opened.evidence["free_bytes"] == low.free_bytes
    assert opened.evidence["fills_in_seconds"] == round(low.fills_in.total_seconds())
    assert opened.evidence["limit_seconds"] == round(low.limit.total_seconds())


def test_store_space_low_stays_closed_while_the_store_shrinks(tmp_path: Path):
    settings = _settings(tmp_path, space_warning_days=1e8)
    clock = ManualClock(START)
    store = Store(migrated_sqlite(tmp_path / "observer.db"), clock)
    size, _ = store.database_bytes()
    # A megabyte more half a day ago: retention deleted more than was added since.
    store.record_store_size(StoreSize(START - timedelta(hours=12), size + 10**6))
    upkeep = _upkeep(store, settings, clock)

    upkeep.tick()

    assert upkeep.room.get() is None
    assert _condition(upkeep, store, clock.now()) == []
