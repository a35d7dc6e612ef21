"""A simulated week, played once per session, and PostgreSQL and SQLite stores."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from observer.reports.publish import write_daily, write_verdict
from observer.settings import Settings
from observer.storage.store import Store
from tests.reports.week import DAYS, Week, local

# The storage tests' fixtures: a fresh PostgreSQL schema per test, SQLite beside it.
from tests.storage.conftest import (  # noqa: F401
    db_url,
    postgres_schema_url,
    postgres_url,
    store,
)

# Reports are built the next Monday at 09:00, after the 08:00 daily build time.
BUILT_AT = local(DAYS[-1] + timedelta(days=1), 9)


@dataclass
class PlayedWeek:
    week: Week
    built_at: datetime
    daily: dict[str, list[Path]]  # ISO day -> md, html, json
    verdict: list[Path]

    @property
    def store(self) -> Store:
        return self.week.store

    @property
    def settings(self) -> Settings:
        return self.week.settings


@pytest.fixture(scope="session")
def played(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlayedWeek]:
    week = Week(tmp_path_factory.mktemp("week"))
    week.play()
    daily = {day.isoformat(): write_daily(week.store, week.settings, day, BUILT_AT) for day in DAYS}
    verdict = write_verdict(week.store, week.settings, BUILT_AT)
    yield PlayedWeek(week, BUILT_AT, daily, verdict)
    week.store.close()
