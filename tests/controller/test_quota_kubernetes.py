"""The quota's changes on Kubernetes while the controller runs, over the API emulator: the
tenant's ResourceQuota and the Kueue ClusterQueue its LocalQueue feeds are created, then
changed by a named field manager. The day's summary records each change with who made it
and when, before and after: the field manager, or, with the API server's audit log read,
the user it names, the manager beside."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.k8s_harness import ADMIN, KubernetesHarness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

QUEUE = "team-a"
NOMINAL = "nominalQuota[default-flavor/nvidia.com/gpu]"


def _settings(started: datetime) -> Settings:
    return controller_settings(
        backend="kubernetes",
        tenants=[{"name": "research", "weight": 1.0, "queue": QUEUE}],
        plan=[],
        gpus_per_node=4,
        snapshot_interval_seconds=2,
        job_listing_interval_seconds=2,
        reports={"soak_started_at": started.isoformat()},
    )


@pytest.mark.parametrize("audited", [False, True], ids=["managers", "audit log"])
def test_quota_and_cluster_queue_changes_are_in_the_daily_summary_with_who_before_and_after(
    tmp_path: Path, audited: bool
) -> None:
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    log = tmp_path / "audit.log"
    log.touch()
    overrides = {"audit_log_path": log} if audited else {}
    with KubernetesHarness(overrides=overrides) as k8s:
        k8s.server.audit_log = log
        k8s.install_queues()
        started = k8s.clock.now()
        settings = _settings(started)
        soak = SimulatedSoak(settings, k8s.clock, store, k8s.backend)
        soak.run_for(4, k8s.step)
        k8s.play_kueue(QUEUE, gpus=8, borrowing_limit=None, by="kubectl-create")
        k8s.add_local_queue("research", QUEUE, QUEUE)
        k8s.set_quota("research", gpus=8, jobs=10, by="kubectl-create")
        created = k8s.clock.now()
        soak.run_for(6, k8s.step)
        changed = k8s.clock.now()
        k8s.set_cluster_queue_quota(QUEUE, 12, by="ops-carol", user="carol@example.com")
        k8s.set_quota("research", gpus=4, by="ops-carol", user="carol@example.com")
        soak.run_for(6, k8s.step)
        now = k8s.clock.now()

    report = build_daily(load_daily(store, settings, now.date(), now, partial=True))
    en, zh = render_daily(report, "en"), render_daily(report, "zh-CN")

    creator, changer = (ADMIN, "carol@example.com") if audited else ("kubectl-create", "ops-carol")
    manager = (lambda name: name) if audited else (lambda name: None)
    tenants = json.loads(en.json)["tenants"]["tenants"]
    research = next(t for t in tenants if t["tenant"] == "research")
    quota = {"tenant": "research", "quota": "research-quota"}
    queue = {"tenant": "research", "queue": QUEUE}
    assert [
        (c["at"], c["by"], c["manager"], c["subject"], c["before"], c["after"])
        for c in research["changes"]
    ] == [
        (
            created.isoformat(),
            creator,
            manager("kubectl-create"),
            quota,
            None,
            "count/jobs.batch=10 requests.nvidia.com/gpu=8",
        ),
        (created.isoformat(), creator, manager("kubectl-create"), queue, None, f"{NOMINAL}=8"),
        (
            changed.isoformat(),
            changer,
            manager("ops-carol"),
            quota,
            "requests.nvidia.com/gpu=8",
            "requests.nvidia.com/gpu=4",
        ),
        (
            changed.isoformat(),
            changer,
            manager("ops-carol"),
            queue,
            f"{NOMINAL}=8",
            f"{NOMINAL}=12",
        ),
    ]
    by = "carol@example.com (with ops-carol)" if audited else "ops-carol"
    assert (
        f"| {changed:%Y-%m-%d %H:%M} | queue={QUEUE}, tenant=research | {by} "
        f"| {NOMINAL}=8 | {NOMINAL}=12 |"
    ) in en.markdown
    by = "carol@example.com（通过 ops-carol）" if audited else "ops-carol"
    day = f"{changed.year}年{changed.month}月{changed.day}日 {changed:%H:%M}"
    assert (
        f"| {day} | quota=research-quota, tenant=research | {by} "
        "| requests.nvidia.com/gpu=8 | requests.nvidia.com/gpu=4 |"
    ) in zh.markdown
    store.close()
