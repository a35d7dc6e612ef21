"""One tenant's failed submission never stops the launch for the others: its run is stored
REJECTED with what failed, and every failed scheduler call is counted by its operation."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.backends.base import FinishedJobs, QuotaChange, SchedulerBackend
from observer.clock import ManualClock
from observer.controller.compose import build_backend, build_controller
from observer.controller.work import Controller, PlanEntry
from observer.domain import (
    AccessAttempt,
    JobRequest,
    JobStatus,
    Outcome,
    RunState,
    SchedulerSnapshot,
)
from observer.errors import BackendError
from observer.metrics import SCHEDULER_OPERATIONS, ControllerMetrics
from observer.settings import Settings
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

MONDAY_10 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
TENANTS = ("research", "prod", "ops")


class FailingFor:
    """The simulated cluster, except that a submission for `tenant` raises `error`."""

    def __init__(self, backend: SchedulerBackend, tenant: str, error: Exception) -> None:
        self._backend = backend
        self._tenant = tenant
        self._error = error

    def submit(self, request: JobRequest) -> str:
        if request.tenant == self._tenant:
            raise self._error
        return self._backend.submit(request)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        return self._backend.jobs(job_ids)

    def cancel(self, job_id: str) -> None:
        self._backend.cancel(job_id)

    def logs(self, job_id: str) -> str:
        return self._backend.logs(job_id)

    def probe_jobs(self) -> list[JobStatus]:
        return self._backend.probe_jobs()

    def snapshot(self) -> SchedulerSnapshot:
        raise BackendError("squeue could not reach slurmctld")

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        return self._backend.finished_jobs(since, until)

    def quota_changes(self, since: datetime, until: datetime) -> list[QuotaChange]:
        return self._backend.quota_changes(since, until)

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        return self._backend.probe_isolation(as_tenant, other_tenant)

    def close(self) -> None:
        self._backend.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = migrated_sqlite(tmp_path / "observer.db")
    with Store(url) as opened:
        yield opened


def _controller(store: Store, registry: CollectorRegistry) -> Controller:
    settings = Settings.model_validate(
        {
            "controller": {
                "windows": [{"name": "all-day", "start": "00:00", "end": "00:00"}],
                "tenants": [{"name": name} for name in TENANTS],
                "plan": [{"window": "all-day", "probe": "short", "every_seconds": 600}],
                "simulation": {"nodes": 2, "gpus_per_node": 4},
            }
        }
    )
    clock = ManualClock(MONDAY_10)
    cluster = build_backend(settings.controller, clock)
    backend = FailingFor(cluster, "prod", FileNotFoundError(2, "No such file or directory"))
    return build_controller(settings, backend, store, clock, ControllerMetrics(registry))


def _errors(registry: CollectorRegistry, operation: str) -> float | None:
    return registry.get_sample_value("observer_scheduler_errors_total", {"operation": operation})


def test_a_submission_that_raises_rejects_its_run_and_the_others_launch(store: Store) -> None:
    registry = CollectorRegistry()
    controller = _controller(store, registry)

    launched = controller.launch(PlanEntry("all-day", "short", 600, TENANTS))

    by_tenant = {run.tenant: run for run in store.runs()}
    assert sorted(by_tenant) == sorted(TENANTS)
    assert {run.tenant for run in launched} == set(TENANTS)
    failed = by_tenant["prod"]
    assert failed.state is RunState.DONE
    assert failed.outcome is Outcome.REJECTED
    assert failed.reason == "SubmissionError"
    assert failed.message == "submit raised FileNotFoundError: [Errno 2] No such file or directory"
    for tenant in ("research", "ops"):
        assert by_tenant[tenant].job_id is not None
        assert by_tenant[tenant].state is RunState.PENDING
    assert _errors(registry, "submit") == 1


def test_every_operation_is_counted_from_zero(store: Store) -> None:
    registry = CollectorRegistry()
    controller = _controller(store, registry)
    assert {op: _errors(registry, op) for op in SCHEDULER_OPERATIONS} == dict.fromkeys(
        SCHEDULER_OPERATIONS, 0.0
    )

    with pytest.raises(BackendError):
        controller.sample_scheduler()

    assert _errors(registry, "snapshot") == 1
    assert _errors(registry, "submit") == 0
