"""The store's blind time: the store_unreachable condition, open from the first store
operation that failed (any thread's) until the next one that succeeds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from observer.controller.watches.base import Checked, Look
from observer.domain import Finding, FindingKind, Severity
from observer.storage.store import Store

STORE_UNREACHABLE = "store_unreachable"


class StoreOutage:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._down: Finding | None = None  # the open condition

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        for finding in left_open:
            if finding.detector == STORE_UNREACHABLE:
                self._down = finding

    def check(self, look: Look) -> Checked:
        """Stored once the store is back."""
        outage, down = self._store.outage, self._down
        if outage is None:
            self._down = None
            return Checked([] if down is None else [replace(down, closed_at=look.now)])
        if down is not None:
            self._down = replace(down, evidence={**down.evidence, "last_error": outage.error})
            return Checked()
        self._down = Finding(
            detector=STORE_UNREACHABLE,
            kind=FindingKind.CONDITION,
            subject={"store": self._store.where},
            severity=Severity.CRITICAL,
            summary=f"the store {self._store.where} failed, what the observer saw is kept in "
            f"memory until it is back: {outage.error}",
            opened_at=outage.since,
            closed_at=None,
            evidence={
                "error": outage.error,
                "last_error": outage.error,
                "rule": "a store operation failed; closed by the next one that succeeds",
            },
        )
        return Checked([self._down])
