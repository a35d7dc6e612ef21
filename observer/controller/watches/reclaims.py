"""Quotas not reclaimed: within-quota probes still held by the quota after an over-quota one
ended and the tenant's own usage left room. The runs' reasons come from following them; a
stale scheduler snapshot says the platform cannot be read, so nothing is judged then."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from observer.controller.watches.base import Checked, Look
from observer.detectors import quota_reclaim
from observer.detectors.conditions import ConditionTracker, covers_all
from observer.domain import Finding
from observer.storage.store import Store


class QuotaReclaims:
    def __init__(self, store: Store, quotas: Mapping[str, int], reclaim_seconds: float) -> None:
        """`reclaim_seconds`: how long a within-quota probe may be held by its quota after an
        over-quota one ended."""
        self._store = store
        self._quotas = quotas
        self._reclaim_seconds = reclaim_seconds
        self._reclaims = ConditionTracker()
        # When each over-quota run that a reclaim run follows ended (None: not stored), by run
        # id.
        self._over_quota_ends: dict[str, datetime | None] = {}
        # Since when each waiting reclaim run's tenant has had room for it, by run id.
        self._room_since: dict[str, datetime] = {}

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        """The waits of the open quota_not_reclaimed findings are timed on from their start."""
        mine = [f for f in left_open if f.detector == quota_reclaim.DETECTOR]
        self._reclaims.resume(mine)
        for finding in mine:
            since = finding.evidence.get("since")
            if isinstance(since, str):  # the wait it was opened on goes on being timed
                self._room_since[finding.subject["run_id"]] = datetime.fromisoformat(since)

    def check(self, look: Look) -> Checked:
        scheduler = look.scheduler
        if scheduler is None:
            self._reclaims.blind()
            return Checked()
        reclaims = []
        for run in look.active:
            over = run.reclaims_run_id
            if over is None:
                continue
            if over not in self._over_quota_ends:
                stored = self._store.run(over)
                self._over_quota_ends[over] = stored.finished_at if stored else None
            ended = self._over_quota_ends[over]
            if ended is None:
                continue
            # Room counts from the first snapshot that shows it, and starts over when the
            # tenant's own work fills the quota again.
            if scheduler.at >= ended and quota_reclaim.has_room(run, scheduler, self._quotas):
                self._room_since.setdefault(run.run_id, max(ended, scheduler.at))
            else:
                self._room_since.pop(run.run_id, None)
            reclaims.append(
                quota_reclaim.Reclaim(run, over, ended, self._room_since.get(run.run_id))
            )
        waiting = {r.reclaims_run_id for r in look.active}
        self._over_quota_ends = {k: v for k, v in self._over_quota_ends.items() if k in waiting}
        pending = {r.run_id for r in look.active}
        self._room_since = {k: v for k, v in self._room_since.items() if k in pending}
        symptoms = quota_reclaim.evaluate(
            reclaims,
            scheduler,
            look.now,
            reclaim_seconds=self._reclaim_seconds,
            quotas=self._quotas,
        )
        # The active runs are every reclaim still waiting: one no longer listed has ended.
        return Checked(self._reclaims.update(symptoms, look.now, covers_all, as_of=scheduler.at))
