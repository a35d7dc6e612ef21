"""Scheduler snapshots as the store keeps them: queue samples, the nodes as a change log
(a row when a node appears, changes or leaves) from which any instant's nodes are read, the
tenants' own jobs' time pending by reason, added up snapshot by snapshot, and the platform's
estimates of waiting jobs' starts (a row when a job first gets one, completed when it starts)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from observer.domain import QueueState, SchedulerNode, SchedulerSnapshot
from observer.records import JobEstimate, PendingTime, StoredNodeChange, StoredQueueSample
from observer.storage.database import Repository, upsert
from observer.storage.mapping import RowMapping, instant
from observer.storage.tables import (
    job_estimates_table,
    job_pending_table,
    node_states_table,
    queue_samples_table,
)

# The stored records nest these domain types: their rows are the nested type's columns
# with the record's own (at, removed) beside them.
_QUEUE = RowMapping(QueueState, queue_samples_table)
_NODE = RowMapping(SchedulerNode, node_states_table, columns={"name": "node"})
_PENDING = RowMapping(PendingTime, job_pending_table)
_ESTIMATE = RowMapping(JobEstimate, job_estimates_table)


class SchedulerStateRepository(Repository):
    # Each node's last stored state, so unchanged nodes are not written again; read from
    # the database on the first snapshot (None until then).
    _last_nodes: dict[str, SchedulerNode] | None = None

    def save_scheduler_snapshot(
        self,
        snapshot: SchedulerSnapshot,
        pending: Sequence[PendingTime] = (),
        estimates: Sequence[JobEstimate] = (),
    ) -> None:
        """Store the snapshot's queues, and its nodes as changes: a row for each node that
        is new or differs from its last stored state, and one for each node that is no
        longer in the snapshot; add `pending` (the time since the snapshot before) to what
        each slot, tenant and reason has; save `estimates` (save_job_estimates). Jobs are not
        stored otherwise (probe runs are). One transaction."""
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
                queue_rows = [{"at": snapshot.at, **_QUEUE.row(queue)} for queue in snapshot.queues]
                connection.execute(sa.insert(queue_samples_table), queue_rows)
            if changes:
                node_rows = [
                    {"at": change.at, "removed": change.removed, **_NODE.row(change.node)}
                    for change in changes
                ]
                connection.execute(sa.insert(node_states_table), node_rows)
            if pending:
                keys = ("slot", "tenant", "reason")
                added = upsert(connection.dialect.name, job_pending_table, keys, add=("seconds",))
                connection.execute(added, [_PENDING.row(p) for p in pending])
            if estimates:
                _save_estimates(connection, estimates)
        # Only once committed: a failed write is written again with the next snapshot.
        self._last_nodes = current

    def queue_samples(
        self, since: datetime, until: datetime, tenant: str | None = None
    ) -> list[StoredQueueSample]:
        """Queue samples taken in [since, until), of one tenant or all, in the order they
        were stored."""
        t = queue_samples_table
        query = _QUEUE.select(t.c.at).where(t.c.at >= since, t.c.at < until)
        query = query.order_by(t.c.at, t.c.id)
        if tenant is not None:
            query = query.where(t.c.tenant == tenant)
        with self._reading("reading queue samples") as connection:
            return [
                StoredQueueSample(row.at, _QUEUE.value(row)) for row in connection.execute(query)
            ]

    def pending_times(self, since: datetime, until: datetime) -> list[PendingTime]:
        """The tenants' own jobs' time pending in the slots starting in [since, until), by
        slot, tenant and reason."""
        t = job_pending_table
        query = _PENDING.select().where(t.c.slot >= since, t.c.slot < until)
        query = query.order_by(t.c.slot, t.c.tenant, t.c.reason)
        with self._reading("reading pending times") as connection:
            return [_PENDING.value(row) for row in connection.execute(query)]

    def save_job_estimates(self, estimates: Sequence[JobEstimate]) -> None:
        """Record jobs' first estimates and their starts, as save_scheduler_snapshot does."""
        with self._errors("saving job estimates"), self._engine.begin() as connection:
            _save_estimates(connection, estimates)

    def job_estimates(self, since: datetime, until: datetime) -> list[JobEstimate]:
        """The jobs seen waiting that started in [since, until), by start and job id."""
        t = job_estimates_table
        query = _ESTIMATE.select().where(t.c.started_at >= since, t.c.started_at < until)
        query = query.order_by(t.c.started_at, t.c.job_id)
        with self._reading("reading job estimates") as connection:
            return [_ESTIMATE.value(row) for row in connection.execute(query)]

    def node_states(self, at: datetime) -> list[SchedulerNode]:
        """Every node known at `at` as it was then (its last change at or before `at`),
        ordered by name; nodes that had left the snapshots by then are left out."""
        with self._reading("reading node states") as connection:
            return _latest_nodes(connection, at)

    def first_pools(self, since: datetime, until: datetime) -> dict[str, str | None]:
        """Each node's pool in its first change in [since, until): the pool of a node that
        left during a period, without reading the period's whole change log."""
        # As _latest_nodes: one index probe per node, not a sort of the period's changes.
        t = node_states_table
        names = _node_names()
        change = t.alias("change")
        first_change = (
            sa.select(change.c.id)
            .where(change.c.node == names.c.node, change.c.at >= since, change.c.at < until)
            .order_by(change.c.at, change.c.id)
            .limit(1)
        )
        first_ids = sa.select(first_change.scalar_subquery()).select_from(names)
        query = sa.select(t.c.node, t.c.pool).where(t.c.id.in_(first_ids))
        with self._reading("reading node pools") as connection:
            return {node: pool for node, pool in connection.execute(query)}

    def node_changes(
        self, since: datetime, until: datetime, node: str | None = None
    ) -> list[StoredNodeChange]:
        """Node changes in [since, until), of one node or all, in the order they happened."""
        t = node_states_table
        # Plain tuples, unpacked in place: a week of a busy 1,000-node cluster is a million
        # changes, and named-row access cost more than the query. Instants come as the
        # driver gives them and are converted once each: a snapshot's changes share one.
        query = _NODE.select(t.c.removed, sa.type_coerce(t.c.at, sa.types.NullType()))
        query = query.where(t.c.at >= since, t.c.at < until).order_by(t.c.at, t.c.id)
        if node is not None:
            query = query.where(t.c.node == node)
        instants: dict[datetime | str, datetime] = {}
        # A node goes back and forth between a few states: each is built once.
        states: dict[tuple[Any, ...], SchedulerNode] = {}
        with self._reading("reading node changes") as connection:
            return [
                StoredNodeChange(
                    instants.get(row[-1]) or instants.setdefault(row[-1], instant(row[-1])),
                    states.get(state := row[:-2]) or states.setdefault(state, _NODE.value(state)),
                    row[-2],
                )
                # All at once: row by row, the driver's fetch cost more than the query.
                for row in connection.execute(query).fetchall()
            ]


def _node_names() -> sa.CTE:
    """Every node name in the change log, hopping from one to the next on the (node, at, id)
    index."""
    t = node_states_table
    later = t.alias("later")
    names = sa.select(sa.func.min(t.c.node).label("node")).cte("names", recursive=True)
    return names.union_all(
        sa.select(
            sa.select(sa.func.min(later.c.node))
            .where(later.c.node > names.c.node)
            .scalar_subquery()
        ).where(names.c.node.is_not(None))
    )


def _latest_nodes(connection: sa.Connection, at: datetime | None) -> list[SchedulerNode]:
    """Each node's last change at or before `at` (None: the last of all), leaving out nodes
    whose last change is their removal.

    One query whose cost grows with the number of nodes, not with weeks of history: a
    recursive CTE hops through the distinct node names on the (node, at, id) index (a
    loose index scan, which neither database does by itself), then one index probe per
    node finds its last change. DISTINCT ON or a window function would sort every row."""
    t = node_states_table
    names = _node_names()
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
    query = _NODE.select().where(t.c.id.in_(last_ids), sa.not_(t.c.removed)).order_by(t.c.node)
    return [_NODE.value(row) for row in connection.execute(query)]


def _save_estimates(connection: sa.Connection, estimates: Sequence[JobEstimate]) -> None:
    """A job's row is written when it first gets an estimate and when it starts: the first
    estimate and start already stored stay (a restarted controller sees the job anew), a
    start without a last estimate (none seen since that restart) keeps the stored one."""
    t = job_estimates_table
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(t)
    statement = insert.on_conflict_do_update(
        index_elements=[t.c.job_id],
        set_={
            "last_expected_start_at": sa.func.coalesce(
                insert.excluded.last_expected_start_at, t.c.last_expected_start_at
            ),
            "started_at": sa.func.coalesce(t.c.started_at, insert.excluded.started_at),
        },
    )
    # One statement must not touch a row twice: the job's latest record wins.
    rows = {e.job_id: _ESTIMATE.row(e) for e in estimates}
    connection.execute(statement, list(rows.values()))
