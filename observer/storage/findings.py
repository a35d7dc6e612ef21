"""Findings in and out of the findings table: saved as the condition tracker opens, updates
and closes them, read back by the reports and a restarted controller."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa

from observer.domain import Finding
from observer.storage.database import Repository, upsert
from observer.storage.mapping import RowMapping
from observer.storage.tables import findings_table

# key and node are written for lookups (key is the upsert's identity) and never read back.
_FINDING = RowMapping(
    Finding,
    findings_table,
    derived={"key": lambda f: f.key, "node": lambda f: f.subject.get("node")},
)


class FindingsRepository(Repository):
    def save_findings(self, findings: Iterable[Finding]) -> None:
        """Insert new findings and update known ones (same key and opened_at): their
        closed_at, evidence, severity and summary. One transaction."""
        # The last version of a finding wins; one statement must not touch a row twice.
        rows = {(f.key, f.opened_at): _FINDING.row(f) for f in findings}
        if not rows:
            return
        with self._errors("saving findings"), self._engine.begin() as connection:
            upsert_findings = upsert(
                connection.dialect.name,
                findings_table,
                ("key", "opened_at"),
                replace=("closed_at", "evidence", "severity", "summary"),
            )
            connection.execute(upsert_findings, list(rows.values()))

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
        query = _FINDING.select().order_by(t.c.opened_at, t.c.id)
        if open_only:
            query = query.where(t.c.closed_at.is_(None))
        if since is not None:
            query = query.where(sa.or_(t.c.closed_at.is_(None), t.c.closed_at >= since))
        if detector is not None:
            query = query.where(t.c.detector == detector)
        with self._reading("reading findings") as connection:
            return [_FINDING.value(row) for row in connection.execute(query)]
