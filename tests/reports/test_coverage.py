"""Each probe's coverage: the copies that came due, run or skipped with why, and the most in
flight together; the daily summary's table in both languages; and the verdict names each
probe of the plan the soak did not exercise, or exercised in part, with its cause."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from observer.records import ProbeSkip, SkipReason
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.compute.notes import Note
from observer.reports.compute.tasks import ProbeCoverage, coverage_figures
from observer.reports.compute.verdict import Recommendation, VerdictInputs, build_verdict
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language, Words
from observer.reports.render.verdict import render_verdict
from tests.reports.builders import DAY, DAY_START, RULES, at, context, run
from tests.reports.test_verdict import _healthy_runs, _soak


def skipped(probe: str, reason: SkipReason, when: datetime, tenant: str = "research") -> ProbeSkip:
    return ProbeSkip(when, probe, tenant, "weekday-peak", reason)


def _day() -> PeriodData:
    """A burst of four copies for research, one skipped over budget and three run at once;
    prod's one copy run; two short runs that overlapped; isolation never run."""
    burst = [run("burst", submitted=at(10)) for _ in range(3)]
    return PeriodData(
        DAY,
        runs=[
            *burst,
            run("burst", "prod", submitted=at(10)),
            run("short", submitted=at(11)),
            run("short", submitted=at(11, 0, 30)),
        ],
        probe_skips=[
            skipped("burst", SkipReason.BUDGET, at(10)),
            skipped("isolation", SkipReason.NO_OTHER_TENANT, at(12)),
            skipped("isolation", SkipReason.NO_OTHER_TENANT, at(13)),
        ],
    )


def test_each_probe_due_is_run_or_skipped_by_reason_with_the_most_in_flight_together():
    coverage = coverage_figures(_day().runs, _day().probe_skips)

    assert coverage == {
        "burst": ProbeCoverage(due=5, run=4, skipped={"budget": 1}, most_together=3),
        "isolation": ProbeCoverage(due=2, run=0, skipped={"no_other_tenant": 2}, most_together=0),
        "short": ProbeCoverage(due=2, run=2, skipped={}, most_together=2),
    }


def test_runs_one_after_another_are_never_together():
    runs = [run("short", submitted=at(10 + hour)) for hour in range(3)]  # a minute each
    assert coverage_figures(runs, [])["short"].most_together == 1


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_daily_summary_shows_the_coverage_table_in_each_language(language: Language):
    day = _day()
    report = build_daily(
        DailyInputs(
            context=context(),
            day=DAY.start.date(),
            data=day,
            previous=None,
            soak=day,
            intervention_match_seconds=0,
            layer_blind_max_share=0.1,
        )
    )
    words = Words(language, UTC)

    rendered = render_daily(report, language)

    lines = rendered.markdown.splitlines()
    table = lines[lines.index(f"### {words('sub.coverage')}") :]
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ") for line in table[3:10]}
    assert rows["burst"][1:3] == ["5", "4"]
    assert words("coverage.why.budget") in rows["burst"][3]
    assert rows["burst"][4] == "3"
    assert rows["isolation"][1:3] == ["2", "0"]
    assert words("coverage.why.no_other_tenant") in rows["isolation"][3]
    assert rows["short"][3] == "—"
    assert words("sub.coverage") in rendered.html
    coverage = json.loads(rendered.json)["probe_coverage"]
    assert coverage["isolation"] == {
        "due": 2,
        "run": 0,
        "skipped": {"no_other_tenant": 2},
        "most_together": 0,
    }


def _planned_verdict():
    """A healthy week whose plan also holds multi-gpu (over budget every time), long (its
    window never opened), a burst of four whose copies ran two at a time, and gpu-busy run
    once in three launches."""
    runs = _healthy_runs()
    skips = []
    for day in range(7):
        peak = DAY_START + timedelta(days=day, hours=10)
        runs += [run("burst", submitted=peak) for _ in range(2)]
        skips += [skipped("burst", SkipReason.BUDGET, peak) for _ in range(2)]
        skips.append(skipped("multi-gpu", SkipReason.BUDGET, peak))
        if day < 2:
            runs.append(run("gpu-busy", submitted=peak))
        skips += [
            skipped("gpu-busy", SkipReason.BUDGET, peak + timedelta(minutes=m)) for m in (1, 2)
        ]
    planned = {p: 1 for p in ("short", "fairness", "quota", "fail-exit", "log-canary")}
    planned |= {"isolation": 1, "multi-gpu": 1, "long": 1, "burst": 4, "gpu-busy": 1}
    ctx = replace(context(snapshot_interval_seconds=600), planned_copies=planned)
    return build_verdict(VerdictInputs(ctx, _soak(runs=runs, probe_skips=skips), {}, RULES))


def test_a_planned_probe_the_soak_never_ran_is_not_exercised_with_its_cause_and_no_plain_go():
    v = _planned_verdict()

    coverage = [n for n in v.scope if n.key.startswith(("scope.not_", "scope.partly"))]
    assert coverage == [
        Note("scope.not_together", {"probe": "burst", "copies": 4, "most": 2}),
        Note("scope.not_exercised", {"probe": "long", "why": "not_due"}),
        Note("scope.not_exercised", {"probe": "multi-gpu", "why": "budget"}),
        Note(
            "scope.partly_exercised", {"probe": "gpu-busy", "runs": 2, "due": 16, "why": "budget"}
        ),
    ]
    assert v.recommendation is Recommendation.LIMITED_GO


def test_a_soak_that_ran_every_planned_probe_as_planned_is_still_a_go():
    planned = {r.probe: 1 for r in _healthy_runs()}
    ctx = replace(context(snapshot_interval_seconds=600), planned_copies=planned)
    v = build_verdict(VerdictInputs(ctx, _soak(), {}, RULES))
    assert (v.recommendation, v.scope) == (Recommendation.GO, ())


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_verdict_names_each_probe_not_exercised_and_why_in_each_language(language: Language):
    words = Words(language, UTC)

    scope = render_verdict(_planned_verdict(), language).markdown.splitlines()

    multi = [line for line in scope if "multi-gpu" in line]
    long = [line for line in scope if " long " in line]
    assert len(multi) == 1 and words("coverage.why.budget") in multi[0]
    assert len(long) == 1 and words("coverage.why.not_due") in long[0]
    assert any("burst" in line and "4" in line and "2" in line for line in scope)


def test_a_run_ended_the_instant_it_was_submitted_was_in_flight_with_its_copies():
    # Refused at submission, as an isolation run reads and runs nothing.
    copies = [run("burst", submitted=at(10), finished=at(10), wait_seconds=None) for _ in range(4)]
    assert coverage_figures(copies, [])["burst"].most_together == 4
