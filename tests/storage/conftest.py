"""Every `db_url` test runs twice: on a SQLite file and on a fresh PostgreSQL schema."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from observer.storage.store import Store
from tests import components
from tests.support.databases import migrate

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The test server; unreachable fails the run in CI and skips the PostgreSQL half here."""
    components.require("postgres")
    url = os.environ.get("OBSERVER_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as exc:
        reason = f"PostgreSQL at {sa.make_url(url)!r} is unreachable: {exc.orig}"
        components.unavailable(reason + " (set OBSERVER_TEST_POSTGRES_URL)")
    finally:
        engine.dispose()
    yield url


@pytest.fixture
def postgres_schema_url(postgres_url: str) -> Iterator[str]:
    """A URL whose connections see only a new, empty schema; the schema is dropped after."""
    schema = f"test_{uuid.uuid4().hex[:16]}"
    # pre_ping: a test may restart the server in between (the store outage).
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database, not yet migrated."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'observer.db'}"
    url: str = request.getfixturevalue("postgres_schema_url")
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A store on a migrated, empty database."""
    migrate(db_url)
    with Store(db_url) as opened:
        yield opened


@pytest.fixture
def inspect_engine(db_url: str) -> Iterator[sa.Engine]:
    """A plain engine on the same database, to look at what the store left there."""
    engine = sa.create_engine(db_url)
    yield engine
    engine.dispose()
