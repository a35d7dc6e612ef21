"""Where each controller loop puts the findings that opened or closed: stored (or kept for
the store's return, see WriteBehind) and counted."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from observer.domain import Finding
from observer.metrics import FindingMetrics
from observer.storage.store import Store
from observer.storage.write_behind import WriteBehind


class FindingsOutbox:
    """Owned by one loop's thread, as its WriteBehind is."""

    def __init__(self, store: Store, metrics: FindingMetrics) -> None:
        self._store = store
        self._metrics = metrics
        self._unsaved: WriteBehind[Finding] = WriteBehind(
            store.save_findings, lambda f: (f.key, f.opened_at)
        )

    def put(self, changed: Sequence[Finding]) -> bool:
        """Store and count `changed`; False while the store cannot take them (kept)."""
        saved = self._unsaved.save(changed)
        if changed:
            self._metrics.record(changed, partial(self._store.findings, open_only=True))
        return saved
