"""A recorded trace's owners.json as both ProcessTable and OwnerDirectory.

It stands in for /proc and the scheduler: each job lists its pids (and pids it left behind
as `descendant_pids`) with start and end instants on the trace's timeline."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from observer.clock import Clock, TraceTimeline
from observer.domain import NO_OWNER, Owner, OwnerKind, OwnerPhase, OwnerState
from observer.errors import TraceError
from observer.ownership.base import ProcessInfo


@dataclass(frozen=True, slots=True)
class _Job:
    id: str
    start: float
    end: float | None


class ReplayOwners:
    def __init__(self, trace_dir: Path, timeline: TraceTimeline, clock: Clock) -> None:
        try:
            jobs = json.loads((trace_dir / "owners.json").read_text())["jobs"]
            self._jobs = {j["id"]: _Job(j["id"], float(j["start"]), j.get("end")) for j in jobs}
            self._owner_of_pid = {
                int(pid): j["id"]
                for j in jobs
                for pid in [*j.get("pids", []), *j.get("descendant_pids", [])]
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TraceError(f"cannot read owners.json in {trace_dir}: {exc}") from exc
        self._timeline = timeline
        self._clock = clock

    def inspect(self, pid: int) -> ProcessInfo:
        # The recording kept no /proc facts: a listed pid is taken to exist.
        job = self._owner_of_pid.get(pid)
        owner = Owner(OwnerKind.JOB, job) if job else NO_OWNER
        return ProcessInfo(pid=pid, start_ticks=None, command=None, owner=owner)

    def alive(self, info: ProcessInfo) -> bool:
        return True

    def state(self, owner: Owner) -> OwnerState:
        job = self._jobs.get(owner.id) if owner.kind is OwnerKind.JOB else None
        if job is None:
            return OwnerState(OwnerPhase.UNKNOWN)
        now = self._clock.now()
        at = self._timeline.to_trace(now)
        if at < job.start:
            return OwnerState(OwnerPhase.UNKNOWN)
        if job.end is None or at < job.end:
            return OwnerState(OwnerPhase.RUNNING)
        return OwnerState(OwnerPhase.ENDED, self._timeline.to_wall(job.end, now))
