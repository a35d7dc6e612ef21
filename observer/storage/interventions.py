"""Manual interventions on the platform, recorded by a person or detected, in and out of the
interventions table."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from observer.records import StoredIntervention
from observer.storage.database import Repository
from observer.storage.mapping import RowMapping
from observer.storage.tables import interventions_table

_INTERVENTION = RowMapping(StoredIntervention, interventions_table)


class InterventionsRepository(Repository):
    def add_intervention(self, intervention: StoredIntervention) -> None:
        with self._errors("saving an intervention"), self._engine.begin() as connection:
            connection.execute(sa.insert(interventions_table), [_INTERVENTION.row(intervention)])

    def add_detected_intervention(self, intervention: StoredIntervention) -> bool:
        """Store a detected intervention unless the same one (at, by, subject, reason) is
        stored already, as a period read again after a restart or a retry finds it again;
        whether it was new."""
        t = interventions_table
        query = _INTERVENTION.select().where(
            t.c.at == intervention.at, t.c.by == intervention.by, t.c.reason == intervention.reason
        )
        with self._errors("saving an intervention"), self._engine.begin() as connection:
            same = [_INTERVENTION.value(row) for row in connection.execute(query)]
            if any(dict(i.subject) == dict(intervention.subject) for i in same):
                return False
            connection.execute(sa.insert(interventions_table), [_INTERVENTION.row(intervention)])
        return True

    def interventions(self, since: datetime, until: datetime) -> list[StoredIntervention]:
        """Interventions at [since, until), in the order they happened."""
        t = interventions_table
        query = _INTERVENTION.select().where(t.c.at >= since, t.c.at < until)
        query = query.order_by(t.c.at, t.c.id)
        with self._reading("reading interventions") as connection:
            return [_INTERVENTION.value(row) for row in connection.execute(query)]
