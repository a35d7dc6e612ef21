"""The simulated cluster's tenant isolation: RBAC-like and refused in Kubernetes' words by
default; `faults.isolation_broken` lets every cross-tenant read through."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.clock import ManualClock
from observer.domain import Workload
from observer.errors import BackendError, ProbeError

READS = ["list jobs", "list pods", "read pod log", "list secrets", "read secret"]


@pytest.fixture
def cluster() -> SimulatedCluster:
    clock = ManualClock(datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    cluster = SimulatedCluster(
        [NodeSpec("n1", 4)], [TenantSpec("research"), TenantSpec("prod")], clock
    )
    cluster.submit_background("prod", Workload(1, duration_seconds=600))
    return cluster


def test_every_cross_tenant_read_is_refused_by_default(cluster: SimulatedCluster):
    attempts = cluster.probe_isolation("research", "prod")

    assert [a.action for a in attempts] == READS
    assert not any(a.allowed for a in attempts)
    assert attempts[3].detail == (
        'secrets is forbidden: User "system:serviceaccount:research:observer-probe" cannot '
        'list resource "secrets" in API group "" in the namespace "prod"'
    )
    # nothing was listed, so no real name leaks into what was tried
    assert attempts[2].target == "prod/observer-isolation-probe"


def test_a_broken_isolation_lets_every_read_through(cluster: SimulatedCluster):
    cluster.faults.isolation_broken = True

    attempts = cluster.probe_isolation("research", "prod")

    assert all(a.allowed for a in attempts)
    assert attempts[0].detail == "listed 1 Jobs"
    assert attempts[2].target == "prod/sim-1"  # the newest of prod's jobs
    assert attempts[4].target == "prod/prod-credentials"


def test_unknown_tenants_and_an_unreachable_cluster_are_errors(cluster: SimulatedCluster):
    with pytest.raises(ProbeError, match="Invalid account: vision"):
        cluster.probe_isolation("vision", "prod")
    cluster.faults.reachable = False
    with pytest.raises(BackendError):
        cluster.probe_isolation("research", "prod")
