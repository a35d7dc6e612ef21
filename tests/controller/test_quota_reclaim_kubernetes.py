"""The quota's release on the Kubernetes emulator, the controller's own tasks over the official
client and real HTTP: research's and prod's namespaces each hold a ResourceQuota of two
requests.nvidia.com/gpu. Each over-quota probe's pod is refused at admission in the API
server's words ("exceeded quota", the Job's reason FailedCreate), and a within-quota probe
follows it. research's starts within controller.quota_reclaim_seconds: no finding. prod's
quota controller stalled while prod's own pod held both its GPUs; the pod ended, the quota
still counts it, and prod's within-quota probe, refused in the same words with prod running
nothing, opens quota_not_reclaimed: a must fix in the verdict, naming prod."""

from __future__ import annotations

from pathlib import Path

from observer.detectors.quota_reclaim import DETECTOR, reclaimed_seconds
from observer.domain import Outcome, RunState
from observer.probes.catalog import QUOTA_PROBE, RECLAIM_PROBE
from observer.reports.compute.criteria.result import FailureClass, Status
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import load_verdict
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.k8s_harness import KubernetesHarness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

RECLAIM_SECONDS = 6
GPU = "requests.nvidia.com/gpu"


def _settings() -> Settings:
    return controller_settings(
        backend="kubernetes",
        tenants=[
            {"name": "research", "weight": 1.0, "quota_gpus": 2},
            {"name": "prod", "weight": 1.0, "quota_gpus": 2},
        ],
        plan=[{"window": "always", "probe": "quota", "every_seconds": 5}],
        probes={"quota-reclaim": {"duration_seconds": 2}},
        gpus_per_node=4,
        max_probe_gpus_per_tenant=3,  # one over-quota probe, or a reclaim, at a time
        quota_reclaim_seconds=RECLAIM_SECONDS,
        follow_interval_seconds=1,
        snapshot_interval_seconds=2,
    )


def test_a_refused_over_quota_probe_frees_its_quota_and_a_stale_quota_is_found(tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    with KubernetesHarness() as k8s:
        for tenant in ("research", "prod"):
            k8s.set_quota(tenant, gpus=2)
        k8s.add_pod("prod", "train-0", 2, node="gpu-node-0")
        k8s.step()
        k8s.stall_quota_controller("prod")
        k8s.core.delete_namespaced_pod("train-0", "prod")  # prod's own work ends
        started = k8s.clock.now()
        settings = _settings()
        settings = settings.model_copy(
            update={"reports": settings.reports.model_copy(update={"soak_started_at": started})}
        )
        soak = SimulatedSoak(settings, k8s.clock, store, k8s.backend)
        soak.run_for(8 + 2 * RECLAIM_SECONDS, k8s.step)
        prod_pods = k8s.core.list_namespaced_pod("prod").items
        now = k8s.clock.now()

    runs = store.runs()
    over = {r.tenant: r for r in reversed(runs) if r.probe == QUOTA_PROBE}  # each one's first
    within = {r.reclaims_run_id: r for r in runs if r.probe == RECLAIM_PROBE}
    assert set(over) == {"research", "prod"}
    for tenant, run in over.items():
        assert (run.outcome, run.reason) == (Outcome.PASSED, "FailedCreate")
        assert (
            run.message is not None
            and (f"is forbidden: exceeded quota: {tenant}-quota, requested: {GPU}=3, ")
            in run.message
        )
    research, prod = within[over["research"].run_id], within[over["prod"].run_id]

    assert over["research"].finished_at is not None
    freed = reclaimed_seconds(research, over["research"].finished_at)
    assert freed is not None and freed < RECLAIM_SECONDS
    assert research.outcome is Outcome.PASSED

    stale = f"exceeded quota: prod-quota, requested: {GPU}=1, used: {GPU}=2, limited: {GPU}=2"
    assert prod.state is RunState.PENDING and prod.reason == "FailedCreate"
    assert prod.message is not None and prod.message.endswith(stale)
    assert prod_pods == []  # prod runs nothing: its quota counts a pod that is gone
    [finding] = store.findings(detector=DETECTOR)
    assert finding.subject == {"tenant": "prod", "run_id": prod.run_id}
    evidence = finding.evidence
    assert (evidence["quota_gpus"], evidence["tenant_usage_gpus"]) == (2, 0)
    assert (evidence["pending_reason"], evidence["pending_message"][-len(stale) :]) == (
        "FailedCreate",
        stale,
    )
    assert evidence["waited_seconds"] > RECLAIM_SECONDS

    verdict = build_verdict(load_verdict(store, settings, now, provisional=True))
    store.close()
    released = next(c for c in verdict.criteria if c.criterion == "quota_released")
    assert (released.status, released.failure_class) == (Status.FAIL, FailureClass.MUST_FIX)
    assert released.subjects.tenants == ("prod",)
