"""Every failed task explained from its evidence, in whose words, and every task of the day
in a per-task record: the daily summary's appendix (HTML rows each run's link leads to,
Markdown), its CSV beside the JSON, and `observer runs` printing the same rows."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from observer.domain import Expectation, Outcome, ProbeRun
from observer.reports.compute.daily import DailyInputs, DailyReport, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.compute.notes import Note
from observer.reports.compute.tasks import explain
from observer.reports.render.daily import render_daily
from observer.storage.store import Store
from tests.reports.builders import DAY, TZ, at, context, run
from tests.support.cli import run_cli
from tests.support.databases import migrated_sqlite

HOUR = 3600.0


def quota_held(deadline_seconds: float, probe: str) -> ProbeRun:
    """A batch probe the platform held on its quota until the observer gave up on it."""
    submitted = at(2)
    return run(
        probe,
        "batch",
        submitted=submitted,
        wait_seconds=None,
        outcome=Outcome.TIMED_OUT,
        reason="QuotaExceeded",
        message="batch: quota 8 GPUs, 6 in use",
        pending={"QuotaExceeded": deadline_seconds},
        finished=submitted + timedelta(seconds=deadline_seconds),
    )


def daily(*runs: ProbeRun) -> DailyReport:
    data = PeriodData(DAY, runs=runs)
    return build_daily(DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1))


def test_a_task_the_observer_gave_up_on_is_explained_by_what_held_it_and_its_own_deadline():
    four_hours = quota_held(4 * HOUR, "multi-gpu")

    assert explain(four_hours) == Note(
        "why.timed_out_pending",
        {"deadline_seconds": 4 * HOUR, "reason_words": "QuotaExceeded", "reason_seconds": 4 * HOUR},
    )
    # The platform's words are kept on the run: the observer's verdict is the outcome.
    assert (four_hours.reason, four_hours.message) == (
        "QuotaExceeded",
        "batch: quota 8 GPUs, 6 in use",
    )


def test_failures_are_grouped_with_every_distinct_explanation_and_its_runs():
    long = [quota_held(4 * HOUR, "multi-gpu") for _ in range(4)]
    short = [quota_held(600, "fail-image") for _ in range(2)]

    [group] = daily(*long, *short).figures.tasks.failure_groups

    assert (group.outcome, group.reason, group.count) == ("timed_out", "QuotaExceeded", 6)
    assert [(e.probes, e.run_ids) for e in group.explanations] == [
        (("multi-gpu",), tuple(r.run_id for r in long)),
        (("fail-image",), tuple(r.run_id for r in short)),
    ]
    english = render_daily(daily(*long, *short), "en").markdown
    assert (
        "Observer: never started within its deadline of 4 h, held by the platform's "
        "“QuotaExceeded” for 4 h; cancelled" in english
    )
    assert (
        "Observer: never started within its deadline of 10 min, held by the platform's "
        "“QuotaExceeded” for 10 min; cancelled" in english
    )


@pytest.mark.parametrize(
    ("failed", "key"),
    [
        (
            run(outcome=Outcome.FAILED, reason="Error", message="exit 1", exit_code=1),
            "why.platform.exit",
        ),
        (run(outcome=Outcome.FAILED, reason="Error", message="Segfault"), "why.platform"),
        (run(outcome=Outcome.FAILED), "why.none"),
        (
            run(outcome=Outcome.REJECTED, reason="SubmissionFailed", message="sbatch: timeout"),
            "why.observer",
        ),
        (
            run(
                "fail-exit",
                outcome=Outcome.FAILED,
                expectation=Expectation.FAIL,
                reason="Completed",
            ),
            "why.unexpected",
        ),
        (run(outcome=Outcome.TIMED_OUT, wait_seconds=30), "why.timed_out_running"),
        (run(outcome=Outcome.TIMED_OUT, wait_seconds=None), "why.timed_out_silent"),
        (
            run("gpu-busy", outcome=Outcome.NO_GPU, reason="NonZeroExitCode", exit_code=69),
            "why.no_gpu.exit",
        ),
    ],
)
def test_each_explanation_says_whose_words_it_gives(failed: ProbeRun, key: str) -> None:
    note = explain(failed)
    assert note is not None and note.key == key
    text = render_daily(daily(failed), "en").markdown
    whose = (
        "Platform:"
        if key.startswith("why.platform")
        else "No explanation"
        if key == "why.none"
        else "Observer:"
    )
    assert whose in text


def test_an_exit_code_is_said_by_the_report_not_quoted_as_the_platforms_words():
    failed = run(outcome=Outcome.FAILED, reason="Error", exit_code=3)
    assert explain(failed) == Note("why.platform.exit", {"words": "Error", "exit_code": 3})
    assert "平台：「Error」，退出码 3" in render_daily(daily(failed), "zh-CN").markdown
    assert "Platform: “Error”, exit code 3" in render_daily(daily(failed), "en").markdown


def test_a_pass_has_no_explanation():
    assert explain(run()) is None


def test_each_run_of_the_failure_table_leads_to_its_row_in_the_appendix():
    held = quota_held(600, "fail-image")
    report = daily(run(), held)

    html = render_daily(report, "en").html

    assert f'<a href="#run-{held.run_id}">{held.run_id[:8]}</a>' in html
    assert html.count(f'id="run-{held.run_id}"') == 1
    rows = re.findall(r'<tr id="run-[^"]+">', html)
    assert len(rows) == 2  # one per run of the day
    assert 'class="filter"' in html and "<script>" in html


def test_the_appendix_has_one_row_per_run_in_local_time_with_censored_waits():
    held = quota_held(600, "fail-image")
    markdown = render_daily(daily(run(wait_seconds=90), held), "en").markdown

    appendix = markdown.split("## Every task of the day", 1)[1]
    rows = [line for line in appendix.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 3  # the header and two runs
    # In submission order: the held one came at 02:00, the other at 10:00.
    assert "≥ 10 min (never started)" in rows[1]
    assert "1 min 30 s" in rows[2]
    # Local time (the context's timezone), no UTC offset, no microseconds.
    local = held.submitted_at.astimezone(context().calendar.timezone) if held.submitted_at else None
    assert local is not None and f"{local:%Y-%m-%d %H:%M}" in rows[1]


def test_the_csv_and_the_json_carry_the_same_runs_with_whole_run_ids():
    held = quota_held(600, "fail-image")
    rendered = render_daily(daily(run(), held), "zh-CN")

    assert rendered.csv is not None
    table = list(csv.DictReader(io.StringIO(rendered.csv)))
    records = json.loads(rendered.json)["task_records"]
    assert [r["run_id"] for r in table] == [r["run_id"] for r in records]
    [row, _] = table  # submission order: the held one came first
    assert (row["run_id"], row["outcome"], row["reason"]) == (
        held.run_id,
        "timed_out",
        "QuotaExceeded",
    )
    assert row["queue_wait_seconds"] == ""  # never started: no wait figure, only the record
    assert row["explanation"].startswith("观测器：")
    assert records[0]["explanation"] == row["explanation"]


def test_observer_runs_prints_the_days_records_from_the_store(tmp_path: Path) -> None:
    database = tmp_path / "soak.db"
    url = migrated_sqlite(database)
    held = quota_held(600, "fail-image")
    passed = run()
    with Store(url) as store:
        store.save_runs([passed, held])
    config = tmp_path / "c.yaml"
    config.write_text(
        f"storage:\n  sqlite_path: {database}\ncontroller:\n  timezone: Asia/Shanghai\n"
    )

    def runs(*args: str) -> str:
        result = run_cli("runs", "--config", str(config), *args)
        assert result.exit_code == 0, result.stderr
        return result.stdout

    day = at(0).astimezone(context().calendar.timezone).date().isoformat()
    everything = runs("--date", day, "--csv")
    assert [r["run_id"] for r in csv.DictReader(io.StringIO(everything))] == [
        held.run_id,
        passed.run_id,
    ]
    [failed] = [json.loads(line) for line in runs("--date", day, "--failed", "--json").splitlines()]
    assert (failed["run_id"], failed["probe"]) == (held.run_id, "fail-image")
    assert failed["explanation"].startswith("Observer: never started")
    zone, headers, *rows = runs("--date", day, "--probe", "fail-image").splitlines()
    assert zone == "Platform timezone: China Standard Time (UTC+8)"
    assert headers.startswith("Run\t") and len(rows) == 1 and held.run_id in rows[0]


def test_observer_runs_gives_its_times_in_the_platforms_zone(tmp_path: Path) -> None:
    database = tmp_path / "soak.db"
    url = migrated_sqlite(database)
    late = run(submitted=at(23, 50), wait_seconds=300)
    with Store(url) as store:
        store.save_runs([late])
    config = tmp_path / "c.yaml"
    config.write_text(
        f"storage:\n  sqlite_path: {database}\ncontroller:\n  timezone: Asia/Shanghai\n"
    )
    day = ["--date", DAY.start.date().isoformat()]

    table = run_cli("runs", "--config", str(config), *day, "--csv").stdout
    record = run_cli("runs", "--config", str(config), *day, "--json").stdout

    [row] = csv.DictReader(io.StringIO(table))
    [stored] = [json.loads(line) for line in record.splitlines()]
    for said in (row, stored):
        times = [datetime.fromisoformat(said[k]) for k in ("submitted_at", "started_at")]
        assert times == [late.submitted_at, late.started_at]
        assert {t.utcoffset() for t in times} == {TZ.utcoffset(DAY.start)}
