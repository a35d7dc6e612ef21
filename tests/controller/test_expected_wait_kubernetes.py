"""On Kubernetes the platform gives a waiting job no expected start (neither the API server
nor Kueue tells when a pending job will start): over the API emulator, jobs that must wait
behind others start with none, and the day's summary says so as a finding of the soak, in
both languages, with the jobs counted, never an empty table."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from observer.domain import JobRequest, Workload
from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.k8s_harness import KubernetesHarness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings


def test_the_emulated_kubernetes_daily_says_the_platform_shows_no_expected_wait(tmp_path: Path):
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    with KubernetesHarness() as k8s:
        started = k8s.clock.now()
        settings = controller_settings(
            backend="kubernetes",
            tenants=[{"name": "research"}, {"name": "prod"}],
            plan=[],
            gpus_per_node=4,
            snapshot_interval_seconds=2,
            reports={"soak_started_at": started.isoformat()},
        )
        soak = SimulatedSoak(settings, k8s.clock, store, k8s.backend)
        soak.run_for(2, k8s.step)
        whole_node = Workload(gpus_per_node=4, duration_seconds=20)
        for tenant in ("research", "prod", "research", "prod", "prod"):  # 5 nodes' worth of 3
            request = JobRequest(uuid.uuid4().hex, "short", tenant, None, whole_node)
            k8s.backend.submit(request)
        soak.run_for(90, k8s.step)
        now = k8s.clock.now()

    estimates = store.job_estimates(started, now)
    report = build_daily(load_daily(store, settings, now.date(), now, partial=True))
    en, zh = render_daily(report, "en"), render_daily(report, "zh-CN")
    store.close()

    assert len(estimates) >= 2  # the two that could not be placed at once waited, then started
    assert all(e.first_expected_start_at is None for e in estimates)
    daily = json.loads(en.json)["expected_wait"]
    assert daily["platform_estimate"] is False
    platform = [r for r in daily["rows"] if r["source"] == "platform"]
    assert sum(r["jobs"] for r in platform) == len(estimates)
    assert all(r["without_estimate_share"] == 1.0 for r in platform)
    assert all(r["error_p50_seconds"] is None for r in platform)
    assert "The platform shows no expected wait for waiting jobs" in en.markdown
    assert f"({len(estimates)}), none had an expected start" in en.markdown
    assert "平台未向排队作业显示预计等待时间" in zh.markdown
    assert "## 预计等待时间" in zh.markdown
