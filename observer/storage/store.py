"""The Store: findings, GPU samples, probe runs and scheduler state in and out of SQLite or
PostgreSQL, as domain types.

Every database failure leaves this module as a StoreError whose message names the database
(password hidden) and the driver's reason. A value the database never saw (a naive
datetime, evidence that is not JSON) is the caller's bug and keeps its ValueError/TypeError.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, fields
from datetime import UTC, datetime, timedelta
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

from observer.domain import (
    Expectation,
    Finding,
    FindingKind,
    JobPhase,
    Outcome,
    ProbeRun,
    QueueState,
    RunState,
    SchedulerNode,
    SchedulerSnapshot,
    Severity,
)
from observer.errors import StoreError
from observer.records import (
    UTILIZATION_PERCENTS,
    GpuSampleCounts,
    InterventionSource,
    JobSlot,
    JobTally,
    StoredAlert,
    StoredDelivery,
    StoredGpuSample,
    StoredIntervention,
    StoredNodeChange,
    StoredQueueSample,
)
from observer.storage.tables import (
    alerts_table,
    findings_table,
    gpu_minutes_table,
    gpu_node_hours_table,
    gpu_samples_table,
    gpu_tenant_hours_table,
    interventions_table,
    job_listings_table,
    job_tallies_table,
    node_states_table,
    probe_runs_table,
    queue_samples_table,
    report_deliveries_table,
)

# Writers wait this long for a lock held by another process before SQLite reports 'busy'.
SQLITE_BUSY_TIMEOUT_MS = 30_000
POSTGRES_CONNECT_TIMEOUT_SECONDS = 10  # unless the URL sets connect_timeout

_MIGRATIONS = Path(__file__).with_name("migrations")


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
    """Findings, GPU samples, probe runs and scheduler state in one database. Opening checks
    that the database is reachable and migrated to the schema this code expects."""

    def __init__(self, url: str) -> None:
        self._where = _display(url)
        self._engine = _engine(url)
        # Each node's last stored state, so unchanged nodes are not written again; read
        # from the database on the first snapshot (None until then).
        self._last_nodes: dict[str, SchedulerNode] | None = None
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
            insert = _insert(connection, findings_table)
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
        """Insert samples, and add them to the counts reports read, in one transaction;
        returns how many."""
        # A shallow row per sample: asdict's deep copy was most of a large fleet's insert.
        rows = [{c.name: getattr(s, c.name) for c in _SAMPLE_COLUMNS} for s in samples]
        if rows:
            with self._errors("saving GPU samples"), self._engine.begin() as connection:
                connection.execute(sa.insert(gpu_samples_table), rows)
                _add_counts(connection, rows)
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

    def gpu_sample_counts(self, since: datetime, until: datetime) -> GpuSampleCounts:
        """Samples taken in [since, until), counted: a day of a large fleet is millions of
        samples, and a report needs only how many read each utilisation, where and when.
        The whole UTC hours of the period come from the counts kept as samples are stored,
        the rest (less than an hour at either end) is counted from the samples."""
        first, last = _hour_after(since), _hour_of(until)
        with self._errors("counting GPU samples"), self._engine.connect() as connection:
            if first >= last:
                return _count_samples(connection, since, until)
            parts = (
                _count_samples(connection, since, first),
                _read_counts(connection, first, last),
                _count_samples(connection, last, until),
            )
        return GpuSampleCounts(
            tuple(m for part in parts for m in part.by_minute),
            tuple(n for part in parts for n in part.by_node),
            tuple(t for part in parts for t in part.by_tenant),
        )

    def save_runs(self, runs: Iterable[ProbeRun]) -> None:
        """Insert new runs and overwrite known ones (same run_id) with every field. One
        transaction."""
        # The last version of a run wins; one statement must not touch a row twice.
        rows = {run.run_id: _run_row(run) for run in runs}
        if not rows:
            return
        with self._errors("saving probe runs"), self._engine.begin() as connection:
            insert = _insert(connection, probe_runs_table)
            upsert = insert.on_conflict_do_update(
                index_elements=[probe_runs_table.c.run_id],
                # log_checked_at is not a run field: only mark_log_checked writes it.
                set_={
                    c.name: insert.excluded[c.name]
                    for c in probe_runs_table.c
                    if c.name not in ("run_id", "log_checked_at")
                },
            )
            connection.execute(upsert, list(rows.values()))

    def runs(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        active_only: bool = False,
        probe: str | None = None,
        tenant: str | None = None,
    ) -> list[ProbeRun]:
        """Runs ordered by submission (not yet submitted last), then run_id. `since` and
        `until` keep those submitted in [since, until); `active_only` those not done."""
        t = probe_runs_table
        query = sa.select(t).order_by(t.c.submitted_at.asc().nulls_last(), t.c.run_id)
        if since is not None:
            query = query.where(t.c.submitted_at >= since)
        if until is not None:
            query = query.where(t.c.submitted_at < until)
        if active_only:
            query = query.where(t.c.state != RunState.DONE.value)
        if probe is not None:
            query = query.where(t.c.probe == probe)
        if tenant is not None:
            query = query.where(t.c.tenant == tenant)
        with self._errors("reading probe runs"), self._engine.connect() as connection:
            return [_run(row) for row in connection.execute(query)]

    def run(self, run_id: str) -> ProbeRun | None:
        query = sa.select(probe_runs_table).where(probe_runs_table.c.run_id == run_id)
        with self._errors("reading a probe run"), self._engine.connect() as connection:
            row = connection.execute(query).one_or_none()
        return None if row is None else _run(row)

    def mark_log_checked(self, run_ids: Collection[str], at: datetime) -> None:
        """Record that the log-loss check of these runs is done (read back or given up)."""
        if not run_ids:
            return
        t = probe_runs_table
        query = sa.update(t).where(t.c.run_id.in_(run_ids)).values(log_checked_at=at)
        with self._errors("marking log checks"), self._engine.begin() as connection:
            connection.execute(query)

    def runs_to_log_check(
        self, probes: Collection[str], finished_since: datetime
    ) -> list[ProbeRun]:
        """Runs of these probes that finished at or after `finished_since` and whose log-loss
        check is not done, ordered by their end."""
        t = probe_runs_table
        query = (
            sa.select(t)
            .where(
                t.c.probe.in_(probes),
                t.c.finished_at >= finished_since,
                t.c.log_checked_at.is_(None),
            )
            .order_by(t.c.finished_at, t.c.run_id)
        )
        with self._errors("reading runs to log-check"), self._engine.connect() as connection:
            return [_run(row) for row in connection.execute(query)]

    def save_scheduler_snapshot(self, snapshot: SchedulerSnapshot) -> None:
        """Store the snapshot's queues, and its nodes as changes: a row for each node that
        is new or differs from its last stored state, and one for each node that is no
        longer in the snapshot. Jobs are not stored (probe runs are). One transaction."""
        current = {node.name: node for node in snapshot.nodes}
        with self._errors("saving a scheduler snapshot"), self._engine.begin() as connection:
            last = self._last_nodes
            if last is None:
                # A restarted controller continues the log instead of rewriting every node.
                last = {node.name: node for node in _latest_nodes(connection, at=None)}
            changes = [
                StoredNodeChange(snapshot.at, node)
                for name, node in current.items()
                if last.get(name) != node
            ] + [
                StoredNodeChange(snapshot.at, last[name], removed=True)
                for name in sorted(last.keys() - current.keys())
            ]
            if snapshot.queues:
                queue_rows = [_queue_row(snapshot.at, queue) for queue in snapshot.queues]
                connection.execute(sa.insert(queue_samples_table), queue_rows)
            if changes:
                node_rows = [_node_row(change) for change in changes]
                connection.execute(sa.insert(node_states_table), node_rows)
        # Only once committed: a failed write is written again with the next snapshot.
        self._last_nodes = current

    def queue_samples(
        self, since: datetime, until: datetime, tenant: str | None = None
    ) -> list[StoredQueueSample]:
        """Queue samples taken in [since, until), of one tenant or all, in the order they
        were stored."""
        t = queue_samples_table
        query = sa.select(t).where(t.c.at >= since, t.c.at < until).order_by(t.c.at, t.c.id)
        if tenant is not None:
            query = query.where(t.c.tenant == tenant)
        with self._errors("reading queue samples"), self._engine.connect() as connection:
            return [StoredQueueSample(row.at, _queue(row)) for row in connection.execute(query)]

    def node_states(self, at: datetime) -> list[SchedulerNode]:
        """Every node known at `at` as it was then (its last change at or before `at`),
        ordered by name; nodes that had left the snapshots by then are left out."""
        with self._errors("reading node states"), self._engine.connect() as connection:
            return _latest_nodes(connection, at)

    def first_pools(self, since: datetime, until: datetime) -> dict[str, str | None]:
        """Each node's pool in its first change in [since, until): the pool of a node that
        left during a period, without reading the period's whole change log."""
        t = node_states_table
        first = sa.func.row_number().over(partition_by=t.c.node, order_by=(t.c.at, t.c.id))
        changes = (
            sa.select(t.c.node, t.c.pool, first.label("nth"))
            .where(t.c.at >= since, t.c.at < until)
            .subquery()
        )
        query = sa.select(changes.c.node, changes.c.pool).where(changes.c.nth == 1)
        with self._errors("reading node pools"), self._engine.connect() as connection:
            return {node: pool for node, pool in connection.execute(query)}

    def node_changes(
        self, since: datetime, until: datetime, node: str | None = None
    ) -> list[StoredNodeChange]:
        """Node changes in [since, until), of one node or all, in the order they happened."""
        t = node_states_table
        # Plain tuples, unpacked in place: a week of a busy 1,000-node cluster is a million
        # changes, and named-row access cost more than the query. Instants come as the
        # driver gives them and are converted once each: a snapshot's changes share one.
        query = (
            sa.select(
                sa.type_coerce(t.c.at, sa.types.NullType()),
                t.c.removed,
                t.c.node,
                t.c.pool,
                t.c.gpus_total,
                t.c.gpus_allocated,
                t.c.state,
                t.c.reason,
            )
            .where(t.c.at >= since, t.c.at < until)
            .order_by(t.c.at, t.c.id)
        )
        if node is not None:
            query = query.where(t.c.node == node)
        instants: dict[datetime | str, datetime] = {}
        # A node goes back and forth between a few states: each is built once.
        states: dict[tuple[Any, ...], SchedulerNode] = {}
        with self._errors("reading node changes"), self._engine.connect() as connection:
            return [
                StoredNodeChange(
                    instants.get(row[0]) or instants.setdefault(row[0], _utc(row[0])),
                    states.get(state := row[2:]) or states.setdefault(state, SchedulerNode(*state)),
                    row[1],
                )
                for row in connection.execute(query)
            ]

    def save_alerts(self, alerts: Iterable[StoredAlert]) -> None:
        """Insert new firings and update known ones (same fingerprint and starts_at): their
        end, last sighting, labels, severity and summary. One transaction."""
        rows = {(a.fingerprint, a.starts_at): _alert_row(a) for a in alerts}
        if not rows:
            return
        with self._errors("saving alerts"), self._engine.begin() as connection:
            insert = _insert(connection, alerts_table)
            upsert = insert.on_conflict_do_update(
                index_elements=[alerts_table.c.fingerprint, alerts_table.c.starts_at],
                set_={
                    name: insert.excluded[name]
                    for name in ("ends_at", "last_seen_at", "labels", "severity", "summary")
                },
            )
            connection.execute(upsert, list(rows.values()))

    def alerts(self, since: datetime, until: datetime) -> list[StoredAlert]:
        """Firings that started in [since, until), in the order they started."""
        t = alerts_table
        query = (
            sa.select(t)
            .where(t.c.starts_at >= since, t.c.starts_at < until)
            .order_by(t.c.starts_at, t.c.fingerprint)
        )
        with self._errors("reading alerts"), self._engine.connect() as connection:
            return [_alert(row) for row in connection.execute(query)]

    def add_intervention(self, intervention: StoredIntervention) -> None:
        with self._errors("saving an intervention"), self._engine.begin() as connection:
            connection.execute(sa.insert(interventions_table), [_intervention_row(intervention)])

    def interventions(self, since: datetime, until: datetime) -> list[StoredIntervention]:
        """Interventions at [since, until), in the order they happened."""
        t = interventions_table
        query = sa.select(t).where(t.c.at >= since, t.c.at < until).order_by(t.c.at, t.c.id)
        with self._errors("reading interventions"), self._engine.connect() as connection:
            return [_intervention(row) for row in connection.execute(query)]

    def add_deliveries(self, deliveries: Iterable[StoredDelivery]) -> None:
        rows = [asdict(d) for d in deliveries]
        if rows:
            with self._errors("saving report deliveries"), self._engine.begin() as connection:
                connection.execute(sa.insert(report_deliveries_table), rows)

    def deliveries(
        self,
        report: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[StoredDelivery]:
        """Deliveries in the order they happened, of one report or all, made in [since,
        until) (either bound left out: open)."""
        t = report_deliveries_table
        query = sa.select(
            t.c.at, t.c.report, t.c.channel, t.c.outcome, t.c.attempts, t.c.detail
        ).order_by(t.c.at, t.c.id)
        if report is not None:
            query = query.where(t.c.report == report)
        if since is not None:
            query = query.where(t.c.at >= since)
        if until is not None:
            query = query.where(t.c.at < until)
        with self._errors("reading report deliveries"), self._engine.connect() as connection:
            return [StoredDelivery(*row) for row in connection.execute(query)]

    def save_job_slots(self, slots: Iterable[JobSlot]) -> None:
        """Store each slot's tallies in place of what an earlier listing of it stored. One
        transaction."""
        slots = list(slots)
        if not slots:
            return
        listings, tallies = job_listings_table, job_tallies_table
        starts = [slot.start for slot in slots]
        with self._errors("saving job tallies"), self._engine.begin() as connection:
            connection.execute(sa.delete(tallies).where(tallies.c.slot.in_(starts)))
            connection.execute(sa.delete(listings).where(listings.c.slot.in_(starts)))
            connection.execute(
                sa.insert(listings),
                [
                    {
                        "slot": slot.start,
                        "listed_until": slot.listed_until,
                        "complete": slot.complete,
                        "note": slot.note,
                    }
                    for slot in slots
                ],
            )
            rows = [
                {
                    "slot": slot.start,
                    "tenant": tally.tenant,
                    "phase": tally.phase.value,
                    "reason": tally.reason or "",
                    "jobs": tally.jobs,
                }
                for slot in slots
                for tally in slot.tallies
            ]
            if rows:
                connection.execute(sa.insert(tallies), rows)

    def job_slots(self, since: datetime, until: datetime) -> list[JobSlot]:
        """The listed slots starting in [since, until), in order; a slot never listed is
        absent."""
        listings, tallies = job_listings_table, job_tallies_table
        with self._errors("reading job tallies"), self._engine.connect() as connection:
            listed = connection.execute(
                sa.select(listings)
                .where(listings.c.slot >= since, listings.c.slot < until)
                .order_by(listings.c.slot)
            ).all()
            counted = connection.execute(
                sa.select(tallies)
                .where(tallies.c.slot >= since, tallies.c.slot < until)
                .order_by(tallies.c.tenant, tallies.c.phase, tallies.c.reason)
            ).all()
        by_slot: dict[datetime, list[JobTally]] = {}
        for row in counted:
            by_slot.setdefault(row.slot, []).append(
                JobTally(row.tenant, JobPhase(row.phase), row.reason or None, row.jobs)
            )
        return [
            JobSlot(
                row.slot, row.listed_until, row.complete, row.note, tuple(by_slot.get(row.slot, ()))
            )
            for row in listed
        ]

    def jobs_listed_until(self) -> datetime | None:
        """How far finished jobs have been listed: the end of the latest listing."""
        query = sa.select(sa.func.max(job_listings_table.c.listed_until))
        with self._errors("reading job tallies"), self._engine.connect() as connection:
            latest: datetime | None = connection.execute(query).scalar()  # max() keeps UTC
        return latest

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


def _insert(connection: sa.Connection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT that can turn into an upsert (ON CONFLICT) in this connection's dialect."""
    if connection.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def _hour_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_after(at: datetime) -> datetime:
    """The first whole UTC hour at or after `at`."""
    hour = _hour_of(at)
    return hour if hour == at else hour + timedelta(hours=1)


def _tally() -> list[int]:
    return [0] * len(UTILIZATION_PERCENTS)


def _at_percent(percent: int) -> int:
    return min(max(percent, UTILIZATION_PERCENTS[0]), UTILIZATION_PERCENTS[-1])


def _add_counts(connection: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Add sample rows to the per-minute, per-node-hour and per-tenant-hour counts."""
    minutes: dict[datetime, list[int]] = {}
    nodes: dict[tuple[datetime, str], list[int]] = {}  # [unread, p0, ..., p100]
    tenants: dict[tuple[datetime, str], list[int]] = {}
    starts: dict[datetime, datetime] = {}  # a node's GPUs share their instant
    for row in rows:
        at = row["at"]
        minute = starts.get(at)
        if minute is None:
            minute = starts[at] = at.astimezone(UTC).replace(second=0, microsecond=0)
        hour = minute.replace(minute=0)
        node = nodes.get((hour, row["node"]))
        if node is None:
            node = nodes[hour, row["node"]] = [0, *_tally()]
        if row["utilization_gpu_percent"] is None:
            node[0] += 1
            continue
        percent = _at_percent(row["utilization_gpu_percent"])
        node[1 + percent] += 1
        tally = minutes.get(minute)
        if tally is None:
            tally = minutes[minute] = _tally()
        tally[percent] += 1
        if row["tenant"] is not None:
            tally = tenants.get((hour, row["tenant"]))
            if tally is None:
                tally = tenants[hour, row["tenant"]] = _tally()
            tally[percent] += 1
    names = [f"p{p}" for p in UTILIZATION_PERCENTS]
    _add_to(
        connection,
        gpu_minutes_table,
        [{"minute": m, **dict(zip(names, t, strict=True))} for m, t in minutes.items()],
    )
    _add_to(
        connection,
        gpu_node_hours_table,
        [
            {"hour": h, "node": n, "unread": t[0], **dict(zip(names, t[1:], strict=True))}
            for (h, n), t in nodes.items()
        ],
    )
    _add_to(
        connection,
        gpu_tenant_hours_table,
        [
            {"hour": h, "tenant": n, **dict(zip(names, t, strict=True))}
            for (h, n), t in tenants.items()
        ],
    )


def _add_to(connection: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Insert count rows, adding to the counts of rows already there (same key)."""
    if not rows:
        return
    insert = _insert(connection, table)
    keys = [c for c in table.c if c.primary_key]
    connection.execute(
        insert.on_conflict_do_update(
            index_elements=keys,
            set_={c.name: c + insert.excluded[c.name] for c in table.c if not c.primary_key},
        ),
        rows,
    )


def _read_counts(connection: sa.Connection, since: datetime, until: datetime) -> GpuSampleCounts:
    """The counts kept as samples were stored, of the whole UTC hours [since, until)."""
    m, n, t = gpu_minutes_table, gpu_node_hours_table, gpu_tenant_hours_table

    def sums(table: sa.Table) -> list[sa.ColumnElement[Any]]:
        return [sa.func.sum(table.c[f"p{p}"]) for p in UTILIZATION_PERCENTS]

    minutes = connection.execute(
        sa.select(m).where(m.c.minute >= since, m.c.minute < until).order_by(m.c.minute)
    )
    nodes = connection.execute(
        sa.select(n.c.node, sa.func.sum(n.c.unread), *sums(n))
        .where(n.c.hour >= since, n.c.hour < until)
        .group_by(n.c.node)
        .order_by(n.c.node)
    )
    tenants = connection.execute(
        sa.select(t.c.tenant, *sums(t))
        .where(t.c.hour >= since, t.c.hour < until)
        .group_by(t.c.tenant)
        .order_by(t.c.tenant)
    )
    return GpuSampleCounts(
        tuple((row[0], tuple(row[1:])) for row in minutes),
        tuple((row[0], tuple(row[2:]), row[1]) for row in nodes),
        tuple((row[0], tuple(row[1:])) for row in tenants),
    )


def _count_samples(connection: sa.Connection, since: datetime, until: datetime) -> GpuSampleCounts:
    """Samples taken in [since, until) counted from the samples themselves."""
    t = gpu_samples_table
    percent = t.c.utilization_gpu_percent
    period = (t.c.at >= since, t.c.at < until)
    count = sa.func.count()
    minute = _minute(connection, t.c.at)
    minutes: dict[datetime | str, list[int]] = {}  # up to 101 rows share a minute
    for m, p, k in connection.execute(
        sa.select(minute, percent, count)
        .where(*period, percent.is_not(None))
        .group_by(minute, percent)
    ):
        tally = minutes.get(m)
        if tally is None:
            tally = minutes[m] = _tally()
        tally[_at_percent(p)] += k
    nodes: dict[str, list[int]] = {}  # [unread, p0, ..., p100]
    for node, p, k in connection.execute(
        sa.select(t.c.node, percent, count).where(*period).group_by(t.c.node, percent)
    ):
        tally = nodes.setdefault(node, [0, *_tally()])
        tally[0 if p is None else 1 + _at_percent(p)] += k
    tenants: dict[str, list[int]] = {}
    for tenant, p, k in connection.execute(
        sa.select(t.c.tenant, percent, count)
        .where(*period, percent.is_not(None), t.c.tenant.is_not(None))
        .group_by(t.c.tenant, percent)
    ):
        tenants.setdefault(tenant, _tally())[_at_percent(p)] += k
    return GpuSampleCounts(
        tuple((_utc(m), tuple(c)) for m, c in minutes.items()),
        tuple((node, tuple(c[1:]), c[0]) for node, c in nodes.items()),
        tuple((tenant, tuple(c)) for tenant, c in tenants.items()),
    )


def _minute(connection: sa.Connection, at: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """The UTC minute an instant falls in. SQLite keeps instants as UTC text
    ('YYYY-MM-DD HH:MM:SS.ffffff'), so the minute is its first 16 characters."""
    if connection.dialect.name == "postgresql":
        return sa.func.date_trunc("minute", at)
    return sa.func.substr(at, 1, 16)


def _utc(value: datetime | str) -> datetime:
    """An instant as the driver returns it: UTC text from SQLite, an aware datetime from
    PostgreSQL."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _latest_nodes(connection: sa.Connection, at: datetime | None) -> list[SchedulerNode]:
    """Each node's last change at or before `at` (None: the last of all), leaving out nodes
    whose last change is their removal.

    One query whose cost grows with the number of nodes, not with weeks of history: a
    recursive CTE hops through the distinct node names on the (node, at, id) index (a
    loose index scan, which neither database does by itself), then one index probe per
    node finds its last change. DISTINCT ON or a window function would sort every row."""
    t = node_states_table
    later = t.alias("later")
    names = sa.select(sa.func.min(t.c.node).label("node")).cte("names", recursive=True)
    names = names.union_all(
        sa.select(
            sa.select(sa.func.min(later.c.node))
            .where(later.c.node > names.c.node)
            .scalar_subquery()
        ).where(names.c.node.is_not(None))
    )
    change = t.alias("change")
    last_change = (
        sa.select(change.c.id)
        .where(change.c.node == names.c.node)
        .order_by(change.c.at.desc(), change.c.id.desc())
        .limit(1)
    )
    if at is not None:
        last_change = last_change.where(change.c.at <= at)
    last_ids = sa.select(last_change.scalar_subquery()).select_from(names)
    query = sa.select(t).where(t.c.id.in_(last_ids), sa.not_(t.c.removed)).order_by(t.c.node)
    return [_node(row) for row in connection.execute(query)]


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


def _run_row(run: ProbeRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "probe": run.probe,
        "tenant": run.tenant,
        "queue": run.queue,
        "window": run.window,
        "expectation": run.expectation.value,
        "gpus": run.gpus,
        "nodes": run.nodes,
        "state": run.state.value,
        "job_id": run.job_id,
        "submitted_at": run.submitted_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "outcome": None if run.outcome is None else run.outcome.value,
        "exit_code": run.exit_code,
        "reason": run.reason,
        "message": run.message,
        "pending_reasons": dict(run.pending_reasons),
        "node_names": list(run.node_names),
    }


def _run(row: sa.Row[Any]) -> ProbeRun:
    return ProbeRun(
        run_id=row.run_id,
        probe=row.probe,
        tenant=row.tenant,
        queue=row.queue,
        window=row.window,
        expectation=Expectation(row.expectation),
        gpus=row.gpus,
        nodes=row.nodes,
        state=RunState(row.state),
        job_id=row.job_id,
        submitted_at=row.submitted_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        outcome=None if row.outcome is None else Outcome(row.outcome),
        exit_code=row.exit_code,
        reason=row.reason,
        message=row.message,
        pending_reasons=row.pending_reasons,
        node_names=tuple(row.node_names),
    )


def _queue_row(at: datetime, queue: QueueState) -> dict[str, Any]:
    return {
        "at": at,
        "tenant": queue.tenant,
        "queue": queue.queue,
        "pending_jobs": queue.pending_jobs,
        "pending_gpus": queue.pending_gpus,
        "running_jobs": queue.running_jobs,
        "running_gpus": queue.running_gpus,
        "longest_wait_seconds": queue.longest_wait_seconds,
        "pending_reasons": dict(queue.pending_reasons),
    }


def _queue(row: sa.Row[Any]) -> QueueState:
    return QueueState(
        tenant=row.tenant,
        queue=row.queue,
        pending_jobs=row.pending_jobs,
        pending_gpus=row.pending_gpus,
        running_jobs=row.running_jobs,
        running_gpus=row.running_gpus,
        longest_wait_seconds=row.longest_wait_seconds,
        pending_reasons=row.pending_reasons,
    )


def _node_row(change: StoredNodeChange) -> dict[str, Any]:
    node = change.node
    return {
        "at": change.at,
        "node": node.name,
        "pool": node.pool,
        "gpus_total": node.gpus_total,
        "gpus_allocated": node.gpus_allocated,
        "state": node.state,
        "reason": node.reason,
        "removed": change.removed,
    }


def _node(row: sa.Row[Any]) -> SchedulerNode:
    return SchedulerNode(
        name=row.node,
        pool=row.pool,
        gpus_total=row.gpus_total,
        gpus_allocated=row.gpus_allocated,
        state=row.state,
        reason=row.reason,
    )


def _alert_row(alert: StoredAlert) -> dict[str, Any]:
    return {
        "fingerprint": alert.fingerprint,
        "name": alert.name,
        "severity": alert.severity,
        "starts_at": alert.starts_at,
        "ends_at": alert.ends_at,
        "last_seen_at": alert.last_seen_at,
        "labels": dict(alert.labels),
        "summary": alert.summary,
    }


def _alert(row: sa.Row[Any]) -> StoredAlert:
    return StoredAlert(
        fingerprint=row.fingerprint,
        name=row.name,
        severity=row.severity,
        starts_at=row.starts_at,
        ends_at=row.ends_at,
        last_seen_at=row.last_seen_at,
        labels=row.labels,
        summary=row.summary,
    )


def _intervention_row(intervention: StoredIntervention) -> dict[str, Any]:
    return {
        "at": intervention.at,
        "by": intervention.by,
        "reason": intervention.reason,
        "subject": dict(intervention.subject),
        "source": intervention.source.value,
        "detail": dict(intervention.detail),
    }


def _intervention(row: sa.Row[Any]) -> StoredIntervention:
    return StoredIntervention(
        at=row.at,
        by=row.by,
        reason=row.reason,
        subject=row.subject,
        source=InterventionSource(row.source),
        detail=row.detail,
    )
