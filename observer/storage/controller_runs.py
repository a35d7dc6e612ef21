"""The controller's own runs in and out of the controller_runs table: one row per process,
its start, its last sign of life and its clean stop."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from observer.records import ControllerRun
from observer.storage.database import Repository
from observer.storage.mapping import RowMapping
from observer.storage.tables import controller_runs_table

_RUN = RowMapping(ControllerRun, controller_runs_table)
# Written every alive interval: built once, executed with parameters.
_ALIVE = (
    sa.update(controller_runs_table)
    .where(controller_runs_table.c.id == sa.bindparam("run_id"))
    .values(last_alive_at=sa.bindparam("at"))
)


class ControllerRunsRepository(Repository):
    def start_controller_run(
        self, at: datetime, host: str, pid: int, watching: tuple[str, ...]
    ) -> ControllerRun:
        """Record a controller process starting at `at`, alive since, set up to read the
        sources `watching`."""
        t = controller_runs_table
        values = {
            "started_at": at,
            "last_alive_at": at,
            "host": host,
            "pid": pid,
            "watching": list(watching),
        }
        with self._errors("recording the controller's start"), self._engine.begin() as connection:
            run_id = connection.execute(sa.insert(t).values(values).returning(t.c.id)).scalar_one()
        return ControllerRun(run_id, at, at, host, pid, watching=watching)

    def controller_alive(self, run_id: int, at: datetime) -> None:
        with self._errors("recording the controller alive"), self._engine.begin() as connection:
            connection.execute(_ALIVE, {"run_id": run_id, "at": at})

    def controller_stopped(self, run_id: int, at: datetime) -> None:
        t = controller_runs_table
        query = sa.update(t).where(t.c.id == run_id).values(last_alive_at=at, stopped_at=at)
        with self._errors("recording the controller's stop"), self._engine.begin() as connection:
            connection.execute(query)

    def controller_runs(self, until: datetime | None = None) -> list[ControllerRun]:
        """The runs started before `until` (every run: None), in start order."""
        t = controller_runs_table
        query = _RUN.select().order_by(t.c.started_at, t.c.id)
        if until is not None:
            query = query.where(t.c.started_at < until)
        with self._reading("reading the controller's runs") as connection:
            return [_RUN.value(row) for row in connection.execute(query)]
