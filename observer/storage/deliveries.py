"""Report deliveries, one row per report handed to one channel, in and out of the
report_deliveries table."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa

from observer.records import StoredDelivery
from observer.storage.database import Repository
from observer.storage.mapping import RowMapping
from observer.storage.tables import report_deliveries_table

_DELIVERY = RowMapping(StoredDelivery, report_deliveries_table)


class DeliveriesRepository(Repository):
    def add_deliveries(self, deliveries: Iterable[StoredDelivery]) -> None:
        rows = [_DELIVERY.row(d) for d in deliveries]
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
        query = _DELIVERY.select().order_by(t.c.at, t.c.id)
        if report is not None:
            query = query.where(t.c.report == report)
        if since is not None:
            query = query.where(t.c.at >= since)
        if until is not None:
            query = query.where(t.c.at < until)
        with self._reading("reading report deliveries") as connection:
            return [_DELIVERY.value(row) for row in connection.execute(query)]
