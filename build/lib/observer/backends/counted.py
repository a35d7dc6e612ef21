"""A scheduler backend whose every failed call is counted by operation (the call's name), in
one place whichever loop of the controller made it. A ProbeError is the platform refusing a
probe, an answer rather than a failed call, so it is not counted."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from typing import TypeVar

from prometheus_client import Counter

from observer.backends.base import FinishedJobs, QuotaChange, SchedulerBackend
from observer.domain import AccessAttempt, JobRequest, JobStatus, SchedulerSnapshot
from observer.errors import ProbeError

T = TypeVar("T")


class CountedBackend:
    """`backend` as is, with `errors` (labelled by operation) counting what it raises."""

    def __init__(self, backend: SchedulerBackend, errors: Counter) -> None:
        self._backend = backend
        self._errors = errors

    def _call(self, operation: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except ProbeError:
            raise
        except Exception:
            self._errors.labels(operation).inc()
            raise

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
