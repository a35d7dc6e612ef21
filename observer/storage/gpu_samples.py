"""GPU samples and their rollups: each batch of samples is stored and added, in the same
transaction, to per-minute, per-node-hour and per-tenant-and-task-hour counts, which reports
read instead of a day of samples. Each measure (utilisation, GPM's SM activity) has its own
three tables, counted alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from observer.records import (
    TASK_NOT_KNOWN,
    UTILIZATION_PERCENTS,
    GpuMeasure,
    GpuSampleCounts,
    GpuUsageCounts,
    RunGpuFigures,
    RunSpan,
    StoredGpuSample,
    TenantTaskCounts,
)
from observer.storage.database import Repository, upsert
from observer.storage.mapping import RowMapping, instant
from observer.storage.tables import (
    UtcDateTime,
    gpu_memory_hours_table,
    gpu_minutes_table,
    gpu_node_hours_table,
    gpu_samples_table,
    gpu_sm_minutes_table,
    gpu_sm_node_hours_table,
    gpu_sm_task_hours_table,
    gpu_task_hours_table,
    gpu_usage_hours_table,
)

_SAMPLE = RowMapping(StoredGpuSample, gpu_samples_table)
_PERCENTS = tuple(f"p{p}" for p in UTILIZATION_PERCENTS)
GIB = 1 << 30  # the memory counts' unit


@dataclass(frozen=True, slots=True)
class _Counted:
    """Where one measure is read from a sample and counted: its percent column, the column
    that marks a sample as unread when true (None: the percent being None does), and its
    three tables."""

    percent: str
    unread_when: str | None
    minutes: sa.Table
    node_hours: sa.Table
    task_hours: sa.Table

    def unread(self, row: Mapping[str, Any]) -> bool:
        if self.unread_when is None:
            return row[self.percent] is None
        return row[self.unread_when] is False

    def unread_sql(self) -> sa.ColumnElement[bool]:
        t = gpu_samples_table
        if self.unread_when is None:
            return t.c[self.percent].is_(None)
        return t.c[self.unread_when].is_(False)


_MEASURES = {
    GpuMeasure.UTILIZATION: _Counted(
        "utilization_gpu_percent",
        None,
        gpu_minutes_table,
        gpu_node_hours_table,
        gpu_task_hours_table,
    ),
    # A sample of a GPU with GPM that was not read (its first tick) is neither counted nor
    # unread: only a GPU that said it has no GPM is.
    GpuMeasure.SM_ACTIVE: _Counted(
        "sm_active_percent",
        "gpm_supported",
        gpu_sm_minutes_table,
        gpu_sm_node_hours_table,
        gpu_sm_task_hours_table,
    ),
}


class GpuSamplesRepository(Repository):
    def add_gpu_samples(self, samples: Iterable[StoredGpuSample]) -> int:
        """Insert samples, and add them to the counts reports read, in one transaction;
        returns how many."""
        rows = [_SAMPLE.row(s) for s in samples]
        if rows:
            with self._errors("saving GPU samples"), self._engine.begin() as connection:
                connection.execute(sa.insert(gpu_samples_table), rows)
                for measure in _MEASURES.values():
                    _add_counts(connection, rows, measure)
                _add_usage_counts(connection, rows)
        return len(rows)

    def gpu_samples(
        self, node: str | None, since: datetime, until: datetime
    ) -> list[StoredGpuSample]:
        """Samples taken in [since, until), of one node or all (None), ordered by node, GPU
        and time."""
        t = gpu_samples_table
        query = (
            _SAMPLE.select()
            .where(t.c.at >= since, t.c.at < until)
            .order_by(t.c.node, t.c.gpu_uuid, t.c.at, t.c.id)
        )
        if node is not None:
            query = query.where(t.c.node == node)
        with self._reading("reading GPU samples") as connection:
            return [_SAMPLE.value(row) for row in connection.execute(query)]

    def gpu_sample_counts(
        self, since: datetime, until: datetime, measure: GpuMeasure = GpuMeasure.UTILIZATION
    ) -> GpuSampleCounts:
        """Samples taken in [since, until), counted: a day of a large fleet is millions of
        samples, and a report needs only how many read each percent of `measure`, where and
        when.
        The whole UTC hours of the period come from the counts kept as samples are stored,
        the rest (less than an hour at either end) is counted from the samples."""
        first, last = _hour_after(since), hour_of(until)
        counted = _MEASURES[measure]
        with self._reading("counting GPU samples") as connection:
            if first >= last:
                return _count_samples(connection, since, until, counted)
            parts = (
                _count_samples(connection, since, first, counted),
                _read_counts(connection, first, last, counted),
                _count_samples(connection, last, until, counted),
            )
        return GpuSampleCounts(
            tuple(m for part in parts for m in part.by_minute),
            tuple(n for part in parts for n in part.by_node),
            tuple(t for part in parts for t in part.by_tenant_task),
        )

    def gpu_task_counts(
        self, since: datetime, until: datetime, measure: GpuMeasure = GpuMeasure.UTILIZATION
    ) -> TenantTaskCounts:
        """The samples of [since, until) attributed to a tenant, counted by tenant and task
        as gpu_sample_counts counts them (whole UTC hours from the counts, the ends from the
        samples): a window's, which may begin and end inside an hour."""
        first, last = _hour_after(since), hour_of(until)
        counted = _MEASURES[measure]
        with self._reading("counting GPU samples") as connection:
            if first >= last:
                return _count_tasks(connection, since, until, counted)
            return (
                _count_tasks(connection, since, first, counted)
                + _read_tasks(connection, first, last, counted)
                + _count_tasks(connection, last, until, counted)
            )

    def run_gpu_figures(self, spans: Sequence[RunSpan]) -> dict[str, RunGpuFigures]:
        """Each span's GPU samples reduced in the database, in one statement for every run of
        a period: the samples on one of its nodes in [start, end) whose tenant and task are
        the run's. A run without such samples is left out. Two runs of one probe and tenant
        on one node at once share their samples: the samples name no run."""
        rows = [(s.run_id, s.tenant, s.task, n, s.start, s.end) for s in spans for n in s.nodes]
        if not rows:
            return {}
        span = (
            sa.values(
                sa.column("run_id", sa.String),
                sa.column("tenant", sa.String),
                sa.column("task", sa.String),
                sa.column("node", sa.String),
                sa.column("start", UtcDateTime),
                sa.column("until", UtcDateTime),
                name="spans",
            )
            .data(rows)
            .cte()
        )
        t = gpu_samples_table
        percent = t.c.utilization_gpu_percent
        query = (
            sa.select(
                span.c.run_id,
                sa.func.count(),
                sa.func.count(sa.distinct(t.c.gpu_uuid)),
                sa.func.avg(percent),
                sa.func.max(percent),
                sa.func.max(t.c.memory_used_bytes),
            )
            .select_from(span)
            .join(
                t,
                sa.and_(
                    t.c.node == span.c.node,
                    t.c.at >= span.c.start,
                    t.c.at < span.c.until,
                    t.c.tenant == span.c.tenant,
                    t.c.task == span.c.task,
                ),
            )
            # The period all spans lie in, which the index on `at` narrows the samples to.
            .where(t.c.at >= min(s.start for s in spans), t.c.at < max(s.end for s in spans))
            .group_by(span.c.run_id)
        )
        with self._reading("reducing GPU samples per run") as connection:
            return {
                run_id: RunGpuFigures(
                    run_id,
                    samples,
                    gpus,
                    None if mean is None else float(mean),
                    top,
                    None if memory is None else int(memory),
                )
                for run_id, samples, gpus, mean, top, memory in connection.execute(query)
            }

    def gpu_usage_counts(self, since: datetime, until: datetime) -> GpuUsageCounts:
        """The samples of [since, until) attributed to a tenant, counted per node, tenant and
        task type, and their memory per tenant (whole hours from the counts, the ends from
        the samples, as gpu_sample_counts)."""
        first, last = _hour_after(since), hour_of(until)
        with self._reading("counting GPU usage") as connection:
            if first >= last:
                return _count_usage(connection, since, until)
            parts = (
                _count_usage(connection, since, first),
                _read_usage(connection, first, last),
                _count_usage(connection, last, until),
            )
        return GpuUsageCounts(
            tuple(row for part in parts for row in part.usage),
            tuple(row for part in parts for row in part.memory),
        )


def hour_of(at: datetime) -> datetime:
    """The UTC hour `at` is in: the hours the counts are kept by."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_after(at: datetime) -> datetime:
    """The first whole UTC hour at or after `at`."""
    hour = hour_of(at)
    return hour if hour == at else hour + timedelta(hours=1)


def _tally() -> list[int]:
    return [0] * len(UTILIZATION_PERCENTS)


def _at_percent(percent: int) -> int:
    return min(max(percent, UTILIZATION_PERCENTS[0]), UTILIZATION_PERCENTS[-1])


def _add_counts(
    connection: sa.Connection, rows: Sequence[Mapping[str, Any]], counted: _Counted
) -> None:
    """Add sample rows to the per-minute, per-node-hour and per-tenant-and-task-hour counts
    of one measure."""
    minutes: dict[datetime, list[int]] = {}
    nodes: dict[tuple[datetime, str], list[int]] = {}  # [unread, p0, ..., p100]
    tasks: dict[tuple[datetime, str, str], list[int]] = {}
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
        if counted.unread(row):
            node[0] += 1
            continue
        if row[counted.percent] is None:
            continue
        percent = _at_percent(row[counted.percent])
        node[1 + percent] += 1
        tally = minutes.get(minute)
        if tally is None:
            tally = minutes[minute] = _tally()
        tally[percent] += 1
        if row["tenant"] is not None:
            key = (hour, row["tenant"], row["task"] or TASK_NOT_KNOWN)
            tally = tasks.get(key)
            if tally is None:
                tally = tasks[key] = _tally()
            tally[percent] += 1
    _add_to(
        connection,
        counted.minutes,
        [{"minute": m, **dict(zip(_PERCENTS, t, strict=True))} for m, t in minutes.items()],
    )
    _add_to(
        connection,
        counted.node_hours,
        [
            {"hour": h, "node": n, "unread": t[0], **dict(zip(_PERCENTS, t[1:], strict=True))}
            for (h, n), t in nodes.items()
        ],
    )
    _add_to(
        connection,
        counted.task_hours,
        [
            {"hour": h, "tenant": n, "task": k, **dict(zip(_PERCENTS, t, strict=True))}
            for (h, n, k), t in tasks.items()
        ],
    )


def _add_usage_counts(connection: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Add the samples attributed to a tenant to the per-hour usage and memory counts (who
    used what), once per sample whatever the measures counted."""
    usage: dict[tuple[datetime, str, str, str], list[int]] = {}  # [samples, busy, idle]
    memory: dict[tuple[datetime, str, int], int] = {}
    hours: dict[datetime, datetime] = {}  # a node's GPUs share their instant
    for row in rows:
        if row["tenant"] is not None:
            at = row["at"]
            hour = hours.get(at)
            if hour is None:
                hour = hours[at] = at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
            _add_usage(usage, memory, hour, row)
    _add_to(
        connection,
        gpu_usage_hours_table,
        [
            {
                "hour": h,
                "node": n,
                "tenant": t,
                "task_type": k,
                "samples": c[0],
                "busy_percent": c[1],
                "idle_samples": c[2],
            }
            for (h, n, t, k), c in usage.items()
        ],
    )
    _add_to(
        connection,
        gpu_memory_hours_table,
        [{"hour": h, "tenant": t, "gib": g, "samples": c} for (h, t, g), c in memory.items()],
    )


def _add_usage(
    usage: dict[tuple[datetime, str, str, str], list[int]],
    memory: dict[tuple[datetime, str, int], int],
    hour: datetime,
    row: Mapping[str, Any],
) -> None:
    """Count one attributed sample row: held (even unread), its utilisation, idle at 0 %, and
    its memory in whole GiB."""
    key = (hour, row["node"], row["tenant"], row["task_type"] or TASK_NOT_KNOWN)
    tally = usage.get(key)
    if tally is None:
        tally = usage[key] = [0, 0, 0]
    tally[0] += 1
    if (percent := row["utilization_gpu_percent"]) is not None:
        tally[1] += _at_percent(percent)
        tally[2] += percent <= 0
    if (used := row["memory_used_bytes"]) is not None:
        gib = (hour, row["tenant"], max(used, 0) // GIB)
        memory[gib] = memory.get(gib, 0) + 1


def _add_to(connection: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Insert count rows, adding to the counts of rows already there (same key)."""
    if rows:
        keys = tuple(c.name for c in table.c if c.primary_key)
        counts = tuple(c.name for c in table.c if not c.primary_key)
        connection.execute(upsert(connection.dialect.name, table, keys, add=counts), rows)


def _read_counts(
    connection: sa.Connection, since: datetime, until: datetime, counted: _Counted
) -> GpuSampleCounts:
    """The counts kept as samples were stored, of the whole UTC hours [since, until)."""
    m, n = counted.minutes, counted.node_hours

    minutes = connection.execute(
        sa.select(m).where(m.c.minute >= since, m.c.minute < until).order_by(m.c.minute)
    )
    nodes = connection.execute(
        sa.select(n.c.node, sa.func.sum(n.c.unread), *_sums(n))
        .where(n.c.hour >= since, n.c.hour < until)
        .group_by(n.c.node)
        .order_by(n.c.node)
    )
    return GpuSampleCounts(
        tuple((row[0], tuple(row[1:])) for row in minutes),
        tuple((row[0], tuple(row[2:]), row[1]) for row in nodes),
        _read_tasks(connection, since, until, counted),
    )


def _read_tasks(
    connection: sa.Connection, since: datetime, until: datetime, counted: _Counted
) -> TenantTaskCounts:
    """The per-tenant-and-task counts kept as samples were stored, of the whole UTC hours
    [since, until)."""
    t = counted.task_hours
    rows = connection.execute(
        sa.select(t.c.tenant, t.c.task, *_sums(t))
        .where(t.c.hour >= since, t.c.hour < until)
        .group_by(t.c.tenant, t.c.task)
        .order_by(t.c.tenant, t.c.task)
    )
    return tuple((row[0], row[1], tuple(row[2:])) for row in rows)


def _sums(table: sa.Table) -> list[sa.ColumnElement[Any]]:
    return [sa.func.sum(table.c[p]) for p in _PERCENTS]


def _count_samples(
    connection: sa.Connection, since: datetime, until: datetime, counted: _Counted
) -> GpuSampleCounts:
    """Samples taken in [since, until) counted from the samples themselves."""
    t = gpu_samples_table
    percent = t.c[counted.percent]
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
    unread = counted.unread_sql()  # no bound parameter: PostgreSQL groups by it as selected
    for node, p, u, k in connection.execute(
        sa.select(t.c.node, percent, unread, count)
        .where(*period)
        .group_by(t.c.node, percent, unread)
    ):
        tally = nodes.setdefault(node, [0, *_tally()])
        if u:
            tally[0] += k
        elif p is not None:
            tally[1 + _at_percent(p)] += k
    return GpuSampleCounts(
        tuple((instant(m), tuple(c)) for m, c in minutes.items()),
        tuple((node, tuple(c[1:]), c[0]) for node, c in nodes.items()),
        _count_tasks(connection, since, until, counted),
    )


def _count_tasks(
    connection: sa.Connection, since: datetime, until: datetime, counted: _Counted
) -> TenantTaskCounts:
    """Samples taken in [since, until) attributed to a tenant, counted by tenant and task
    from the samples themselves."""
    t = gpu_samples_table
    percent = t.c[counted.percent]
    task = sa.func.coalesce(t.c.task, TASK_NOT_KNOWN)
    tasks: dict[tuple[str, str], list[int]] = {}
    for tenant, k, p, n in connection.execute(
        sa.select(t.c.tenant, task, percent, sa.func.count())
        .where(t.c.at >= since, t.c.at < until, percent.is_not(None), t.c.tenant.is_not(None))
        .group_by(t.c.tenant, task, percent)
    ):
        tasks.setdefault((tenant, k), _tally())[_at_percent(p)] += n
    return tuple((tenant, k, tuple(c)) for (tenant, k), c in tasks.items())


def _minute(connection: sa.Connection, at: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """The UTC minute an instant falls in. SQLite keeps instants as UTC text
    ('YYYY-MM-DD HH:MM:SS.ffffff'), so the minute is its first 16 characters."""
    if connection.dialect.name == "postgresql":
        return sa.func.date_trunc("minute", at)
    return sa.func.substr(at, 1, 16)


def _read_usage(connection: sa.Connection, since: datetime, until: datetime) -> GpuUsageCounts:
    """The usage and memory counts kept as samples were stored, of the whole UTC hours
    [since, until)."""
    u, m = gpu_usage_hours_table, gpu_memory_hours_table
    usage = connection.execute(
        sa.select(
            u.c.node,
            u.c.tenant,
            u.c.task_type,
            sa.func.sum(u.c.samples),
            sa.func.sum(u.c.busy_percent),
            sa.func.sum(u.c.idle_samples),
        )
        .where(u.c.hour >= since, u.c.hour < until)
        .group_by(u.c.node, u.c.tenant, u.c.task_type)
    )
    memory = connection.execute(
        sa.select(m.c.tenant, m.c.gib, sa.func.sum(m.c.samples))
        .where(m.c.hour >= since, m.c.hour < until)
        .group_by(m.c.tenant, m.c.gib)
    )
    return GpuUsageCounts(
        tuple((n, t, k, int(s), int(b), int(i)) for n, t, k, s, b, i in usage),
        tuple((t, int(g), int(s)) for t, g, s in memory),
    )


def _count_usage(connection: sa.Connection, since: datetime, until: datetime) -> GpuUsageCounts:
    """The samples of [since, until) attributed to a tenant, counted as _add_usage counts
    them, from the samples themselves."""
    t = gpu_samples_table
    percent = t.c.utilization_gpu_percent
    attributed = (t.c.at >= since, t.c.at < until, t.c.tenant.is_not(None))
    task_type = sa.func.coalesce(t.c.task_type, TASK_NOT_KNOWN)
    read = sa.case((percent > 100, 100), (percent < 0, 0), else_=percent)
    usage = connection.execute(
        sa.select(
            t.c.node,
            t.c.tenant,
            task_type,
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(read), 0),
            sa.func.count(sa.case((percent <= 0, 1))),
        )
        .where(*attributed)
        .group_by(t.c.node, t.c.tenant, task_type)
    )
    used = sa.case((t.c.memory_used_bytes < 0, 0), else_=t.c.memory_used_bytes)
    gib = sa.cast(used, sa.BigInteger) // GIB
    memory = connection.execute(
        sa.select(t.c.tenant, gib, sa.func.count())
        .where(*attributed, t.c.memory_used_bytes.is_not(None))
        .group_by(t.c.tenant, gib)
    )
    return GpuUsageCounts(
        tuple((n, te, k, int(s), int(b), int(i)) for n, te, k, s, b, i in usage),
        tuple((te, int(g), int(s)) for te, g, s in memory),
    )
