"""Expected wait in the daily summary, as evidence about the platform: per tenant and size,
the error of the platform's first estimate of each waiting job's start (its start minus
that estimate: late is positive) at the median and the 90th percentile and the share of jobs
that started with none, and the observer's own estimate for its probes beside it; when the
platform gave none, the finding that it shows no expected wait; when no job waited, that it
was not observed. In Markdown, HTML and JSON, English and zh-CN."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import datetime, timedelta

from observer.domain import ProbeRun
from observer.records import JobEstimate, JobOrigin
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.compute.expected_wait import EstimateSource, expected_wait
from observer.reports.render.daily import render_daily
from tests.reports.builders import DAY, at, context, run

MINUTE = timedelta(minutes=1)


def started(
    job_id: str, tenant: str, gpus: int, expected: datetime | None, start: datetime
) -> JobEstimate:
    seen = None if expected is None else start - 30 * MINUTE
    return JobEstimate(job_id, tenant, JobOrigin.TENANT, gpus, expected, seen, expected, start)


# research's 4-GPU jobs: started 5 min late, 10 min early, 20 min late, and one with none;
# prod's 1-GPU job on time
JOBS = [
    started("1", "research", 4, at(10), at(10, 5)),
    started("2", "research", 4, at(11), at(10, 50)),
    started("3", "research", 4, at(12), at(12, 20)),
    started("4", "research", 4, None, at(13)),
    started("5", "prod", 1, at(14), at(14)),
]
# a probe expected to wait 10 minutes that waited 25, one expected none that waited 5
PROBES = [
    replace(run(tenant="prod", submitted=at(9), wait_seconds=1500), expected_wait_seconds=600.0),
    replace(run(tenant="prod", submitted=at(15), wait_seconds=300), expected_wait_seconds=0.0),
    run(tenant="prod", submitted=at(16), wait_seconds=None, outcome=None),  # not started
]


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def errors(jobs: list[JobEstimate]) -> list[float]:
    return [
        (j.started_at - j.first_expected_start_at).total_seconds()
        for j in jobs
        if j.started_at and j.first_expected_start_at
    ]


def probe_errors(runs: list[ProbeRun]) -> list[float]:
    return [
        (r.started_at - r.submitted_at).total_seconds() - r.expected_wait_seconds
        for r in runs
        if r.started_at and r.submitted_at and r.expected_wait_seconds is not None
    ]


def test_the_error_of_each_estimate_is_the_start_minus_the_expected_start_per_tenant_and_size():
    figures = expected_wait(JOBS, PROBES)

    research = [j for j in JOBS if j.tenant == "research"]
    rows = {(r.tenant, r.gpus, r.source): r for r in figures.rows}
    assert figures.platform_estimate and figures.waited
    assert list(rows) == [
        ("prod", 1, EstimateSource.PLATFORM),
        ("prod", 1, EstimateSource.OBSERVER),
        ("research", 4, EstimateSource.PLATFORM),
    ]
    row = rows[("research", 4, EstimateSource.PLATFORM)]
    assert row.jobs == len(research)
    assert row.error_p50_seconds == nearest_rank(errors(research), 0.5)
    assert row.error_p90_seconds == nearest_rank(errors(research), 0.9)
    assert row.error_p90_seconds is not None and row.error_p90_seconds > 0  # late: positive
    assert row.without_estimate_share == sum(
        j.first_expected_start_at is None for j in research
    ) / len(research)

    observer = rows[("prod", 1, EstimateSource.OBSERVER)]
    started_probes = [p for p in PROBES if p.started_at is not None]
    assert observer.jobs == len(started_probes)
    assert observer.error_p50_seconds == nearest_rank(probe_errors(started_probes), 0.5)
    assert observer.error_p90_seconds == nearest_rank(probe_errors(started_probes), 0.9)
    assert observer.without_estimate_share == 0.0


def _rendered(jobs: list[JobEstimate], runs: list[ProbeRun]):
    data = PeriodData(period=DAY, runs=runs, job_estimates=jobs)
    report = build_daily(DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1))
    return render_daily(report, "en"), render_daily(report, "zh-CN")


def _section(markdown: str, heading: str) -> str:
    return markdown.split(f"## {heading}")[1].split("\n## ", maxsplit=1)[0]


def test_the_daily_json_carries_the_expected_wait_under_its_stable_keys():
    en, zh = _rendered(JOBS, PROBES)

    figures = expected_wait(JOBS, PROBES)
    for page in (en, zh):
        daily = json.loads(page.json)["expected_wait"]
        assert daily == {
            "platform_estimate": True,
            "rows": [
                {
                    "tenant": r.tenant,
                    "gpus": r.gpus,
                    "source": r.source.value,
                    "jobs": r.jobs,
                    "error_p50_seconds": r.error_p50_seconds,
                    "error_p90_seconds": r.error_p90_seconds,
                    "without_estimate_share": round(r.without_estimate_share, 3),
                }
                for r in figures.rows
            ],
        }


def test_the_section_shows_signed_minutes_and_the_share_without_an_estimate():
    en, zh = _rendered(JOBS, PROBES)

    section = _section(en.markdown, "Expected wait")
    [line] = [x for x in section.splitlines() if x.startswith("| research | 4 | the platform's")]
    research = [j for j in JOBS if j.tenant == "research"]
    p50 = nearest_rank(errors(research), 0.5) / 60
    assert f" {p50:+.1f} |" in line and " 25.0% |" in line
    assert "shows no expected wait" not in section
    assert "## 预计等待时间" in zh.markdown and "观测器" in _section(zh.markdown, "预计等待时间")
    assert 'id="expected_wait"' in en.html


def test_a_platform_that_gave_no_estimate_is_a_finding_of_the_soak():
    none = [replace(j, first_expected_start_at=None, first_seen_at=None) for j in JOBS]
    en, zh = _rendered(none, [])

    assert json.loads(en.json)["expected_wait"]["platform_estimate"] is False
    section = _section(en.markdown, "Expected wait")
    assert (
        f"The platform shows no expected wait for waiting jobs: of the jobs seen waiting that "
        f"started in this period ({len(none)}), none had an expected start."
    ) in section
    assert "| 100.0% |" in section  # the table is there, each row without an estimate
    assert (
        f"平台未向排队作业显示预计等待时间：本期曾观察到排队且已开始的作业（{len(none)} 个）"
        in (zh.markdown)
    )


def test_no_job_seen_waiting_is_not_observed_rather_than_no_estimate():
    en, zh = _rendered([], [])

    assert json.loads(en.json)["expected_wait"] == {"platform_estimate": False, "rows": []}
    section = _section(en.markdown, "Expected wait")
    assert "whether the platform shows an expected wait was not observed" in section
    assert "shows no expected wait" not in section
    assert "无法判断平台是否显示预计等待时间" in zh.markdown
