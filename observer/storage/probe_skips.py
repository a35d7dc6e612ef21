"""The probe launches the controller skipped, in and out of the probe_skips table."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa

from observer.records import ProbeSkip
from observer.storage.database import Repository
from observer.storage.mapping import RowMapping
from observer.storage.tables import probe_skips_table

_SKIP = RowMapping(ProbeSkip, probe_skips_table)


class ProbeSkipsRepository(Repository):
    def add_probe_skips(self, skips: Iterable[ProbeSkip]) -> None:
        rows = [_SKIP.row(skip) for skip in skips]
        if not rows:
            return
        with self._errors("saving probe skips"), self._engine.begin() as connection:
            connection.execute(sa.insert(probe_skips_table), rows)

    def probe_skips(self, since: datetime, until: datetime) -> list[ProbeSkip]:
        """The skips at [since, until), in the order they happened."""
        t = probe_skips_table
        query = _SKIP.select().where(t.c.at >= since, t.c.at < until).order_by(t.c.at, t.c.id)
        with self._reading("reading probe skips") as connection:
            return [_SKIP.value(row) for row in connection.execute(query)]
