"""Delivery tests record results in a store: the storage tests' fixtures, SQLite and
PostgreSQL."""

from __future__ import annotations

from tests.storage.conftest import (  # noqa: F401
    db_url,
    postgres_schema_url,
    postgres_url,
    store,
)
