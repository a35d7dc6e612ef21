"""The store's upkeep, each hour and at start: raw GPU samples past
storage.raw_retention_days deleted in small batches (all but the hours a report reads raw:
what reports read of the rest is counted as samples are stored), the pages they freed given
back where the database can, and the store's size measured and weighed against its volume's
free space at the growth of the last day: `room` says since when it would fill within
storage.space_warning_days (the store_space_low condition)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from observer.clock import Clock
from observer.controller.views import Published
from observer.controller.watches.outages import SpaceLow
from observer.logging_setup import get_logger
from observer.metrics import ControllerMetrics
from observer.records import StoreSize, days_until_full, growth_per_day
from observer.reports.inputs import calendar_of, hours_read_raw, soak_started_at
from observer.settings import Settings
from observer.storage.gpu_samples import hour_of
from observer.storage.store import Store

# Small enough that a delete holds the database a few tens of milliseconds: writers wait
# for it (SQLite has one writer at a time).
DELETE_BATCH_ROWS = 5_000
UPKEEP_INTERVAL_SECONDS = 3600.0
_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)

_log = get_logger("observer.controller.upkeep")


class StoreUpkeep:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Clock,
        stop: threading.Event,
        metrics: ControllerMetrics,
        room: Published[SpaceLow | None],
    ) -> None:
        self._store = store
        self._settings = settings
        self._calendar = calendar_of(settings)
        self._clock = clock
        self._stop = stop
        self._metrics = metrics
        self.room = room
        self._pruned_until: datetime | None = None  # every deletable hour before it is gone

    def tick(self) -> None:
        now = self._clock.now()
        retention = self._settings.storage.raw_retention_days
        if retention is not None:
            self._prune(hour_of(now - timedelta(days=retention)))
        self._store.reclaim_space()
        size, free_inside = self._store.database_bytes()
        self._store.record_store_size(StoreSize(now, size))
        self._metrics.store_size_bytes.set(size)
        free = self._store.volume_free_bytes()
        if free is None:
            return
        self._metrics.store_volume_free_bytes.set(free)
        self.room.publish(self._room(now, size, free + free_inside))

    def _prune(self, before: datetime) -> None:
        """Delete the raw samples of every hour before `before` that no report reads raw."""
        since = self._pruned_until or self._store.oldest_gpu_sample()
        if since is None or since >= before:
            return
        started = soak_started_at(self._store, self._settings)
        marks = [at for at in (started, self._settings.reports.soak_ended_at) if at is not None]
        kept = hours_read_raw(self._calendar, marks, hour_of(since), before)
        hour, deleted = hour_of(since), 0
        while hour < before and not self._stop.is_set():
            if hour not in kept:
                rows = self._store.delete_gpu_samples(hour, hour + _HOUR, DELETE_BATCH_ROWS)
                deleted += rows
                if rows == DELETE_BATCH_ROWS:
                    continue  # more of this hour
            hour += _HOUR
        self._pruned_until = hour
        self._metrics.store_gpu_samples_deleted_total.inc(deleted)
        if deleted:
            _log.info("raw GPU samples deleted", rows=deleted, before=hour.isoformat())

    def _room(self, now: datetime, size: int, free: int) -> SpaceLow | None:
        """Low when the growth over the last day (at least GROWTH_SPAN of it measured)
        would use `free` within storage.space_warning_days."""
        per_day = growth_per_day(self._store.store_sizes(now - _DAY), size, now)
        days = days_until_full(free, per_day)
        limit = self._settings.storage.space_warning_days
        if per_day is None or days is None or days >= limit:
            return None
        low = self.room.get()
        return SpaceLow(low.since if low else now, free, per_day, timedelta(days=limit))
