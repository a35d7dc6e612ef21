"""The daily summary's tenant, queue and quota record, in every format and both languages:
each tenant's weight and quota, the quota as the day began and every change of the day (who,
when, before and after), its over-quota attempts with the platform's words and how long its
quota took to free, the GPUs received against entitled in each window that ended that day,
and every job's wait from the platform's listings."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from observer.domain import Expectation, Outcome, QueueState
from observer.records import (
    QUOTA_CHANGED,
    InterventionSource,
    JobSlot,
    JobWait,
    StoredIntervention,
    StoredQueueSample,
)
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import Period, PeriodData, TenantTerms
from observer.reports.render.daily import render_daily
from observer.settings.detectors import FairnessSettings
from tests.reports.builders import DAY, at, context, node, run

YESTERDAY = Period(DAY.start - timedelta(days=1), DAY.start)


def _change(when, by, change, **subject):
    return StoredIntervention(
        at=when,
        by=by,
        reason=change,
        subject=subject,
        source=InterventionSource.DETECTED,
        detail={"action": QUOTA_CHANGED, "change": change},
    )


def _quota_run(submitted, finished, reason="AssocGrpGRES"):
    over = run(
        "quota",
        "research",
        submitted=submitted,
        wait_seconds=None,
        reason=reason,
        message="held by a limit of the job's account (GrpGRES)",
        expectation=Expectation.BLOCKED,
        finished=finished,
    )
    return replace(over, gpus=9, nodes=2)


def _inputs():
    refused = _quota_run(at(10), at(10, 2))
    freed = replace(
        run("quota-reclaim", "research", submitted=at(10, 2), wait_seconds=45),
        reclaims_run_id=refused.run_id,
    )
    held = _quota_run(at(14), at(14, 2))
    never = replace(
        run(
            "quota-reclaim",
            "research",
            submitted=at(14, 2),
            wait_seconds=None,
            outcome=Outcome.TIMED_OUT,
            reason="AssocGrpGRES",
            finished=at(14, 13),
        ),
        reclaims_run_id=held.run_id,
    )
    before = _change(
        YESTERDAY.start + timedelta(hours=15), "root", "GrpTRES=gres/gpu=8", tenant="research"
    )
    lowered = _change(at(11, 30), "ops-carol", "GrpTRES=gres/gpu=6", tenant="research")
    qos = _change(at(12), "root", "MaxTRES=gres/gpu=2", qos="low")
    held_long = 600.0
    samples = [
        StoredQueueSample(
            at(hour, 30),
            QueueState("research", None, 2, 4, 2, 2, held_long),
        )
        for hour in (10, 11)
    ] + [
        StoredQueueSample(at(hour, 30), QueueState("prod", None, 0, 0, 6, 6, 0.0))
        for hour in (10, 11)
    ]
    slot = JobSlot(
        at(12),
        at(12, 15),
        True,
        "",
        (),
        (JobWait("research", 10, 19), JobWait("research", 400, 1), JobWait("prod", 5, 2)),
    )
    runs = [refused, freed, held, never]
    data = PeriodData(
        DAY,
        runs=runs,
        queue_samples=samples,
        nodes_at_start=[node("n1", "a", 8, 8)],
        interventions=[lowered, qos],
        job_slots=[slot],
    )
    soak = PeriodData(
        Period(YESTERDAY.start, DAY.end),
        runs=runs,
        queue_samples=samples,
        nodes_at_start=[node("n1", "a", 8, 8)],
        interventions=[before, lowered, qos],
        job_slots=[slot],
    )
    tenants = {"research": TenantTerms(0.7, 8), "prod": TenantTerms(0.3, None)}
    return DailyInputs(
        context=replace(
            context(),
            soak_started_at=YESTERDAY.start,
            tenants=tenants,
            fairness=FairnessSettings(),
        ),
        day=DAY.start.date(),
        data=data,
        previous=None,
        soak=soak,
        intervention_match_seconds=0,
        layer_blind_max_share=0.1,
    )


def _report():
    return build_daily(_inputs())


def _section(markdown: str, heading: str) -> list[str]:
    lines = markdown.splitlines()
    start = lines.index(heading)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return [line for line in lines[start:end] if line.startswith("| ") and "---" not in line]


def test_the_tenants_record_in_english():
    report = _report()
    rows = _section(render_daily(report, "en").markdown, "## Tenants, queues and quotas")

    header, prod, research, changes_header, *rest = rows
    assert header.startswith("| Tenant | Weight | Quota (settings, GPUs) |")
    assert prod.split(" | ")[:5] == ["| prod", "0.30", "none", "not recorded", "0"]
    assert research.split(" | ") == [
        "| research",
        "0.70",
        "8",
        "GrpTRES=gres/gpu=8 (since 2026-11-30 15:00, by root)",
        "1",  # the QOS change is no one tenant's
        "2",
        "not freed",  # one of its two attempts never got its probe started
        "29.5 s",  # 19 jobs waited 10 s, one 400 s: (190 + 400) / 20
        "10 s",  # p95 of twenty is the 19th
        "2.0",
        "not observed",  # utilisation: no GPU sample of its jobs
        "not observed |",  # SM activity: neither
    ]
    assert changes_header == "| At | Subject | By | Before | After |"
    lowered, qos, attempts_header, first, second, shares_header, prod_share, share = rest
    assert lowered.split(" | ") == [
        "| 2026-12-01 11:30",
        "tenant=research",
        "ops-carol",
        "GrpTRES=gres/gpu=8",
        "GrpTRES=gres/gpu=6 |",
    ]
    assert qos == "| 2026-12-01 12:00 | qos=low | root | not recorded | MaxTRES=gres/gpu=2 |"
    assert attempts_header.startswith(
        "| Submitted | Tenant | Asked | Outcome | The platform's words |"
    )
    words = "“AssocGrpGRES: held by a limit of the job's account (GrpGRES)”"  # quoted: theirs
    assert first.split(" | ")[:6] == [
        "| 2026-12-01 10:00",
        "research",
        "9 GPU(s) × 2 node(s)",
        "passed (refused)",
        words,
        "45 s",  # from the refusal's end at 10:02 to the reclaim's start
    ]
    assert second.split(" | ")[5] == "never started: timed_out (AssocGrpGRES)"
    assert shares_header.startswith("| Window | From | Tenant | Received GPUs (avg) |")
    # the peak's two samples: research held with 2 of the 5.6 its weight gives it of 8 GPUs
    # (prod asked 6); prod was never held past the wait rule, so its share is not observed
    assert prod_share == (
        "| weekday-peak | 2026-12-01 09:00 | prod | not observed | not observed | not observed |"
    )
    assert share == "| weekday-peak | 2026-12-01 09:00 | research | 2.0 | 5.6 | 35.7% |"


def test_the_tenants_record_in_chinese_and_json():
    inputs = _inputs()
    report = build_daily(inputs)
    zh = render_daily(report, "zh-CN")
    rows = _section(zh.markdown, "## 租户、队列与配额")
    assert (
        rows[2].split(" | ")[3] == "GrpTRES=gres/gpu=8（自 2026年11月30日 15:00 起，由 root 变更）"
    )
    assert rows[2].split(" | ")[6] == "未释放"
    [second] = [r for r in rows if "始终未启动" in r]
    assert "始终未启动：超时（AssocGrpGRES）" in second
    assert (
        "| 2026年12月1日 11:30 | tenant=research | ops-carol | GrpTRES=gres/gpu=8 |" in zh.markdown
    )
    assert "### 各窗口实得 GPU 与应得 GPU" in zh.markdown

    data = json.loads(render_daily(report, "en").json)["tenants"]
    research = next(t for t in data["tenants"] if t["tenant"] == "research")
    assert [(a["reclaimed_seconds"], a["reclaim_outcome"]) for a in research["attempts"]] == [
        (45.0, "passed"),
        (None, "timed_out"),
    ]
    assert research["all_jobs_waits"]["runs"] == 20
    assert [c["subject"] for c in data["other_changes"]] == [{"qos": "low"}]
    # the same inputs render the same bytes
    assert render_daily(build_daily(inputs), "zh-CN") == zh


def test_each_limit_of_a_change_of_several_has_its_own_value_before():
    quota = {"tenant": "research", "quota": "research-quota"}
    queue = {"tenant": "research", "queue": "team-a"}
    created = _change(
        at(9), "kubectl-create", "count/jobs.batch=10 requests.nvidia.com/gpu=8", **quota
    )
    lowered = _change(at(11), "ops-carol", "requests.nvidia.com/gpu=4", **quota)
    raised = _change(at(12), "ops-carol", "count/jobs.batch=20 requests.nvidia.com/gpu=6", **quota)
    queued = _change(at(9), "kubectl-create", "nominalQuota[h200/nvidia.com/gpu]=8", **queue)
    borrowing = replace(
        _change(
            at(13),
            "alice@example.com",
            "nominalQuota[h200/nvidia.com/gpu]=12 borrowingLimit[h200/nvidia.com/gpu]=4",
            **queue,
        ),
        detail={
            "action": QUOTA_CHANGED,
            "change": "nominalQuota[h200/nvidia.com/gpu]=12 borrowingLimit[h200/nvidia.com/gpu]=4",
            "manager": "kubectl-edit",
        },
    )
    changes = [created, queued, lowered, raised, borrowing]
    inputs = _inputs()
    inputs = replace(
        inputs,
        data=replace(inputs.data, interventions=changes),
        soak=replace(inputs.soak, interventions=changes),
    )

    report = build_daily(inputs)

    data = json.loads(render_daily(report, "en").json)["tenants"]
    research = next(t for t in data["tenants"] if t["tenant"] == "research")
    assert [(c["by"], c["manager"], c["before"], c["after"]) for c in research["changes"]] == [
        ("kubectl-create", None, None, "count/jobs.batch=10 requests.nvidia.com/gpu=8"),
        ("kubectl-create", None, None, "nominalQuota[h200/nvidia.com/gpu]=8"),
        ("ops-carol", None, "requests.nvidia.com/gpu=8", "requests.nvidia.com/gpu=4"),
        (
            "ops-carol",
            None,
            "count/jobs.batch=10 requests.nvidia.com/gpu=4",
            "count/jobs.batch=20 requests.nvidia.com/gpu=6",
        ),
        (
            "alice@example.com",
            "kubectl-edit",
            "nominalQuota[h200/nvidia.com/gpu]=8",
            "nominalQuota[h200/nvidia.com/gpu]=12 borrowingLimit[h200/nvidia.com/gpu]=4",
        ),
    ]
    en, zh = render_daily(report, "en").markdown, render_daily(report, "zh-CN").markdown
    assert (
        "| 2026-12-01 13:00 | queue=team-a, tenant=research | alice@example.com (with kubectl-edit)"
        " | nominalQuota[h200/nvidia.com/gpu]=8 |"
    ) in en
    assert "| alice@example.com（通过 kubectl-edit） | nominalQuota[h200/nvidia.com/gpu]=8 |" in zh


def test_the_quota_as_the_day_began_is_each_of_the_tenants_quotas_and_queues_last_change():
    quota = {"tenant": "research", "quota": "research-quota"}
    queue = {"tenant": "research", "queue": "team-a"}
    night = YESTERDAY.start + timedelta(hours=15)
    changes = [
        _change(night, "kubectl-create", "requests.nvidia.com/gpu=8", **quota),
        _change(night + timedelta(hours=1), "ops-carol", "requests.nvidia.com/gpu=6", **quota),
        _change(night, "kueue-admin", "nominalQuota[h200/nvidia.com/gpu]=4", **queue),
        _change(night, "root", "MaxTRES=gres/gpu=1", tenant="research", user="alice"),
    ]
    inputs = _inputs()
    inputs = replace(inputs, data=replace(inputs.data, interventions=[]))
    inputs = replace(inputs, soak=replace(inputs.soak, interventions=changes))

    report = render_daily(build_daily(inputs), "en")

    research = next(
        row
        for row in _section(report.markdown, "## Tenants, queues and quotas")
        if "research" in row
    )
    assert research.split(" | ")[3] == (
        "nominalQuota[h200/nvidia.com/gpu]=4 (since 2026-11-30 15:00, by kueue-admin); "
        "requests.nvidia.com/gpu=6 (since 2026-11-30 16:00, by ops-carol)"
    )
