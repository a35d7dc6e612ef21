"""Probe runs in and out of the probe_runs table, and which finished runs still await their
log-loss check."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from observer.codec import attempt_from_json, attempt_to_json
from observer.domain import Attempt, ProbeRun, RunState
from observer.storage.database import Repository, upsert
from observer.storage.mapping import RowMapping
from observer.storage.tables import probe_runs_table


def _attempts_row(attempts: tuple[Attempt, ...]) -> list[dict[str, Any]]:
    return [attempt_to_json(a) for a in attempts]


def _attempts_value(rows: list[Mapping[str, Any]]) -> tuple[Attempt, ...]:
    return tuple(attempt_from_json(row) for row in rows)


_RUN = RowMapping(
    ProbeRun, probe_runs_table, convert={"attempts": (_attempts_row, _attempts_value)}
)
# Saving a known run overwrites every field. log_checked_at is not a run field: only
# mark_log_checked writes it.
_REPLACED = tuple(c.name for c in probe_runs_table.c if c.name not in ("run_id", "log_checked_at"))


class RunsRepository(Repository):
    def save_runs(self, runs: Iterable[ProbeRun]) -> None:
        """Insert new runs and overwrite known ones (same run_id) with every field. One
        transaction."""
        # The last version of a run wins; one statement must not touch a row twice.
        rows = {run.run_id: _RUN.row(run) for run in runs}
        if not rows:
            return
        with self._errors("saving probe runs"), self._engine.begin() as connection:
            upsert_runs = upsert(
                connection.dialect.name, probe_runs_table, ("run_id",), replace=_REPLACED
            )
            connection.execute(upsert_runs, list(rows.values()))

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
        query = _RUN.select().order_by(t.c.submitted_at.asc().nulls_last(), t.c.run_id)
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
        with self._reading("reading probe runs") as connection:
            return [_RUN.value(row) for row in connection.execute(query)]

    def first_submitted_at(self) -> datetime | None:
        """When the first run was submitted; None while none has been. One row read, not
        every run: the controller asks at each look for due reports."""
        t = probe_runs_table
        query = (
            sa.select(t.c.submitted_at)
            .where(t.c.submitted_at.is_not(None))
            .order_by(t.c.submitted_at)
            .limit(1)
        )
        with self._reading("reading the first probe run") as connection:
            first: datetime | None = connection.execute(query).scalar_one_or_none()
        return first

    def run(self, run_id: str) -> ProbeRun | None:
        query = _RUN.select().where(probe_runs_table.c.run_id == run_id)
        with self._reading("reading a probe run") as connection:
            row = connection.execute(query).one_or_none()
        return None if row is None else _RUN.value(row)

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
            _RUN.select()
            .where(
                t.c.probe.in_(probes),
                t.c.finished_at >= finished_since,
                t.c.log_checked_at.is_(None),
            )
            .order_by(t.c.finished_at, t.c.run_id)
        )
        with self._reading("reading runs to log-check") as connection:
            return [_RUN.value(row) for row in connection.execute(query)]
