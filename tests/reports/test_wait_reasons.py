"""Why and how long each job waited, in the daily summary, from what the controller stored:
per tenant and the scheduler's reason, the hours the tenants' own jobs spent pending (added
up over the jobs) and the probes' beside them; the probes' and the tenants' own jobs' average
waits side by side in the headline; and in each probe run's row of the per-task record its
user, queue and main wait reason, in the table, the CSV and the JSON."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from observer.records import JobOrigin
from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from observer.reports.render.tasks import CSV_COLUMNS
from tests.controller.test_job_tallies import T0, Platform


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    """A morning on the simulated cluster: research holds every GPU for half an hour, prod's
    jobs wait behind it, then hold every GPU for ten minutes while a probe of prod's waits
    behind both; the controller samples, follows and lists as it does, and the day's summary
    is built from its store."""
    platform = Platform(Path(tmp_path_factory.mktemp("waits")))
    controller = platform.controller
    for _ in range(2):
        platform.job("research", 1800, gpus=4)
    for _ in range(4):
        platform.job("prod", 600, gpus=2)
    [probe] = controller.runner.launch(controller.catalog["short"], ["prod"], None)
    controller.tally_jobs()
    for _ in range(4 * 60 * 2):  # four hours, every 30 s
        controller.sample_scheduler()
        controller.follow()
        platform.clock.advance(30)
    controller.tally_jobs()
    day = T0.date()
    after = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=2)
    report = build_daily(load_daily(platform.store, platform.settings, day, after))
    stored = (
        platform.store.pending_times(T0, after),
        platform.store.job_slots(T0, after),
        platform.store.run(probe.run_id),
    )
    yield stored, render_daily(report, "en"), render_daily(report, "zh-CN")
    platform.store.close()


def test_the_hours_by_reason_are_the_stored_pending_time_of_each_tenant_and_reason(played):
    (pending, _, probe), en, _ = played
    stored: dict[str, dict[str, float]] = {}
    for time in pending:
        reasons = stored.setdefault(time.tenant, {})
        reasons[time.reason] = reasons.get(time.reason, 0.0) + time.seconds
    assert stored, "prod's jobs were seen waiting"

    daily = json.loads(en.json)

    assert daily["wait_reasons"] == {
        tenant: {reason: round(seconds / 3600, 3) for reason, seconds in reasons.items()}
        for tenant, reasons in stored.items()
    }
    assert probe is not None
    assert daily["probe_wait_reasons"] == {
        probe.tenant: {
            reason: round(seconds / 3600, 3)
            for reason, seconds in probe.pending_reasons.items()
            if seconds > 0
        }
    }


def test_the_headline_puts_the_probes_wait_beside_the_tenants_own_jobs(played):
    (_, slots, probe), en, zh = played
    waits = [w for s in slots for w in s.waits if w.origin is JobOrigin.TENANT]
    jobs = sum(w.jobs for w in waits)
    assert probe is not None and probe.queue_wait_seconds is not None

    daily = json.loads(en.json)

    assert daily["tenant_jobs_wait_seconds_avg"] == round(
        sum(w.wait_seconds * w.jobs for w in waits) / jobs, 3
    )
    assert daily["queue_wait_seconds_avg"] == round(probe.queue_wait_seconds, 3)
    assert "Average queue wait, the observer's probes" in en.markdown
    assert "Average queue wait, tenants' own jobs" in en.markdown
    assert "平均排队等待（租户自身作业）" in zh.markdown


def test_the_waiting_probes_row_names_its_user_queue_and_main_wait_reason(played):
    (_, _, probe), en, zh = played
    assert probe is not None and len(probe.pending_reasons) > 1  # one reason, then another
    longest = max(probe.pending_reasons.values())
    [main] = [r for r, seconds in probe.pending_reasons.items() if seconds == longest]

    [row] = list(csv.DictReader(io.StringIO(en.csv)))
    [record] = json.loads(en.json)["task_records"]

    assert tuple(csv.DictReader(io.StringIO(en.csv)).fieldnames or ()) == CSV_COLUMNS
    assert (row["run_id"], row["main_wait_reason"]) == (probe.run_id, main)
    assert (row["user"], row["queue"]) == (probe.user or "", probe.queue or "")
    assert (record["main_wait_reason"], record["user"], record["queue"]) == (
        main,
        probe.user,
        probe.queue,
    )
    for page in (en.markdown, zh.markdown):
        [line] = [x for x in page.splitlines() if x.startswith(f"| {probe.run_id[:8]} ")]
        assert f" {main} |" in line


def test_the_day_has_a_section_on_why_jobs_waited_in_both_languages(played):
    (pending, _, _), en, zh = played
    hours = sum(t.seconds for t in pending if t.tenant == "prod") / 3600

    assert "## Why jobs waited" in en.markdown
    assert "作业为何等待" in zh.markdown
    section = en.markdown.split("## Why jobs waited")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| prod ")]
    assert rows and sum(float(r[2]) for r in rows) == pytest.approx(hours, abs=0.05 * len(rows))
