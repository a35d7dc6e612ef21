"""Every failed call to the scheduler is counted by operation, and the reads say whether each
layer of the platform answers: the scheduler itself, or its accounting (finished jobs, quota
changes), which fail apart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from observer.backends.counted import ACCOUNTING, SCHEDULER, CountedBackend, LayerOutage
from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.clock import ManualClock
from observer.errors import BackendError
from observer.metrics import ControllerMetrics

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def _counted() -> tuple[SimulatedCluster, CountedBackend, ManualClock, CollectorRegistry]:
    clock = ManualClock(T0)
    cluster = SimulatedCluster([NodeSpec("n1", 4)], [TenantSpec("research")], clock)
    registry = CollectorRegistry()
    errors = ControllerMetrics(registry).scheduler_errors_total
    return cluster, CountedBackend(cluster, errors, clock), clock, registry


def test_accounting_fails_apart_from_the_scheduler_from_its_first_failure_to_its_recovery():
    cluster, backend, clock, registry = _counted()
    cluster.faults.accounting_reachable = False
    with pytest.raises(BackendError):
        backend.finished_jobs(T0 - timedelta(hours=1), T0)
    clock.advance(600)
    with pytest.raises(BackendError):
        backend.quota_changes(T0, clock.now())
    backend.snapshot()

    assert backend.outage(SCHEDULER) is None
    assert backend.outage(ACCOUNTING) == LayerOutage(
        T0, "quota_changes: the cluster's accounting is unreachable"
    )
    assert (
        registry.get_sample_value("observer_scheduler_errors_total", {"operation": "finished_jobs"})
        == 1.0
    )

    cluster.faults.accounting_reachable = True
    backend.finished_jobs(T0, clock.now())
    # quota_changes has not answered since it failed: the accounting is not yet back
    assert backend.outage(ACCOUNTING) is not None
    backend.quota_changes(T0, clock.now())
    assert backend.outage(ACCOUNTING) is None


def test_the_scheduler_is_failing_from_a_failed_read_until_that_read_answers_again():
    cluster, backend, clock, _ = _counted()
    cluster.faults.reachable = False
    with pytest.raises(BackendError):
        backend.snapshot()
    outage = backend.outage(SCHEDULER)
    assert outage is not None and outage.since == T0
    assert outage.error == "snapshot: the cluster's API is unreachable"
    # an unreachable API fails the accounting's reads too, once they are made
    assert backend.outage(ACCOUNTING) is None
    cluster.faults.reachable = True
    clock.advance(30)
    backend.snapshot()
    assert backend.outage(SCHEDULER) is None
