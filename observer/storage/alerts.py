"""Alertmanager firings in and out of the alerts table: a firing is saved again each time it
is polled, and updated in place."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from observer.records import StoredAlert
from observer.storage.database import Repository, upsert
from observer.storage.mapping import RowMapping
from observer.storage.tables import alerts_table

_ALERT = RowMapping(StoredAlert, alerts_table)


class AlertsRepository(Repository):
    def save_alerts(self, alerts: Iterable[StoredAlert]) -> None:
        """Insert new firings and update known ones (same fingerprint and starts_at): their
        end, last sighting, labels, severity and summary. One transaction."""
        rows = {(a.fingerprint, a.starts_at): _ALERT.row(a) for a in alerts}
        if not rows:
            return
        with self._errors("saving alerts"), self._engine.begin() as connection:
            upsert_alerts = upsert(
                connection.dialect.name,
                alerts_table,
                ("fingerprint", "starts_at"),
                replace=("ends_at", "last_seen_at", "labels", "severity", "summary"),
            )
            connection.execute(upsert_alerts, list(rows.values()))

    def alerts(self, since: datetime, until: datetime) -> list[StoredAlert]:
        """Firings that started in [since, until), in the order they started."""
        t = alerts_table
        query = (
            _ALERT.select()
            .where(t.c.starts_at >= since, t.c.starts_at < until)
            .order_by(t.c.starts_at, t.c.fingerprint)
        )
        with self._reading("reading alerts") as connection:
            return [_ALERT.value(row) for row in connection.execute(query)]
