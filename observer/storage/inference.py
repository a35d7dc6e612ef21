"""The inference probe's service, in and out of the inference_samples and inference_phases
tables."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa

from observer.records import InferencePhase, InferenceSample
from observer.storage.database import Repository, upsert
from observer.storage.mapping import RowMapping
from observer.storage.tables import inference_phases_table, inference_samples_table

_SAMPLE = RowMapping(InferenceSample, inference_samples_table)
_PHASE = RowMapping(InferencePhase, inference_phases_table)


class InferenceRepository(Repository):
    def add_inference_samples(self, samples: Iterable[InferenceSample]) -> None:
        rows = [_SAMPLE.row(sample) for sample in samples]
        if not rows:
            return
        with self._errors("saving inference samples"), self._engine.begin() as connection:
            connection.execute(sa.insert(inference_samples_table), rows)

    def inference_samples(self, since: datetime, until: datetime) -> list[InferenceSample]:
        """The looks taken at [since, until), in time order."""
        t = inference_samples_table
        query = _SAMPLE.select().where(t.c.at >= since, t.c.at < until).order_by(t.c.at, t.c.id)
        with self._reading("reading inference samples") as connection:
            return [_SAMPLE.value(row) for row in connection.execute(query)]

    def save_inference_phases(self, phases: Iterable[InferencePhase]) -> None:
        """An upsert by (service, kind, started_at): a phase saved twice is one row."""
        rows = [_PHASE.row(phase) for phase in phases]
        if not rows:
            return
        with self._errors("saving inference phases"), self._engine.begin() as connection:
            keys = ("service", "kind", "started_at")
            rest = tuple(c for c in rows[0] if c not in keys)
            statement = upsert(connection.dialect.name, inference_phases_table, keys, replace=rest)
            connection.execute(statement, rows)

    def inference_phases(self, since: datetime, until: datetime) -> list[InferencePhase]:
        """The phases that ended at [since, until), in the order they ended."""
        t = inference_phases_table
        query = (
            _PHASE.select()
            .where(t.c.ready_at >= since, t.c.ready_at < until)
            .order_by(t.c.ready_at, t.c.id)
        )
        with self._reading("reading inference phases") as connection:
            return [_PHASE.value(row) for row in connection.execute(query)]
