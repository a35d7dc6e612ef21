"""The store's room, on SQLite and PostgreSQL alike: rows and bytes per table, raw GPU samples
deleted in batches of at most the size asked and only in the period asked, the sizes the
controller measured read back by period; a SQLite store this observer created gives the
pages deleted rows freed back to its volume."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from observer.records import StoredGpuSample, StoreSize
from observer.storage.store import Store
from tests.support.cli import run_cli
from tests.support.databases import migrated_sqlite

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def samples(minutes: int, start_minute: int = 0, nodes: int = 1) -> list[StoredGpuSample]:
    """The eight GPUs of nodes n0, n1..., one sample each a minute from T0 + `start_minute`."""
    return [
        StoredGpuSample(
            node=f"n{node}",
            gpu_uuid=f"GPU-{node}-{gpu}",
            gpu_index=gpu,
            at=T0 + timedelta(minutes=start_minute + minute),
            utilization_gpu_percent=50,
        )
        for minute in range(minutes)
        for node in range(nodes)
        for gpu in range(8)
    ]


def test_each_table_is_measured_by_rows_and_bytes(store: Store):
    store.add_gpu_samples(samples(minutes=120))

    sizes = {t.name: t for t in store.table_sizes()}

    assert sizes["gpu_samples"].rows == 2 * 60 * 8
    assert sizes["gpu_node_hours"].rows == 2
    assert sizes["gpu_samples"].bytes > sizes["gpu_node_hours"].bytes > 0
    assert sizes["findings"].rows == 0
    size, free_inside = store.database_bytes()
    assert size >= sum(t.bytes for t in sizes.values())
    assert free_inside >= 0


def test_samples_are_deleted_a_batch_at_a_time_and_only_in_the_period_then_vacuumed(
    store: Store,
):
    store.add_gpu_samples(samples(minutes=180))
    first_hour = (T0, T0 + timedelta(hours=1))

    batches = []
    while batch := store.delete_gpu_samples(*first_hour, limit=200):
        batches.append(batch)

    store.reclaim_space()

    assert batches == [200, 200, 80]
    assert store.gpu_samples(None, *first_hour) == []
    assert len(store.gpu_samples(None, T0, T0 + timedelta(hours=3))) == 2 * 60 * 8
    assert store.oldest_gpu_sample() == T0 + timedelta(hours=1)


def test_measured_sizes_come_back_oldest_first_from_the_time_asked(store: Store):
    for hours, size in ((2, 300), (0, 100), (1, 200)):
        store.record_store_size(StoreSize(T0 + timedelta(hours=hours), size))

    assert store.store_sizes(T0 + timedelta(minutes=30)) == [
        StoreSize(T0 + timedelta(hours=1), 200),
        StoreSize(T0 + timedelta(hours=2), 300),
    ]


def test_a_sqlite_store_gives_the_space_of_deleted_samples_back_to_its_volume(tmp_path: Path):
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    # a fleet's samples outweigh their per-minute counts, which stay
    store.add_gpu_samples(samples(minutes=120, nodes=4))
    full, _ = store.database_bytes()
    while store.delete_gpu_samples(T0, T0 + timedelta(hours=2), limit=5_000):
        pass
    _, freed = store.database_bytes()

    store.reclaim_space()

    _, free_inside = store.database_bytes()
    assert freed > full / 2  # the deleted rows' pages, free inside the file
    assert free_inside == 0
    # The WAL holds the deletes until a checkpoint; the database file itself shrank.
    assert (tmp_path / "observer.db").stat().st_size < full - freed / 2
    assert store.volume_free_bytes() is not None
    store.close()


def test_db_size_prints_each_table_and_the_volumes_room(tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    with Store(url) as store:
        store.add_gpu_samples(samples(minutes=60))
    config = tmp_path / "c.yaml"
    config.write_text(f"storage:\n  sqlite_path: {tmp_path / 'observer.db'}\n")

    text = run_cli("db", "size", "--config", str(config), cwd=tmp_path)
    as_json = run_cli("db", "size", "--json", "--config", str(config), cwd=tmp_path)

    assert text.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["table", "rows", "bytes"]
    assert any(line.split()[:2] == ["gpu_samples", "480"] for line in lines)
    unknown = "growth: not known: the running controller measures it each hour, over 6 h or more"
    assert unknown in lines
    assert lines[-1] == "raw GPU samples kept 7 days (storage.raw_retention_days)"
    report = json.loads(as_json.stdout)
    tables = {t["name"]: t for t in report["tables"]}
    assert tables["gpu_samples"]["rows"] == 480
    assert report["growth_bytes_per_day"] is None
    assert report["volume_free_bytes"] > 0
