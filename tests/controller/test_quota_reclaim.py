"""The quota's release on the simulated cluster: after each over-quota probe is refused, the
controller submits a probe within the tenant's quota and times it from the refusal; once the
tenant's own usage leaves room, one its quota still holds past
controller.quota_reclaim_seconds opens quota_not_reclaimed, with the platform's reason and
the tenant's usage over the hold as evidence. A tenant whose own running work fills its quota
is no finding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from observer.clock import ManualClock
from observer.detectors.quota_reclaim import DETECTOR, reclaimed_seconds
from observer.domain import Outcome, RunState, Workload
from observer.probes.catalog import QUOTA_PROBE, RECLAIM_PROBE
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

MONDAY_0855 = datetime(2026, 11, 30, 8, 55, tzinfo=UTC)  # 16:55 in Shanghai
RECLAIM_SECONDS = 240


def test_a_freed_quota_is_reclaimed_a_full_one_waits_and_a_leaking_one_is_found(tmp_path: Path):
    settings = Settings.model_validate(
        {
            "controller": {
                "timezone": "Asia/Shanghai",
                "windows": [
                    {"name": "weekday-peak", "days": "mon-fri", "start": "17:00", "end": "18:00"}
                ],
                "tenants": [
                    {"name": name, "weight": 1.0, "quota_gpus": 4}
                    for name in ("research", "prod", "batch")
                ],
                "plan": [{"window": "weekday-peak", "probe": "quota", "every_seconds": 1200}],
                "gpus_per_node": 4,
                "max_probe_gpus": 24,
                "max_probe_gpus_per_tenant": 8,
                "quota_reclaim_seconds": RECLAIM_SECONDS,
                "simulation": {"nodes": 3, "gpus_per_node": 4, "pools": ["a"]},
            }
        }
    )
    clock = ManualClock(MONDAY_0855)
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    cluster = simulated_cluster(settings, clock)
    # prod's own job fills its quota until 09:20; batch's, all day
    cluster.submit_background("prod", Workload(4, duration_seconds=25 * 60))
    cluster.submit_background("batch", Workload(4, duration_seconds=24 * 3600))
    soak = SimulatedSoak(settings, clock, store, cluster)
    soak.run_for(60)
    # prod's quota leaks from now on: its jobs stay held by it whatever it runs
    cluster.faults.held_tenants["prod"] = "QuotaExceeded"
    soak.run_for(38 * 60)  # to 09:34, one launch (09:15) of the quota probe

    runs = store.runs()
    over = {r.tenant: r for r in runs if r.probe == QUOTA_PROBE}
    reclaims = {r.tenant: r for r in runs if r.probe == RECLAIM_PROBE}
    assert {t: (r.outcome, r.reason) for t, r in over.items()} == {
        t: (Outcome.PASSED, "Rejected") for t in ("research", "prod", "batch")
    }
    assert {t: r.reclaims_run_id for t, r in reclaims.items()} == {
        t: r.run_id for t, r in over.items()
    }
    refused = over["research"].finished_at
    assert refused is not None
    freed = reclaimed_seconds(reclaims["research"], refused)
    assert freed is not None and freed < RECLAIM_SECONDS
    assert reclaims["research"].outcome is Outcome.PASSED
    # batch's own job still fills its quota: its probe waits, and that is no finding
    assert reclaims["batch"].state is RunState.PENDING
    assert reclaims["batch"].pending_reasons["QuotaExceeded"] > 15 * 60
    assert reclaims["prod"].state is RunState.PENDING

    [finding] = store.findings(detector=DETECTOR)
    assert finding.subject == {"tenant": "prod", "run_id": reclaims["prod"].run_id}
    evidence = finding.evidence
    own_end = MONDAY_0855 + timedelta(minutes=25)
    since = datetime.fromisoformat(evidence["since"])
    # timed from the first snapshot after prod's own job ended, not from the refusal
    assert own_end <= since <= own_end + timedelta(seconds=30)
    assert evidence["over_quota_run_id"] == over["prod"].run_id
    assert evidence["over_quota_ended_at"] == (over["prod"].finished_at or since).isoformat()
    assert evidence["pending_reason"] == "QuotaExceeded"
    assert (evidence["quota_gpus"], evidence["tenant_usage_gpus"]) == (4, 0)
    # its usage over the hold: its own job filled the quota until it ended, nothing since
    series = evidence["tenant_usage_gpus_series"]
    assert [gpus for _, gpus in series] == [4, 0]
    assert datetime.fromisoformat(series[-1][0]) == since
    assert evidence["waited_seconds"] > RECLAIM_SECONDS
    assert RECLAIM_SECONDS < (finding.opened_at - since).total_seconds() < RECLAIM_SECONDS + 30
    assert finding.is_open
