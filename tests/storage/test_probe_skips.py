"""Skipped probe launches: stored as they happen, read back by period in order, the same on
SQLite and PostgreSQL; migration 0009 adds their table to a 0008 database and takes it away."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from observer.records import ProbeSkip, SkipReason
from observer.storage.database import upgrade
from observer.storage.store import Store
from tests.storage.test_store import migrate

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def skip(minutes: float, probe: str = "burst", reason: SkipReason = SkipReason.BUDGET) -> ProbeSkip:
    return ProbeSkip(T0 + timedelta(minutes=minutes), probe, "research", "weekday-peak", reason)


def test_skips_come_back_by_period_in_the_order_they_happened(store: Store):
    late = skip(30, "isolation", SkipReason.NO_OTHER_TENANT)
    store.add_probe_skips([late, skip(0), skip(0)])
    store.add_probe_skips([skip(10, "isolation", SkipReason.BACKEND_ERROR)])
    store.add_probe_skips([])

    assert store.probe_skips(T0, T0 + timedelta(hours=1)) == [
        skip(0),
        skip(0),
        skip(10, "isolation", SkipReason.BACKEND_ERROR),
        late,
    ]
    assert store.probe_skips(T0 + timedelta(minutes=10), late.at) == [
        skip(10, "isolation", SkipReason.BACKEND_ERROR)
    ]


def test_a_skip_outside_any_window_keeps_none(store: Store):
    outside = ProbeSkip(T0, "short", "prod", None, SkipReason.BUDGET)
    store.add_probe_skips([outside])
    assert store.probe_skips(T0, T0 + timedelta(seconds=1)) == [outside]


def test_migration_0009_adds_the_skips_to_a_0008_database_and_reverts_cleanly(
    db_url: str, inspect_engine: sa.Engine
):
    migrate(db_url, "0008")
    assert "probe_skips" not in sa.inspect(inspect_engine).get_table_names()

    upgrade(db_url)
    with Store(db_url) as store:
        store.add_probe_skips([skip(0)])
        assert store.probe_skips(T0, T0 + timedelta(minutes=1)) == [skip(0)]
    migrate(db_url, "0008", down=True)
    assert "probe_skips" not in sa.inspect(inspect_engine).get_table_names()
