"""Quotas not reclaimed: within-quota probes still held by the quota after an over-quota one
ended and the tenant's own usage left room at every scheduler snapshot since. The runs'
reasons come from following them; each check folds the latest snapshot into every hold
(quota_reclaim.observed); a stale scheduler snapshot says the platform cannot be read, so
nothing is judged then."""

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
        # Each waiting reclaim run's hold, by run id.
        self._holds: dict[str, quota_reclaim.Reclaim] = {}
        # Since when the open findings' runs had room before a restart, by run id: each hold
        # starts from it once its run is seen again.
        self._resumed: dict[str, datetime] = {}

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        """The waits of the open quota_not_reclaimed findings are timed on from their start;
        their usage series start over from the first snapshot after the restart."""
        mine = [f for f in left_open if f.detector == quota_reclaim.DETECTOR]
        self._reclaims.resume(mine)
        for finding in mine:
            since = finding.evidence.get("since")
            if isinstance(since, str):  # the wait it was opened on goes on being timed
                self._resumed[finding.subject["run_id"]] = datetime.fromisoformat(since)

    def check(self, look: Look) -> Checked:
        scheduler = look.scheduler
        if scheduler is None:
            self._reclaims.blind()
            return Checked()
        holds = {}
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
            hold = self._holds.get(run.run_id) or quota_reclaim.Reclaim(
                run, over, ended, self._resumed.pop(run.run_id, None)
            )
            holds[run.run_id] = quota_reclaim.observed(hold, run, scheduler, self._quotas)
        waiting = {r.reclaims_run_id for r in look.active}
        self._over_quota_ends = {k: v for k, v in self._over_quota_ends.items() if k in waiting}
        self._holds = holds
        pending = {r.run_id for r in look.active}
        self._resumed = {k: v for k, v in self._resumed.items() if k in pending}
        symptoms = quota_reclaim.evaluate(
            list(holds.values()),
            scheduler,
            look.now,
            reclaim_seconds=self._reclaim_seconds,
            quotas=self._quotas,
        )
        # The active runs are every reclaim still waiting: one no longer listed has ended.
        return Checked(self._reclaims.update(symptoms, look.now, covers_all, as_of=scheduler.at))
