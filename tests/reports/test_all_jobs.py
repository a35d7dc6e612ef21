"""Every tenant's jobs in the daily summary, beside the probes: totals, failures per tenant and
grouped by their cause (in the probe failure table's words) and the scheduler's reason; "not
observed" when no listing covered the day and "incomplete" when the listings did not cover
all of it or the scheduler said they may miss jobs."""

from __future__ import annotations

import json
from datetime import timedelta

from observer.domain import JobPhase
from observer.records import JOB_SLOT, JobOrigin, JobSlot, JobTally
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import Period, PeriodData
from observer.reports.compute.jobs import (
    AllJobFigures,
    JobFailureGroup,
    TenantJobs,
    all_job_figures,
)
from observer.reports.render.daily import render_daily
from tests.reports.builders import DAY, context, run

QUARTERS = int(timedelta(days=1) / JOB_SLOT)


def _slots(period: Period, *tallies: JobTally, complete: bool = True, skip: int = 0):
    """Every quarter hour of `period` listed, but the last `skip`; the tallies in the first."""
    starts = [period.start + i * JOB_SLOT for i in range(QUARTERS - skip)]
    note = "" if complete else "the API server deletes finished Jobs after their TTL"
    return [
        JobSlot(start, start + JOB_SLOT, complete, note, tallies if i == 0 else ())
        for i, start in enumerate(starts)
    ]


DAY_TALLIES = (
    JobTally("prod", JobPhase.FAILED, "OOMKilled", "application", 3),
    JobTally("prod", JobPhase.SUCCEEDED, None, None, 10),
    JobTally("research", JobPhase.CANCELLED, None, None, 2),
    JobTally("research", JobPhase.FAILED, "NonZeroExitCode", "application", 1),
    JobTally("research", JobPhase.FAILED, "NonZeroExitCode", "gpu_driver", 2),
    JobTally("research", JobPhase.FAILED, "OOMKilled", "application", 1),
    JobTally("research", JobPhase.SUCCEEDED, None, None, 20),
    JobTally("research", JobPhase.FAILED, "Error", None, 1),  # tallied before causes were kept
)


def test_a_fully_listed_day_counts_every_tenants_jobs_and_groups_failures_by_cause_and_reason():
    figures = all_job_figures(_slots(DAY, *DAY_TALLIES), DAY)

    assert figures == AllJobFigures(
        total=40,
        failed=8,
        cancelled=2,
        by_tenant={"prod": TenantJobs(13, 3), "research": TenantJobs(27, 5)},
        failure_groups=(
            JobFailureGroup("application", "OOMKilled", 4, {"prod": 3, "research": 1}),
            JobFailureGroup("application", "NonZeroExitCode", 1, {"research": 1}),
            JobFailureGroup("gpu_driver", "NonZeroExitCode", 2, {"research": 2}),
            JobFailureGroup(None, "Error", 1, {"research": 1}),
        ),
        complete=True,
        listed_seconds=86400.0,
        notes=(),
    )


def test_a_day_no_listing_covered_is_not_observed_rather_than_zero():
    assert all_job_figures([], DAY) is None
    before = DAY.start - JOB_SLOT
    assert all_job_figures([JobSlot(before, DAY.start, True, "", ())], DAY) is None


def test_a_day_listed_in_part_or_by_a_forgetful_scheduler_is_incomplete():
    partly = all_job_figures(_slots(DAY, *DAY_TALLIES, skip=4), DAY)
    forgetful = all_job_figures(_slots(DAY, *DAY_TALLIES, complete=False), DAY)

    assert partly is not None and not partly.complete
    assert partly.listed_seconds == 86400.0 - 3600
    assert forgetful is not None and not forgetful.complete
    assert forgetful.notes == ("the API server deletes finished Jobs after their TTL",)
    assert forgetful.total == 40


def _report(day_slots, previous_slots=None):
    yesterday = Period(DAY.start - timedelta(days=1), DAY.start)
    soak = Period(yesterday.start, DAY.end)
    previous_slots = previous_slots or []
    return build_daily(
        DailyInputs(
            context=context(),
            day=DAY.start.date(),
            data=PeriodData(DAY, runs=[run()], job_slots=day_slots),
            previous=PeriodData(yesterday, job_slots=previous_slots),
            soak=PeriodData(soak, runs=[run()], job_slots=[*previous_slots, *day_slots]),
            intervention_match_seconds=0,
            layer_blind_max_share=0.1,
        )
    )


def test_the_summary_shows_all_jobs_beside_the_probes_in_every_format():
    report = _report(_slots(DAY, *DAY_TALLIES))

    en = render_daily(report, "en")
    data = json.loads(en.json)
    assert (data["all_jobs_total"], data["all_jobs_failed"], data["all_jobs_complete"]) == (
        40,
        8,
        True,
    )
    assert data["tasks_total"] == 1  # the probes, apart
    assert data["all_jobs"]["by_tenant"]["prod"] == {"total": 13, "failed": 3}
    assert data["previous_day"]["all_jobs_total"] is None  # nothing listed that day
    assert data["soak_to_date"]["all_jobs_complete"] is False  # half of it never listed
    assert "| All jobs ended | 40 | not observed | 40 (incomplete) |" in en.markdown
    assert data["all_jobs"]["failure_groups"][2] == {
        "cause": "gpu_driver",
        "reason": "NonZeroExitCode",
        "count": 2,
        "by_tenant": {"research": 2},
        "by_observer": 0,
    }
    assert "| application (code or data) | “OOMKilled” | 4 | prod 3, research 1 |" in en.markdown
    assert "| GPU / driver | “NonZeroExitCode” | 2 | research 2 |" in en.markdown
    assert "| — | “Error” | 1 | research 1 |" in en.markdown
    assert "<td>GPU / driver</td>" in en.html
    assert "| prod | 13 | 3 | — | 13 / 3 |" in en.markdown
    assert '<td class="not_observed">not observed</td>' in en.html
    zh = render_daily(report, "zh-CN")
    assert "| 全部作业失败数 | 8 | 未观测 | 8（不完整） |" in zh.markdown
    assert "| GPU / 驱动 | 「NonZeroExitCode」 | 2 | research 2 |" in zh.markdown
    assert json.loads(zh.json)["all_jobs_failed"] == 8


def test_a_day_without_a_listing_says_so_in_both_languages():
    report = _report([])

    en, zh = render_daily(report, "en"), render_daily(report, "zh-CN")

    assert "| All jobs ended | not observed | not observed | not observed |" in en.markdown
    assert "No listing of the scheduler's finished jobs covered this day" in en.markdown
    assert "当日没有任何对调度器已结束作业的查询" in zh.markdown
    assert json.loads(en.json)["all_jobs_total"] is None


def test_an_incomplete_day_says_how_much_was_listed_and_why():
    report = _report(_slots(DAY, *DAY_TALLIES, complete=False, skip=48))

    markdown = render_daily(report, "en").markdown

    assert "| All jobs failed | 8 (incomplete) |" in markdown
    assert "covered 50.0% of the day" in markdown
    assert "deletes finished Jobs after their TTL" in markdown


def test_the_observers_own_probes_are_counted_apart_among_every_tenants_jobs():
    ours = (
        JobTally("prod", JobPhase.FAILED, "NonZeroExitCode", "application", 4, JobOrigin.OBSERVER),
        JobTally("prod", JobPhase.SUCCEEDED, None, None, 6, JobOrigin.OBSERVER),
    )
    report = _report(_slots(DAY, *DAY_TALLIES, *ours))

    figures = report.figures.all_jobs
    assert figures is not None
    assert (figures.total, figures.failed) == (50, 12)
    assert figures.by_observer == TenantJobs(10, 4)
    [exit_code] = [
        g
        for g in figures.failure_groups
        if (g.cause, g.reason) == ("application", "NonZeroExitCode")
    ]
    assert (exit_code.count, exit_code.by_observer) == (5, 4)
    en = render_daily(report, "en").markdown
    assert "| of which the observer's own probes | 10 |" in en
    assert "| of which the observer's probes (expected failures too) | 4 |" in en
    assert "| application (code or data) | “NonZeroExitCode” | 5 | prod 4, research 1 | 4 |" in en
    zh = render_daily(report, "zh-CN").markdown
    assert "| 其中观测器自身的探测任务 | 10 |" in zh
