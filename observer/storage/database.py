"""The database itself: which one to use, its engine, its migrations, and every failure in it
as a StoreError whose message names the database (password hidden) and the driver's reason.

A value the database never saw (a naive datetime, evidence that is not JSON) is the caller's
bug and keeps its ValueError/TypeError. The only importer of alembic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError, StatementError

from observer.clock import Clock, SystemClock
from observer.errors import SchemaError, SchemaNewerError, StoreError
from observer.storage.upgrades import (
    Installation,
    last_upgrade,
    newer_schema_problem,
    record_upgrade,
)

# Writers wait this long for a lock held by another process before SQLite reports 'busy'.
SQLITE_BUSY_TIMEOUT_MS = 30_000
POSTGRES_CONNECT_TIMEOUT_SECONDS = 10  # unless the URL sets connect_timeout

_MIGRATIONS = Path(__file__).with_name("migrations")


def store_url(sqlite_path: Path, url: str | None) -> str:
    """The database to use: `url` when one is configured, else the embedded SQLite file."""
    if url:
        return url
    return sa.URL.create("sqlite", database=str(sqlite_path)).render_as_string()


def upgrade(url: str, installation: Installation | None = None, clock: Clock | None = None) -> None:
    """Migrate the database at `url` to the newest schema; a no-op when it is already there.
    Records `installation` (by default this release, no Helm) as the release that left it at
    this schema. A store a newer release migrated is refused (SchemaNewerError). Backs
    `observer db upgrade`."""
    engine = create_engine(url)
    where = display(url)
    try:
        with store_errors(f"migrating {where}"), engine.begin() as connection:
            config = _alembic_config()
            head, _ = _revisions(connection, config, where)
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            now = (clock or SystemClock()).now()
            record_upgrade(connection, now, head, installation or Installation())
    finally:
        engine.dispose()


def check_schema(engine: Engine, where: str) -> None:
    """Refuse a database that is not migrated to the schema this code expects, without
    creating a missing SQLite file as connecting would."""
    config = _alembic_config()
    if _missing_sqlite_file(engine.url):
        head = ScriptDirectory.from_config(config).get_current_head()
        raise SchemaError(
            f"{where} has schema revision none (no such file), this observer needs {head}"
        )
    with store_errors(f"opening {where}"), engine.connect() as connection:
        head, current = _revisions(connection, config, where)
    if current != head:
        raise SchemaError(
            f"{where} has schema revision {current or 'none'}, this observer needs {head}"
        )


def _revisions(connection: sa.Connection, config: Config, where: str) -> tuple[str, str | None]:
    """This code's newest revision and the database's (None: never migrated);
    SchemaNewerError when the database is at one this code does not know: a newer release
    migrated it, and alembic would only say it cannot locate the revision."""
    script = ScriptDirectory.from_config(config)
    head = script.get_current_head()
    if head is None:
        raise AssertionError(f"no migration in {_MIGRATIONS}")
    current = MigrationContext.configure(connection).get_current_revision()
    if current is not None and current not in {r.revision for r in script.walk_revisions()}:
        raise SchemaNewerError(
            newer_schema_problem(where, current, head, last_upgrade(connection, current))
        )
    return head, current


def create_engine(url: str, *, durable: bool = True) -> Engine:
    """`durable=False` (SQLite only): a commit is not flushed to the disk, so the process may
    crash but the machine must not; for a database thrown away afterwards, as the demo's."""
    where = display(url)
    try:
        with store_errors(f"opening {where}"):
            parsed = sa.make_url(url)
            backend = parsed.get_backend_name()
            if backend == "sqlite":
                _check_sqlite_directory(parsed)
                engine = sa.create_engine(parsed)
                sa.event.listen(engine, "connect", _configure_sqlite)
                if not durable:
                    sa.event.listen(engine, "connect", _skip_sqlite_flush)
                return engine
            if backend == "postgresql":
                # An unreachable host fails within seconds instead of hanging a loop, unless
                # the URL sets its own connect_timeout. pre_ping: a daemon that runs for weeks
                # outlives server restarts and idle-connection timeouts.
                timeout = {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_SECONDS}
                return sa.create_engine(
                    parsed,
                    pool_pre_ping=True,
                    connect_args={} if "connect_timeout" in parsed.query else timeout,
                )
    except ImportError as exc:
        raise StoreError(f"opening {where} failed: its driver is not installed ({exc})") from exc
    raise StoreError(f"unsupported database {where}: use sqlite or postgresql")


@contextmanager
def store_errors(doing: str) -> Iterator[None]:
    """Database failures inside the block raise StoreError("<doing> failed: <reason>")."""
    try:
        yield
    except DBAPIError as exc:
        raise StoreError(f"{doing} failed: {_reason(exc.orig)}") from exc
    except StatementError as exc:
        if isinstance(exc.orig, ValueError | TypeError):
            raise exc.orig from None
        raise StoreError(f"{doing} failed: {_reason(exc.orig)}") from exc
    except (SQLAlchemyError, CommandError) as exc:
        raise StoreError(f"{doing} failed: {_reason(exc)}") from exc


def display(url: str) -> str:
    """The URL as messages show it: password hidden."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except SQLAlchemyError:
        return "the configured database"


@cache
def upsert(
    dialect: str,
    table: sa.Table,
    keys: tuple[str, ...],
    *,
    replace: tuple[str, ...] = (),
    add: tuple[str, ...] = (),
) -> sa.Insert:
    """INSERT ... ON CONFLICT (keys) DO UPDATE in this dialect: the `replace` columns take the
    new row's value, the `add` columns add it to theirs. Built once for each set of arguments
    and executed with parameters: building its `excluded` terms cost more than running it."""
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
    changes: dict[str, Any] = {name: insert.excluded[name] for name in replace}
    changes.update({name: table.c[name] + insert.excluded[name] for name in add})
    return insert.on_conflict_do_update(
        index_elements=[table.c[name] for name in keys], set_=changes
    )


@dataclass(frozen=True, slots=True)
class StoreOutage:
    """The store has failed every operation since `since`; `error` is the latest failure."""

    since: datetime
    error: str
    reads_only: bool = False  # every failure since was a read: a read that succeeds ends it


class Repository:
    """Base of the store's repositories: the engine they share, their error messages, whether
    the database is failing (`outage`, replaced whole so any thread may read it), and who is
    told of each failure (the controller counts them)."""

    def __init__(
        self, engine: Engine, where: str, clock: Clock, on_error: Callable[[], object]
    ) -> None:
        self._engine = engine
        self._where = where
        self._clock = clock
        self._on_error = on_error
        self.outage: StoreOutage | None = None

    @property
    def where(self) -> str:
        """The database, as messages name it (password hidden)."""
        return self._where

    @contextmanager
    def _errors(self, doing: str, *, reading: bool = False) -> Iterator[None]:
        """A failure in the block starts or continues the outage; success ends it, unless
        the block only read and a write has failed since: a full disk still answers reads,
        and a store that cannot keep what the observer sees is failing."""
        try:
            with store_errors(f"{doing} in {self._where}"):
                yield
        except StoreError as exc:
            outage = self.outage
            self.outage = StoreOutage(
                outage.since if outage else self._clock.now(),
                str(exc),
                reading and (outage.reads_only if outage else True),
            )
            self._on_error()
            raise
        if not reading or (self.outage is not None and self.outage.reads_only):
            self.outage = None

    @contextmanager
    def _reading(self, doing: str) -> Iterator[sa.Connection]:
        """A connection to read with, its failures and successes as `_errors` counts reads."""
        with self._errors(doing, reading=True), self._engine.connect() as connection:
            yield connection

    @contextmanager
    def elsewhere(self) -> Iterator[None]:
        """Work on this database done by another process (the report build's, which answers
        its failures as StoreError): a StoreError raised in the block is this store's failure,
        kept as its outage and counted, and the block's end clears the outage as a read of its
        own would (the build reads the store; it writes files)."""
        with self._errors("working elsewhere", reading=True):
            yield


def _check_sqlite_directory(url: sa.URL) -> None:
    # SQLite's own message ('unable to open database file') does not say what is wrong.
    if url.database and url.database != ":memory:":
        directory = Path(url.database).parent
        if not directory.is_dir():
            raise StoreError(
                f"cannot open SQLite database {url.database}: directory {directory} does not exist"
            )


def _missing_sqlite_file(url: sa.URL) -> bool:
    database = url.database
    return (
        url.get_backend_name() == "sqlite"
        and bool(database)
        and database != ":memory:"
        and not Path(str(database)).exists()
    )


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers (reports, metrics) run while the controller writes. Incremental
    # auto-vacuum takes only on a database with no table yet (one `observer db upgrade`
    # creates): there, pages that deleted samples freed can be given back to the volume.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def _skip_sqlite_flush(dbapi_connection: Any, _record: Any) -> None:
    # In WAL mode NORMAL stays consistent through a crash of the process; only the last
    # commits can be lost, and only to a crash of the machine.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _reason(exc: BaseException | None) -> str:
    # Driver messages span lines ('connection refused\n\tIs the server running...').
    return " ".join(str(exc).split()) or type(exc).__name__


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config
