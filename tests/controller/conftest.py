"""The storage tests' fixtures, for the controller tests that take a store: a fresh PostgreSQL
schema per test, SQLite beside it."""

from __future__ import annotations

from tests.storage.conftest import (  # noqa: F401
    db_url,
    postgres_schema_url,
    postgres_url,
    store,
)
