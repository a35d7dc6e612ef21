"""A scheduler backend whose every failed call is counted by operation (the call's name), in
one place whichever loop of the controller made it, and whose reads are followed by the layer
of the platform they read: the scheduler itself (its jobs and state) or its accounting (the
record of finished jobs and quota changes: slurmdbd behind sacct and sacctmgr, the API
server's history on Kubernetes). A layer fails apart from the other (slurmdbd down while
slurmctld answers), so each has its own outage. A ProbeError is the platform refusing a
probe, an answer rather than a failed call, so it is neither counted nor an outage."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from prometheus_client import Counter

from observer.backends.base import (
    FinishedJobs,
    PartialView,
    PartlyVisible,
    QuotaChange,
    SchedulerBackend,
)
from observer.clock import Clock
from observer.domain import AccessAttempt, JobRequest, JobStatus, SchedulerSnapshot
from observer.errors import ProbeError

T = TypeVar("T")

# The reads that say whether a layer answers, by layer. Submissions, cancels, logs and the
# isolation probe concern one job or one tenant and are left out: their failures are counted.
SCHEDULER = "scheduler"
ACCOUNTING = "accounting"
LAYERS: Mapping[str, tuple[str, ...]] = {
    SCHEDULER: ("snapshot", "jobs", "probe_jobs"),
    ACCOUNTING: ("finished_jobs", "quota_changes"),
}


@dataclass(frozen=True, slots=True)
class LayerOutage:
    """A layer's reads have failed since `since` (the earliest failing read's first failure);
    `error`: the latest failure, in the platform's words, prefixed by the read."""

    since: datetime
    error: str


class CountedBackend:
    """`backend` as is, with `errors` (labelled by operation) counting what it raises and
    `outage(layer)` saying whether a layer's reads are failing (`clock` times them)."""

    def __init__(self, backend: SchedulerBackend, errors: Counter, clock: Clock) -> None:
        self._backend = backend
        self._errors = errors
        self._clock = clock
        # One key per read, fixed here: each loop replaces only its own reads' entries, so no
        # thread's update is lost to another's.
        self._failing: dict[str, LayerOutage | None] = {
            op: None for ops in LAYERS.values() for op in ops
        }

    def outage(self, layer: str) -> LayerOutage | None:
        """Open from a read's first failure until that same read succeeds, so a layer with
        one read failing and another answering is still failing (any thread may ask)."""
        failing = [f for op in LAYERS[layer] if (f := self._failing[op]) is not None]
        if not failing:
            return None
        return LayerOutage(min(f.since for f in failing), failing[-1].error)

    def partial_view(self) -> PartialView | None:
        """The part of the scheduler's layer hidden from the observer; None from a backend
        that cannot hide any."""
        backend = self._backend
        return backend.partial_view() if isinstance(backend, PartlyVisible) else None

    def _call(self, operation: str, call: Callable[[], T]) -> T:
        try:
            answer = call()
        except ProbeError:
            raise
        except Exception as exc:
            self._errors.labels(operation).inc()
            if operation in self._failing:
                was = self._failing[operation]
                since = was.since if was else self._clock.now()
                self._failing[operation] = LayerOutage(since, f"{operation}: {exc}")
            raise
        if operation in self._failing:
            self._failing[operation] = None
        return answer

    def submit(self, request: JobRequest) -> str:
        return self._call("submit", lambda: self._backend.submit(request))

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        return self._call("jobs", lambda: self._backend.jobs(job_ids))

    def cancel(self, job_id: str) -> None:
        self._call("cancel", lambda: self._backend.cancel(job_id))

    def logs(self, job_id: str) -> str:
        return self._call("logs", lambda: self._backend.logs(job_id))

    def probe_jobs(self) -> list[JobStatus]:
        return self._call("probe_jobs", self._backend.probe_jobs)

    def snapshot(self) -> SchedulerSnapshot:
        return self._call("snapshot", self._backend.snapshot)

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        return self._call("finished_jobs", lambda: self._backend.finished_jobs(since, until))

    def quota_changes(self, since: datetime, until: datetime) -> list[QuotaChange]:
        return self._call("quota_changes", lambda: self._backend.quota_changes(since, until))

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        return self._call(
            "probe_isolation", lambda: self._backend.probe_isolation(as_tenant, other_tenant)
        )

    def close(self) -> None:
        self._backend.close()
