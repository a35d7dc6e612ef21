"""What a watch is: its Protocol, the Look that each check hands every watch (what the detect
loop read once for all of them) and the Checked that each hands back."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from observer.domain import Finding, NodeSnapshot, ProbeRun, SchedulerSnapshot


@dataclass(frozen=True)
class Look:
    """One check's inputs, read by the detect loop before any watch is checked."""

    now: datetime
    active: Sequence[ProbeRun]  # the runs in flight
    changed: Sequence[ProbeRun]  # the runs the follow loop handed over since the last check
    nodes: Mapping[str, NodeSnapshot]  # the agents' latest snapshots, by node
    latest: SchedulerSnapshot | None  # the latest scheduler snapshot, however old
    blind: bool  # to the scheduler: no snapshot yet, or the latest no longer speaks for now

    @property
    def scheduler(self) -> SchedulerSnapshot | None:
        """The latest scheduler snapshot while it speaks for now; None while blind."""
        return None if self.blind else self.latest


@dataclass(frozen=True)
class Checked:
    """What one check of a watch found. The detect loop stores every watch's `changed`, in
    the watches' order, then every watch's `late`, then every watch's `restated`, as one
    batch; it counts them all and returns the first two."""

    changed: Sequence[Finding] = ()  # opened, closed or happened
    late: Sequence[Finding] = ()  # as `changed`, for a watch checked early but stored last
    restated: Sequence[Finding] = ()  # open and unchanged, stored again with newer evidence
    stored: Callable[[], None] | None = None  # what to do once the batch is stored


class Watch(Protocol):
    """One controller-side rule with its own state, owned by the detect loop's thread."""

    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        """After a (re)start: take over what a previous controller left (`left_open`: every
        finding the store has open), so that a restart neither duplicates nor orphans one."""
        ...

    def check(self, look: Look) -> Checked: ...
