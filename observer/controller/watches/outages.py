"""The blind time of a source every loop reads through, as a condition open from the source's
first failed operation (any thread's) until the next one that succeeds: the store
(store_unreachable) and the platform's accounting (accounting_unreachable: the finished jobs
and quota changes the all-jobs figures and the quota audit are made of); the scheduler
showing the observer only part of its jobs (scheduler_partly_visible: Slurm's PrivateData);
and, as such a
condition too, the store's volume about to fill (store_space_low), which would make the
store unreachable."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

from observer.backends.base import PartialView
from observer.backends.counted import ACCOUNTING, CountedBackend, LayerOutage
from observer.controller.watches.base import Checked, Look
from observer.domain import Finding, FindingKind, JsonValue, Severity
from observer.records import size_text
from observer.storage.database import StoreOutage
from observer.storage.store import Store

STORE_UNREACHABLE = "store_unreachable"
ACCOUNTING_UNREACHABLE = "accounting_unreachable"
STORE_SPACE_LOW = "store_space_low"
SCHEDULER_PARTLY_VISIBLE = "scheduler_partly_visible"


class Outage(Protocol):
    @property
    def since(self) -> datetime: ...
    @property
    def error(self) -> str: ...


OutageT = TypeVar("OutageT", bound=Outage)


def _no_figures(_: Outage) -> Mapping[str, JsonValue]:
    return {}


@dataclass(frozen=True)
class Source(Generic[OutageT]):
    """A source as its condition names it. `summary` is completed by the error's words;
    `figures`, the numbers an outage is told by, go into the condition's evidence."""

    detector: str
    subject: Mapping[str, str]
    severity: Severity
    summary: str
    rule: str
    outage: Callable[[], OutageT | None]  # read by the detect loop, written by any
    figures: Callable[[OutageT], Mapping[str, JsonValue]] = _no_figures


def store(where: Store) -> Source[StoreOutage]:
    return Source(
        STORE_UNREACHABLE,
        {"store": where.where},
        Severity.CRITICAL,
        f"the store {where.where} failed, what the observer saw is kept in memory until it is back",
        "a store operation failed; closed by the next one that succeeds",
        lambda: where.outage,
    )


def accounting(backend: CountedBackend, platform: str) -> Source[LayerOutage]:
    return Source(
        ACCOUNTING_UNREACHABLE,
        {"accounting": platform},
        Severity.WARNING,
        f"the {platform} accounting (finished jobs, quota changes) cannot be read: every "
        "tenant's job figures and the quota audit are blind until it is back",
        "a read of finished jobs or quota changes failed; closed when each read that failed "
        "succeeds",
        lambda: backend.outage(ACCOUNTING),
    )


def partly_visible(backend: CountedBackend, platform: str) -> Source[PartialView]:
    return Source(
        SCHEDULER_PARTLY_VISIBLE,
        {"scheduler": platform},
        Severity.WARNING,
        f"the {platform} scheduler shows the observer only part of its jobs: the queues and "
        "waits of what it hides are not seen",
        "the scheduler's configuration hides jobs from the observer's account, checked with "
        "the snapshots; closed when it no longer does",
        backend.partial_view,
    )


@dataclass(frozen=True, slots=True)
class SpaceLow:
    """The store's volume would fill within storage.space_warning_days (`limit`) at the
    growth of the last day, as measured since `since`."""

    since: datetime
    free_bytes: int  # on the volume, and free inside the database
    growth_bytes_per_day: float
    limit: timedelta

    @property
    def fills_in(self) -> timedelta:
        return timedelta(days=self.free_bytes / self.growth_bytes_per_day)

    @property
    def error(self) -> str:
        return (
            f"{size_text(self.free_bytes)} free on its volume, growing "
            f"{size_text(self.growth_bytes_per_day)} a day: full in about "
            f"{self.fills_in / timedelta(days=1):.1f} days"
        )


def _space_figures(low: SpaceLow) -> Mapping[str, JsonValue]:
    return {
        "free_bytes": low.free_bytes,
        "growth_bytes_per_day": round(low.growth_bytes_per_day),
        "fills_in_seconds": round(low.fills_in.total_seconds()),
        "limit_seconds": round(low.limit.total_seconds()),
    }


def room(where: Store, low: Callable[[], SpaceLow | None]) -> Source[SpaceLow]:
    return Source(
        STORE_SPACE_LOW,
        {"store": where.where},
        Severity.WARNING,
        f"the store {where.where} would fill its volume within storage.space_warning_days "
        "at the growth of the last day, and then keep nothing more the observer sees",
        "free space on the store's volume over its growth per day, measured each hour; "
        "closed when it is storage.space_warning_days or more",
        low,
        _space_figures,
    )


class Unreachable(Generic[OutageT]):
    """The watch of one source's outage; stored once the store is back."""

    def __init__(self, source: Source[OutageT]) -> None:
        self._source = source
        self._down: Finding | None = None  # the open condition

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        for finding in left_open:
            if finding.detector == self._source.detector:
                self._down = finding

    def check(self, look: Look) -> Checked:
        source = self._source
        outage, down = source.outage(), self._down
        if outage is None:
            self._down = None
            return Checked([] if down is None else [replace(down, closed_at=look.now)])
        if down is not None:
            evidence = {**down.evidence, "last_error": outage.error, **source.figures(outage)}
            self._down = replace(down, evidence=evidence)
            return Checked()
        self._down = Finding(
            detector=source.detector,
            kind=FindingKind.CONDITION,
            subject=dict(source.subject),
            severity=source.severity,
            summary=f"{source.summary}: {outage.error}",
            opened_at=outage.since,
            closed_at=None,
            evidence={
                "error": outage.error,
                "last_error": outage.error,
                "rule": source.rule,
                **source.figures(outage),
            },
        )
        return Checked([self._down])
