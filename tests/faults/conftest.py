"""The storage tests' PostgreSQL fixtures, for the store outage."""

from __future__ import annotations

from tests.storage.conftest import postgres_schema_url, postgres_url  # noqa: F401
