"""A week simulated through the real controller gives seven daily summaries and a verdict
whose figures are the stored runs' own, built the same from PostgreSQL as from SQLite, and
the same again when rebuilt."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from observer.domain import JobPhase, Outcome, ProbeRun
from observer.reports.compute.daily import build_daily
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import day_period, load_daily, load_verdict
from observer.reports.publish import write_daily
from observer.reports.render.daily import render_daily
from observer.reports.render.verdict import render_verdict
from observer.storage.database import upgrade
from observer.storage.store import Store
from observer.storage.tables import metadata, schema_upgrades_table
from tests.reports.conftest import PlayedWeek
from tests.reports.week import DAYS, SHANGHAI, local

# The played week (tests/reports/conftest.py) is set up by whichever test needs it first:
# seven simulated days, minutes, more on a loaded machine.
pytestmark = pytest.mark.timeout(600)

FAILED = {Outcome.FAILED, Outcome.REJECTED, Outcome.TIMED_OUT, Outcome.LOST}


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _day_runs(played: PlayedWeek, day_index: int) -> list[ProbeRun]:
    bounds = day_period(DAYS[day_index], SHANGHAI)
    return [
        r
        for r in played.store.runs()
        if r.submitted_at is not None and bounds.start <= r.submitted_at < bounds.end
    ]


def _waits(runs: list[ProbeRun]) -> list[float]:
    return sorted(w for r in runs if (w := r.queue_wait_seconds) is not None)


def _rank(values: list[float], q: float) -> float:
    return values[max(1, math.ceil(round(q * len(values), 9))) - 1]


def test_seven_daily_summaries_agree_with_the_stored_runs(played: PlayedWeek):
    assert sorted(played.daily) == [d.isoformat() for d in DAYS]
    all_runs = played.store.runs()
    assert sum(len(_day_runs(played, i)) for i in range(7)) == len(all_runs)
    for i, day in enumerate(DAYS):
        report = _json(played.daily[day.isoformat()][2])
        runs = _day_runs(played, i)
        waits = _waits(runs)
        assert report["date"] == day.isoformat()
        assert report["timezone"] == "Asia/Shanghai"
        assert report["tasks_total"] == len(runs) > 0
        assert report["tasks_failed"] == sum(1 for r in runs if r.outcome in FAILED)
        assert report["queue_wait_seconds_avg"] == round(sum(waits) / len(waits), 3)
        assert report["queue_wait_seconds_p50"] == round(_rank(waits, 0.5), 3)
        assert report["queue_wait_seconds_p95"] == round(_rank(waits, 0.95), 3)
        by_tenant = report["queue_wait"]["by_tenant"]
        for tenant in ("research", "prod"):
            mine = _waits([r for r in runs if r.tenant == tenant])
            assert by_tenant[tenant]["runs"] == len(mine)
            assert by_tenant[tenant]["avg_seconds"] == round(sum(mine) / len(mine), 3)
        # The soak to date adds the days up; the previous day is yesterday's report.
        assert report["soak_to_date"]["tasks_total"] == sum(
            len(_day_runs(played, j)) for j in range(i + 1)
        )
        if i == 0:
            assert report["previous_day"] is None
        else:
            yesterday = _json(played.daily[DAYS[i - 1].isoformat()][2])
            for key in ("tasks_total", "tasks_failed", "queue_wait_seconds_avg", "alerts_total"):
                assert report["previous_day"][key] == yesterday[key]
        # Weekdays have the peak window; the weekend only nights.
        windows = set(report["queue_wait"]["by_window"])
        assert windows == ({"weekday-peak", "night"} if day.weekday() < 5 else {"night"})
        assert report["gpu_utilization_avg"] is not None
        assert report["gpu"]["nodes_sampled"] == 3


def test_gpu_utilisation_per_tenant_agrees_with_the_stored_samples(played: PlayedWeek):
    seen: set[str] = set()
    for day in DAYS:
        report = _json(played.daily[day.isoformat()][2])
        bounds = day_period(day, SHANGHAI)
        samples = played.store.gpu_samples(None, bounds.start, bounds.end)
        attributed = [s for s in samples if s.tenant is not None]
        assert report["gpu"]["tenant_samples"] == len(attributed)
        tenants = {s.tenant for s in attributed if s.tenant is not None}
        assert set(report["gpu"]["by_tenant"]) == tenants
        for tenant in tenants:
            mine = [s.utilization_gpu_percent or 0 for s in attributed if s.tenant == tenant]
            stats = report["gpu"]["by_tenant"][tenant]
            assert stats["samples"] == len(mine)
            assert stats["avg_percent"] == round(sum(mine) / len(mine), 3)
            assert stats["avg_percent"] >= 55  # the agents ran the tenant's job on it
        seen |= tenants
    assert seen == {"research", "prod"}
    verdict = _json(played.verdict[2])
    attributed = sum(_json(played.daily[d.isoformat()][2])["gpu"]["tenant_samples"] for d in DAYS)
    assert verdict["gpu"]["tenant_samples"] == attributed
    linked = next(c for c in verdict["criteria"] if c["criterion"] == "monitoring_linked")
    evidence = {n["key"]: n["params"] for n in linked["evidence"]}
    assert evidence["ev.gpus_attributed"]["attributed"] == attributed > 0


def _stats(percents: list[int]) -> tuple[int, float]:
    return len(percents), round(sum(percents) / len(percents), 3)


def test_gpu_utilisation_per_task_type_and_per_tenant_in_each_window_agrees_with_the_samples(
    played: PlayedWeek,
):
    calendar = played.week.controller.calendar
    tasks_seen: set[str] = set()
    for day in DAYS:
        report = _json(played.daily[day.isoformat()][2])
        bounds = day_period(day, SHANGHAI)
        samples = played.store.gpu_samples(None, bounds.start, bounds.end)
        read = [
            s for s in samples if s.tenant is not None and s.utilization_gpu_percent is not None
        ]
        by_task: dict[str, list[int]] = {}
        by_window_tenant: dict[str, dict[str, list[int]]] = {}
        for s in read:
            percent = s.utilization_gpu_percent or 0
            by_task.setdefault(s.task or "", []).append(percent)
            for window in calendar.windows_at(s.at):
                by_window_tenant.setdefault(window, {}).setdefault(str(s.tenant), []).append(
                    percent
                )
        gpu = report["gpu"]
        assert {t: (v["samples"], v["avg_percent"]) for t, v in gpu["by_task"].items()} == {
            t: _stats(p) for t, p in by_task.items()
        }
        assert {
            w: {t: (v["samples"], v["avg_percent"]) for t, v in tenants.items()}
            for w, tenants in gpu["by_window_tenant"].items()
        } == {w: {t: _stats(p) for t, p in ts.items()} for w, ts in by_window_tenant.items()}
        tasks_seen |= set(by_task)
        markdown = played.daily[day.isoformat()][0].read_text(encoding="utf-8")
        assert "### Per task type" in markdown
        assert "### Per window and tenant" in markdown
    # Every job of the week is one of the observer's probes, named as the plan names them.
    assert {"short", "multi-gpu", "long", "fairness"} <= tasks_seen
    assert "job" not in tasks_seen


def test_the_weeks_incidents_are_in_the_days_they_happened(played: PlayedWeek):
    tue, wed, thu, fri, sat = (_json(played.daily[d.isoformat()][2]) for d in DAYS[1:6])

    # Watchdog fires every day and is never counted.
    assert [tue["alerts_total"], fri["alerts_total"], sat["alerts_total"]] == [1, 2, 0]
    assert {(a["name"], a["severity"]) for a in fri["alerts"]["by_name"]} == {
        ("GPUNodeDown", "critical"),
        ("HighQueueWait", "warning"),
    }

    # Wednesday's drain was recorded: the drain and its resume are accounted for, and the
    # record that audits them is not a third intervention.
    items = wed["manual_interventions"]["items"]
    assert [(i["source"], i["action"]) for i in items] == [
        ("detected", "drain"),
        ("detected", "resume"),
    ]
    assert [i["audited_by"] for i in items] == ["alice", "alice"]
    assert (wed["manual_interventions_total"], wed["manual_interventions"]["recorded"]) == (2, 1)

    # Thursday's were not; one probe job was cancelled by someone else.
    actions = [(i["action"], i["audited_by"]) for i in thu["manual_interventions"]["items"]]
    assert actions == [("drain", None), ("job_cancelled", None), ("resume", None)]
    assert thu["tasks_cancelled"] == 1

    # Friday: the scheduler's API was down 10:00-10:40, the last snapshot before was 09:55;
    # its accounting, read through the same API, too.
    by_source = {p["source"]: p for p in fri["blind_time"]["periods"]}
    assert set(by_source) == {"scheduler", "accounting"}
    gap = by_source["scheduler"]
    assert datetime.fromisoformat(gap["start"]) == local(DAYS[4], 9, 55)
    assert datetime.fromisoformat(gap["end"]) == local(DAYS[4], 10, 40)
    # From the listing that failed at 10:00 to the detect loop's check (every 5 s) after the
    # one that succeeded at 10:40.
    down = by_source["accounting"]
    assert datetime.fromisoformat(down["start"]) == local(DAYS[4], 10, 0)
    assert datetime.fromisoformat(down["end"]) == local(DAYS[4], 10, 40) + timedelta(seconds=5)
    assert fri["blind_seconds"] == 45 * 60 + 5
    groups = fri["tasks"]["failure_groups"]
    assert [(g["outcome"], g["reason"]) for g in groups] == [("rejected", "SubmissionFailed")]
    assert groups[0]["count"] == fri["tasks_failed"] > 0

    # Saturday: node-002's agent unread for most of an hour, node-001's GPU leaked an hour.
    sources = {p["source"]: p for p in sat["blind_time"]["periods"]}
    assert set(sources) == {"agents"}
    assert sources["agents"]["subject"] == "agent=node-002"
    assert 45 * 60 <= sat["blind_time"]["by_source"]["agents"] <= 60 * 60
    by_detector = sat["findings"]["by_detector"]
    assert by_detector["allocated_without_job"] == {
        "opened": 1,
        "closed": 1,
        "still_open": 0,
        "events": 0,
    }
    leak = next(f for f in sat["findings"]["items"] if f["detector"] == "allocated_without_job")
    assert leak["subject"] == {"node": "node-001"}
    assert leak["evidence"]["excess_gpus"] == 1


def test_the_verdict_agrees_with_the_days_and_the_stored_runs(played: PlayedWeek):
    verdict = _json(played.verdict[2])
    days = [_json(played.daily[d.isoformat()][2]) for d in DAYS]
    runs = played.store.runs()
    assert verdict["tasks_total"] == len(runs) == sum(d["tasks_total"] for d in days)
    assert verdict["tasks_failed"] == sum(1 for r in runs if r.outcome in FAILED)
    assert verdict["tasks_failed"] == sum(d["tasks_failed"] for d in days)
    assert [d["tasks_total"] for d in verdict["days"]] == [d["tasks_total"] for d in days]
    assert verdict["alerts_total"] == sum(d["alerts_total"] for d in days) == 3
    waits = _waits(runs)
    assert verdict["queue_wait_seconds_avg"] == round(sum(waits) / len(waits), 3)
    assert days[-1]["soak_to_date"]["tasks_total"] == verdict["tasks_total"]

    status = {c["criterion"]: (c["status"], c["failure_class"]) for c in verdict["criteria"]}
    assert status == {
        "queue_explainable": ("pass", None),
        "monitoring_linked": ("pass", None),
        "quota_enforced": ("pass", None),
        # Each refused quota probe's within-quota probe started once prod's own work allowed.
        "quota_released": ("pass", None),
        "failure_evidence": ("pass", None),
        "no_unreleased_resources": ("fail", "must_fix"),
        "no_log_loss": ("pass", None),
        "monitoring_lag_bound": ("not_observed", None),
        # The week's Alertmanager holds the platform's alerts only: none of the chart's rules
        # fired for the observer's conditions.
        "alerting_chain": ("fail", "limited_launch"),
        # A fair-share cluster, drained for maintenance in two peaks: never found unfair.
        "no_persistent_unfairness": ("pass", None),
        "interventions_audited": ("fail", "later_optimisation"),
        "tenant_isolation": ("pass", None),
        "gpu_health": ("pass", None),
        "inference_available": ("not_observed", None),  # the week runs no inference service
    }
    assert verdict["recommendation"] == "no_go"
    chain = next(c for c in verdict["criteria"] if c["criterion"] == "alerting_chain")
    assert chain["evidence"][0]["params"]["alerts"] == verdict["alerts_total"]
    assert chain["evidence"][0]["params"]["observer_alerts"] == 0
    unaudited = next(c for c in verdict["criteria"] if c["criterion"] == "interventions_audited")
    assert unaudited["evidence"][0]["params"] == {"recorded": 1, "detected": 5, "unaudited": 3}
    leak = next(c for c in verdict["criteria"] if c["criterion"] == "no_unreleased_resources")
    assert [f["detector"] for f in leak["findings"]] == ["allocated_without_job"]
    assert verdict["reverification"][-1]["key"] == "reverify.rerun"


def test_rebuilding_a_day_gives_the_same_bytes(played: PlayedWeek, tmp_path: Path):
    day = DAYS[3]
    first = [p.read_bytes() for p in played.daily[day.isoformat()]]
    again = write_daily(played.store, played.settings, day, played.built_at.replace(year=2027))
    assert [p.read_bytes() for p in again] == first


def test_the_summary_in_chinese(played: PlayedWeek):
    settings = played.settings.model_copy(
        update={"reports": played.settings.reports.model_copy(update={"language": "zh-CN"})}
    )
    report = build_daily(load_daily(played.store, settings, DAYS[4], played.built_at))
    rendered = render_daily(report, "zh-CN")
    assert "每日运行摘要：2026年12月4日星期五" in rendered.markdown
    assert "| 失败任务数 |" in rendered.markdown
    assert "平台时区：北京时间（UTC+8）" in rendered.markdown
    assert '<html lang="zh-CN">' in rendered.html
    assert "各租户作业在采样时占用的 GPU 的利用率" in rendered.markdown
    assert "### 按任务类型" in rendered.markdown
    assert "### 按时间窗口和租户" in rendered.markdown
    assert "| 任务类型 |" in rendered.markdown
    english = _json(played.daily[DAYS[4].isoformat()][2])
    chinese = json.loads(rendered.json)
    # Keys and figures do not depend on the language; only the words do.
    assert chinese["language"] == "zh-CN"
    for key in ("tasks_total", "tasks_failed", "queue_wait_seconds_avg", "findings"):
        assert chinese[key] == english[key]
    assert chinese["gpu"]["by_task"] == english["gpu"]["by_task"]
    assert chinese["gpu"]["by_window_tenant"] == english["gpu"]["by_window_tenant"]


@pytest.mark.postgres
def test_reports_build_from_postgresql_as_from_sqlite(played: PlayedWeek, postgres_schema_url: str):
    upgrade(postgres_schema_url)
    _copy(played.week.url, postgres_schema_url)
    settings = played.settings
    with Store(postgres_schema_url) as postgres:
        for day in (DAYS[0], DAYS[4], DAYS[5]):
            from_sqlite = render_daily(
                build_daily(load_daily(played.store, settings, day, played.built_at)), "en"
            )
            from_postgres = render_daily(
                build_daily(load_daily(postgres, settings, day, played.built_at)), "en"
            )
            assert from_postgres == from_sqlite
        assert render_verdict(
            build_verdict(load_verdict(postgres, settings, played.built_at)), "en"
        ) == render_verdict(
            build_verdict(load_verdict(played.store, settings, played.built_at)), "en"
        )


def _copy(source_url: str, target_url: str) -> None:
    """Every row of every table, as stored, but the releases that migrated each store: the
    target's `db upgrade` recorded its own."""
    source, target = sa.create_engine(source_url), sa.create_engine(target_url)
    try:
        with source.connect() as read, target.begin() as write:
            for table in metadata.sorted_tables:
                if table is schema_upgrades_table:
                    continue
                rows = [dict(row._mapping) for row in read.execute(sa.select(table))]
                if rows:
                    write.execute(sa.insert(table), rows)
    finally:
        source.dispose()
        target.dispose()


def test_all_jobs_in_each_summary_are_the_jobs_the_simulated_cluster_finished(
    played: PlayedWeek,
):
    for day in DAYS:
        report = _json(played.daily[day.isoformat()][2])
        jobs = played.week.finished[day]
        failed = [j for j in jobs if j.phase is JobPhase.FAILED]
        assert report["all_jobs_total"] == len(jobs) > 0
        assert report["all_jobs_failed"] == len(failed)
        # The week's jobs are all the observer's probes, counted apart as its own.
        assert report["all_jobs"]["by_observer"] == {"total": len(jobs), "failed": len(failed)}
        assert bool(failed) == (day.weekday() < 5)  # the failing probes run in the peak
        assert report["all_jobs_complete"] is True  # Friday's outage was listed after it
        by_tenant = report["all_jobs"]["by_tenant"]
        assert {t: v["total"] for t, v in by_tenant.items()} == dict(
            Counter(j.tenant for j in jobs)
        )
        assert {t: v["failed"] for t, v in by_tenant.items() if v["failed"]} == dict(
            Counter(j.tenant for j in failed)
        )
        groups = report["all_jobs"]["failure_groups"]
        reasons: Counter[str] = Counter()
        for group in groups:
            reasons[group["reason"]] += group["count"]
        assert reasons == Counter(j.reason for j in failed)
        assert all(group["cause"] for group in groups)  # the controller classed every one
    monday, tuesday = (_json(played.daily[d.isoformat()][2]) for d in DAYS[:2])
    assert tuesday["previous_day"]["all_jobs_total"] == monday["all_jobs_total"]
    assert tuesday["soak_to_date"]["all_jobs_total"] == (
        monday["all_jobs_total"] + tuesday["all_jobs_total"]
    )
    thursday = played.week.finished[DAYS[3]]
    assert any(j.phase is JobPhase.CANCELLED for j in thursday)  # the probe someone cancelled
