"""The Store: findings and GPU samples in and out of SQLite or PostgreSQL, as domain types.

Every database failure leaves this module as a StoreError whose message names the database
(password hidden) and the driver's reason. A value the database never saw (a naive
datetime, evidence that is not JSON) is the caller's bug and keeps its ValueError/TypeError.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError, StatementError

from observer.domain import Finding, FindingKind, Severity
from observer.errors import StoreError
from observer.storage.tables import findings_table, gpu_samples_table

# Writers wait this long for a lock held by another process before SQLite reports 'busy'.
SQLITE_BUSY_TIMEOUT_MS = 30_000
POSTGRES_CONNECT_TIMEOUT_SECONDS = 10  # unless the URL sets connect_timeout

_MIGRATIONS = Path(__file__).with_name("migrations")


@dataclass(frozen=True, slots=True)
class StoredGpuSample:
    """One GPU's lean sample as the controller keeps it (a subset of GpuSample, per node)."""

    node: str
    gpu_uuid: str
    gpu_index: int
    at: datetime
    utilization_gpu_percent: int | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_milliwatts: int | None = None
    process_count: int | None = None


_SAMPLE_COLUMNS = tuple(gpu_samples_table.c[f.name] for f in fields(StoredGpuSample))


def store_url(sqlite_path: Path, url: str | None) -> str:
    """The database to use: `url` when one is configured, else the embedded SQLite file."""
    if url:
        return url
    return sa.URL.create("sqlite", database=str(sqlite_path)).render_as_string()


def upgrade(url: str) -> None:
    """Migrate the database at `url` to the newest schema; a no-op when it is already there.
    Backs `observer db upgrade`."""
    engine = _engine(url)
    try:
        with _store_errors(f"migrating {_display(url)}"), engine.begin() as connection:
            config = _alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    finally:
        engine.dispose()


class Store:
    """Findings and GPU samples in one database. Opening checks that the database is
    reachable and migrated to the schema this code expects."""

    def __init__(self, url: str) -> None:
        self._where = _display(url)
        self._engine = _engine(url)
        try:
            self._check_schema()
        except BaseException:
            self._engine.dispose()
            raise

    def _check_schema(self) -> None:
        head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
        with _store_errors(f"opening {self._where}"), self._engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
        if current != head:
            raise StoreError(
                f"{self._where} has schema revision {current or 'none'}, this observer needs "
                f"{head}: run `observer db upgrade`"
            )

    def save_findings(self, findings: Iterable[Finding]) -> None:
        """Insert new findings and update known ones (same key and opened_at): their
        closed_at, evidence, severity and summary. One transaction."""
        # The last version of a finding wins; one statement must not touch a row twice.
        rows = {(f.key, f.opened_at): _finding_row(f) for f in findings}
        if not rows:
            return
        with self._errors("saving findings"), self._engine.begin() as connection:
            insert = (
                postgresql.insert(findings_table)
                if connection.dialect.name == "postgresql"
                else sqlite.insert(findings_table)
            )
            upsert = insert.on_conflict_do_update(
                index_elements=[findings_table.c.key, findings_table.c.opened_at],
                set_={
                    name: insert.excluded[name]
                    for name in ("closed_at", "evidence", "severity", "summary")
                },
            )
            connection.execute(upsert, list(rows.values()))

    def findings(
        self,
        *,
        open_only: bool = False,
        since: datetime | None = None,
        detector: str | None = None,
    ) -> list[Finding]:
        """Findings ordered by opening. `since` keeps those active at or after it: still
        open or closed at/after it (one opened after `since` closed after it too)."""
        t = findings_table
        query = sa.select(t).order_by(t.c.opened_at, t.c.id)
        if open_only:
            query = query.where(t.c.closed_at.is_(None))
        if since is not None:
            query = query.where(sa.or_(t.c.closed_at.is_(None), t.c.closed_at >= since))
        if detector is not None:
            query = query.where(t.c.detector == detector)
        with self._errors("reading findings"), self._engine.connect() as connection:
            return [_finding(row) for row in connection.execute(query)]

    def add_gpu_samples(self, samples: Iterable[StoredGpuSample]) -> int:
        """Insert samples in one transaction; returns how many."""
        rows = [asdict(s) for s in samples]
        if rows:
            with self._errors("saving GPU samples"), self._engine.begin() as connection:
                connection.execute(sa.insert(gpu_samples_table), rows)
        return len(rows)

    def gpu_samples(
        self, node: str | None, since: datetime, until: datetime
    ) -> list[StoredGpuSample]:
        """Samples taken in [since, until), of one node or all (None), ordered by node, GPU
        and time."""
        t = gpu_samples_table
        query = (
            sa.select(*_SAMPLE_COLUMNS)
            .where(t.c.at >= since, t.c.at < until)
            .order_by(t.c.node, t.c.gpu_uuid, t.c.at, t.c.id)
        )
        if node is not None:
            query = query.where(t.c.node == node)
        with self._errors("reading GPU samples"), self._engine.connect() as connection:
            return [StoredGpuSample(*row) for row in connection.execute(query)]

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        with _store_errors(f"{doing} in {self._where}"):
            yield


def _engine(url: str) -> Engine:
    where = _display(url)
    try:
        with _store_errors(f"opening {where}"):
            parsed = sa.make_url(url)
            backend = parsed.get_backend_name()
            if backend == "sqlite":
                _check_sqlite_directory(parsed)
                engine = sa.create_engine(parsed)
                sa.event.listen(engine, "connect", _configure_sqlite)
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


def _check_sqlite_directory(url: sa.URL) -> None:
    # SQLite's own message ('unable to open database file') does not say what is wrong.
    if url.database and url.database != ":memory:":
        directory = Path(url.database).parent
        if not directory.is_dir():
            raise StoreError(
                f"cannot open SQLite database {url.database}: directory {directory} does not exist"
            )


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers (reports, metrics) run while the controller writes.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


@contextmanager
def _store_errors(doing: str) -> Iterator[None]:
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


def _reason(exc: BaseException | None) -> str:
    # Driver messages span lines ('connection refused\n\tIs the server running...').
    return " ".join(str(exc).split()) or type(exc).__name__


def _display(url: str) -> str:
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except SQLAlchemyError:
        return "the configured database"


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config


def _finding_row(finding: Finding) -> dict[str, Any]:
    return {
        "key": finding.key,
        "detector": finding.detector,
        "kind": finding.kind.value,
        "severity": finding.severity.value,
        "subject": dict(finding.subject),
        "summary": finding.summary,
        "opened_at": finding.opened_at,
        "closed_at": finding.closed_at,
        "evidence": dict(finding.evidence),
        "node": finding.subject.get("node"),
    }


def _finding(row: sa.Row[Any]) -> Finding:
    return Finding(
        detector=row.detector,
        kind=FindingKind(row.kind),
        subject=row.subject,
        severity=Severity(row.severity),
        summary=row.summary,
        opened_at=row.opened_at,
        closed_at=row.closed_at,
        evidence=row.evidence,
    )
