"""The store's room: its size per table and on its volume, the free space left there, the
sizes the controller measured, and raw GPU samples deleted in small batches once they are
past their retention (each batch its own transaction, so that a writer never waits long)."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from observer.records import StoreSize, TableSize
from observer.storage.database import Repository
from observer.storage.tables import (
    gpu_memory_hours_table,
    gpu_minutes_table,
    gpu_node_hours_table,
    gpu_samples_table,
    gpu_sm_minutes_table,
    gpu_sm_node_hours_table,
    gpu_sm_task_hours_table,
    gpu_task_hours_table,
    gpu_usage_hours_table,
    metadata,
    store_sizes_table,
)

_CHURNED = (
    gpu_samples_table,
    gpu_minutes_table,
    gpu_node_hours_table,
    gpu_task_hours_table,
    gpu_sm_minutes_table,
    gpu_sm_node_hours_table,
    gpu_sm_task_hours_table,
    gpu_usage_hours_table,
    gpu_memory_hours_table,
)


class RoomRepository(Repository):
    def oldest_gpu_sample(self) -> datetime | None:
        with self._reading("reading the oldest GPU sample") as connection:
            return connection.execute(sa.select(sa.func.min(gpu_samples_table.c.at))).scalar()

    def delete_gpu_samples(self, since: datetime, until: datetime, limit: int) -> int:
        """Delete at most `limit` samples taken in [since, until); returns how many."""
        t = gpu_samples_table
        batch = sa.select(t.c.id).where(t.c.at >= since, t.c.at < until).limit(limit)
        with self._errors("deleting GPU samples"), self._engine.begin() as connection:
            return connection.execute(sa.delete(t).where(t.c.id.in_(batch))).rowcount

    def reclaim_space(self) -> None:
        """Make the space of deleted samples usable again while the store is in use. SQLite
        with incremental auto-vacuum (a store this observer created) gives it back to the
        volume; an older file reuses it before it grows. PostgreSQL reuses a table's space
        once it is vacuumed: the samples' (deleted) and their counts' (each row updated with
        every batch of samples, a dead version each time), which autovacuum would reach only
        at its own thresholds."""
        with self._errors("reclaiming free pages"), self._engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                # Each step of the pragma frees one page; a script steps it to its end.
                driver: Any = connection.connection.driver_connection
                driver.executescript("PRAGMA incremental_vacuum")
            else:  # VACUUM runs outside a transaction
                churned = ", ".join(t.name for t in _CHURNED)
                connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    f"VACUUM {churned}"
                )

    def table_sizes(self) -> list[TableSize]:
        """Every table of the schema, by name: its rows and bytes, its indexes included."""
        with self._reading("measuring the tables") as connection:
            on_disk = (
                _sqlite_table_bytes(connection)
                if connection.dialect.name == "sqlite"
                else _postgres_table_bytes(connection)
            )
            return [
                TableSize(
                    table.name,
                    connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one(),
                    on_disk.get(table.name, 0),
                )
                for table in sorted(metadata.sorted_tables, key=lambda t: t.name)
            ]

    def database_bytes(self) -> tuple[int, int]:
        """What the database takes on its volume, and how much of that is free inside it
        (pages freed by deletes, reused before the database grows)."""
        with self._reading("measuring the store") as connection:
            if connection.dialect.name != "sqlite":
                size = connection.exec_driver_sql("SELECT pg_database_size(current_database())")
                return size.scalar_one(), 0
            page_size = connection.exec_driver_sql("PRAGMA page_size").scalar_one()
            free = connection.exec_driver_sql("PRAGMA freelist_count").scalar_one()
        path = self._sqlite_file()
        files = (path, path.with_name(path.name + "-wal")) if path else ()
        return sum(f.stat().st_size for f in files if f.exists()), free * page_size

    def volume_free_bytes(self) -> int | None:
        """The free space of the SQLite file's volume; None for PostgreSQL, whose volume is
        on its server."""
        path = self._sqlite_file()
        return None if path is None else shutil.disk_usage(path.parent).free

    def record_store_size(self, size: StoreSize) -> None:
        with self._errors("recording the store's size"), self._engine.begin() as connection:
            connection.execute(sa.insert(store_sizes_table).values(at=size.at, bytes=size.bytes))

    def store_sizes(self, since: datetime) -> list[StoreSize]:
        """The sizes measured at or after `since`, oldest first."""
        t = store_sizes_table
        query = sa.select(t.c.at, t.c.bytes).where(t.c.at >= since).order_by(t.c.at)
        with self._reading("reading the store's sizes") as connection:
            return [StoreSize(at, size) for at, size in connection.execute(query)]

    def _sqlite_file(self) -> Path | None:
        url = self._engine.url
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            return None
        return Path(str(url.database))


def _sqlite_table_bytes(connection: sa.Connection) -> dict[str, int]:
    # dbstat names each index apart; sqlite_schema says whose table it is.
    rows = connection.exec_driver_sql(
        "SELECT s.tbl_name, SUM(d.pgsize) FROM dbstat AS d "
        "JOIN sqlite_schema AS s ON s.name = d.name GROUP BY s.tbl_name"
    )
    return {name: size for name, size in rows}


def _postgres_table_bytes(connection: sa.Connection) -> dict[str, int]:
    rows = connection.exec_driver_sql(
        "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
        "WHERE relkind = 'r' AND relnamespace = to_regnamespace(current_schema())"
    )
    return {name: size for name, size in rows}
