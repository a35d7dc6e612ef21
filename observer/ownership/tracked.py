"""The agent's OwnerDirectory on a real node: the node's scheduler agent (an OwnerSource) read
at most once per tick, and only when `interval_seconds` passed since the last read or an
owner appears that the last reading is older than.

A listed owner is running. One the source does not list is ended, since the first reading
taken after it was seen that showed it missing; while the source lists an owner under a name
the node cannot match to an id, an owner missing from it may be that one and stays unknown.
While the source cannot be read every state is unknown, never the last answer, and the
directory reports itself down with the source's reason."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from observer.domain import (
    GpuAssignment,
    NodeAllocation,
    Owner,
    OwnerPhase,
    OwnerState,
)
from observer.errors import OwnerSourceError
from observer.logging_setup import get_logger
from observer.ownership.base import NodeOwners, OwnerSource

_log = get_logger("observer.ownership")
_UNKNOWN = OwnerState(OwnerPhase.UNKNOWN)


@dataclass(slots=True)
class _Tracked:
    first_seen: datetime
    last_asked: datetime
    missing_since: datetime | None = None
    name: str | None = None


class TrackedOwners:
    def __init__(self, source: OwnerSource, interval_seconds: float) -> None:
        self._source = source
        self._interval_seconds = interval_seconds
        self._now: datetime | None = None
        self._read_at: datetime | None = None  # the last attempt, good or not
        self._read_this_tick = False
        self._reading: NodeOwners | None = None
        self._error = "not read yet"
        self._owners: dict[str, _Tracked] = {}  # by id: every owner asked about lately

    @property
    def source(self) -> str:
        return self._source.name

    def refresh(self, now: datetime) -> None:
        """A tick begins: read the source if its interval has passed since the last read."""
        self._now = now
        self._read_this_tick = False
        if self._read_at is None or (now - self._read_at).total_seconds() >= self._interval_seconds:
            self._read(now)

    def state(self, owner: Owner) -> OwnerState:
        now = self._now
        assert now is not None, "refresh(now) begins every tick"
        if not owner.id:
            return _UNKNOWN
        tracked = self._owners.setdefault(owner.id, _Tracked(now, now))
        tracked.last_asked = now
        reading = self._reading
        if reading is not None and reading.at < tracked.first_seen and not self._read_this_tick:
            self._read(now)  # an owner newer than the reading: the reading cannot tell
            reading = self._reading
        if reading is None or owner.kind is not reading.kind:
            return _UNKNOWN
        tracked.name = reading.names.get(owner.id, tracked.name)
        if owner.id in reading.running:
            tracked.missing_since = None
            return OwnerState(OwnerPhase.RUNNING, name=tracked.name)
        if tracked.missing_since is None and reading.at >= tracked.first_seen:
            unmatched = reading.unmatched
            # Ended only when no owner the source lists unmatched could be this one.
            if not unmatched or (tracked.name is not None and tracked.name not in unmatched):
                tracked.missing_since = reading.at
        if tracked.missing_since is None:
            return OwnerState(OwnerPhase.UNKNOWN, name=tracked.name)
        return OwnerState(OwnerPhase.ENDED, tracked.missing_since, tracked.name)

    def allocation(self) -> NodeAllocation:
        """The node allocation layer as the last reading gave it, or why there is none."""
        reading = self._reading
        if reading is None:
            return NodeAllocation(self.source, False, self._error, None)
        assignments = [
            GpuAssignment(
                gpu,
                Owner(reading.kind, owner),
                _named(reading, owner, gpu, reading.names.get(owner)),
                reading.parts.get(owner, {}).get(gpu, frozenset()),
            )
            for owner, gpus in reading.gpus.items()
            for gpu in gpus
        ] + [
            GpuAssignment(
                gpu,
                Owner(reading.kind),
                _named(reading, name, gpu, name),
                reading.parts.get(name, {}).get(gpu, frozenset()),
            )
            for name, gpus in reading.unmatched.items()
            for gpu in gpus
        ]
        return NodeAllocation(
            source=self.source,
            up=True,
            reason=None,
            read_at=reading.at,
            assignments=tuple(sorted(assignments, key=lambda a: (a.gpu_uuid, a.label))),
            allocatable=reading.allocatable,
        )

    def close(self) -> None:
        self._source.close()

    def _read(self, now: datetime) -> None:
        previous = self._read_at
        self._read_at = now
        self._read_this_tick = True
        # An owner not asked about since the read before this one has no process left.
        if previous is not None:
            self._owners = {i: t for i, t in self._owners.items() if t.last_asked >= previous}
        try:
            reading = self._source.read()
        except OwnerSourceError as exc:
            if str(exc) != self._error:
                _log.warning("owner directory down", source=self.source, reason=str(exc))
            self._reading, self._error = None, str(exc)
            return
        if self._reading is None:
            _log.info("owner directory up", source=self.source)
        self._reading, self._error = reading, ""


def _named(reading: NodeOwners, key: str, gpu: str, name: str | None) -> str | None:
    """The owner's name, with the parts of the GPU it was given when not the whole GPU."""
    parts = reading.parts.get(key, {}).get(gpu)
    if not parts:
        return name
    return f"{name or Owner(reading.kind, key).label} ({', '.join(sorted(parts))})"
