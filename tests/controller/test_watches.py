"""A controller-side rule is one more watch in the detect loop's list: at start it takes over
what the store has open, each check hands it the Look the loop read once for every watch, and
what it finds is stored with the others' findings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType

from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.detect import Detection
from observer.controller.views import Published
from observer.controller.watches import outages
from observer.controller.watches.base import Checked, Look
from observer.domain import Finding, FindingKind, SchedulerSnapshot, Severity
from observer.metrics import ControllerMetrics
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
RULE = "new_rule"


def condition(opened_at: datetime) -> Finding:
    return Finding(
        detector=RULE,
        kind=FindingKind.CONDITION,
        subject={"node": "n1"},
        severity=Severity.WARNING,
        summary="left open by the previous controller",
        opened_at=opened_at,
        closed_at=None,
        evidence={},
    )


class NewRule:
    """A rule of this test's own: it closes the condition it took over at its first check
    that can see the scheduler."""

    def __init__(self) -> None:
        self.adopted: list[Finding] = []

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        self.adopted = [f for f in left_open if f.detector == RULE]

    def check(self, look: Look) -> Checked:
        if look.scheduler is None:
            return Checked()
        closed, self.adopted = [replace(f, closed_at=look.now) for f in self.adopted], []
        return Checked(closed)


def test_a_watch_added_to_the_list_is_resumed_and_checked(tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    store.save_findings([condition(START - timedelta(hours=1))])
    clock = ManualClock(START)
    scheduler: Published[SchedulerSnapshot | None] = Published(None)
    detection = Detection(
        store=store,
        clock=clock,
        metrics=ControllerMetrics(CollectorRegistry()),
        scheduler_max_age_seconds=90,
        nodes=Published(MappingProxyType({})),
        scheduler=scheduler,
        watches=[outages.Unreachable(outages.store(store)), NewRule()],
    )
    detection.resume()

    assert detection.check([]) == []  # blind to the scheduler: the condition stays open
    assert [f.closed_at for f in store.findings(detector=RULE)] == [None]

    clock.advance(30)
    scheduler.publish(SchedulerSnapshot(at=clock.now(), queues=(), nodes=(), jobs=()))
    [closed] = detection.check([])
    assert store.findings(detector=RULE) == [closed]
    assert closed.closed_at == clock.now()
