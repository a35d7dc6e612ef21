"""`observer demo` as a person runs it: the packaged scenario's simulated day on the real
controller, agents and detectors, /metrics served while it runs, the day's summary and the
verdict written, every injected fault in them and nothing that was not injected, and its
score written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from observer.demo.faults import score
from observer.demo.nodes import BUSY_PROBE_ACTIVITY, TRAINING_ACTIVITY
from observer.demo.run import DemoResult, summary, words
from observer.demo.scenario import describe, load_scenario
from observer.reports.compute.daily import DailyReport, build_daily
from observer.reports.compute.verdict import Verdict, build_verdict
from observer.reports.inputs import load_daily, load_verdict
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Words
from observer.reports.render.verdict import render_verdict
from observer.settings import load_settings
from observer.storage.store import Store
from tests.reports.test_no_english_in_chinese import english_left
from tests.support.cli import run_cli

# The first test sets up the demo's day: 80-130 s of wall time on a loaded 2-core VM.
pytestmark = pytest.mark.timeout(600)

MONDAY = "2026-11-23"
HOUR = re.compile(r"\s+\w{3} \d{4}-")


@dataclass(frozen=True)
class Demo:
    out: Path
    returncode: int
    stdout: str
    stderr: str
    metrics_while_running: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    out = tmp_path_factory.mktemp("demo")
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "observer.cli",
            "demo",
            "--out",
            str(out),
            "--start",
            MONDAY,
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        first = proc.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", first)
        assert found, first
        # Wait for the first simulated hour (after the settings), so the controller has
        # sampled the scheduler.
        progress = [proc.stderr.readline()]
        while progress[-1] and not HOUR.match(progress[-1]):
            progress.append(proc.stderr.readline())
        metrics = httpx.get(found.group(0), timeout=10).text
        stdout, rest = proc.communicate(timeout=600)
    return Demo(out, proc.returncode, stdout, first + "".join(progress) + rest, metrics)


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_it_serves_the_controllers_metrics_while_it_runs(demo: Demo):
    assert "observer_scheduler_last_snapshot_timestamp_seconds" in demo.metrics_while_running
    assert 'observer_scheduler_node_gpus{node="node-000"' in demo.metrics_while_running


def test_it_shows_progress_and_writes_the_days_summary_and_the_verdict(demo: Demo):
    assert demo.returncode == 0, demo.stdout + demo.stderr
    hours = [line for line in demo.stderr.splitlines() if HOUR.match(line)]
    assert len(hours) == 24
    reports = demo.out / "reports"
    expected = [f"daily-{MONDAY}.{s}" for s in ("md", "html", "json")]
    # The verdict is named by the soak's last day, as `observer report verdict` names it.
    expected += [f"verdict-{MONDAY}.{s}" for s in ("md", "html", "json")]
    # Beside the summary, its per-task record: one row per run of the day; beside each report,
    # its GPU-hours per tenant, pool and task type.
    tables = [f"daily-{MONDAY}.csv", f"daily-{MONDAY}-gpu_hours.csv"]
    tables.append(f"verdict-{MONDAY}-gpu_hours.csv")
    assert sorted(p.name for p in reports.iterdir()) == sorted([*expected, *tables])
    with (reports / f"daily-{MONDAY}.csv").open(encoding="utf-8") as records:
        assert sum(1 for _ in records) - 1 == _json(reports / f"daily-{MONDAY}.json")["tasks_total"]
    for name in expected:
        assert str(reports / name) in demo.stdout
    daily = _json(reports / f"daily-{MONDAY}.json")
    assert daily["date"] == MONDAY
    assert daily["tasks_total"] > 100
    # Every tenant's jobs, not only the probes: the simulated cluster lists them all.
    assert daily["all_jobs_total"] > daily["tasks_total"]
    assert daily["all_jobs_complete"] is True
    assert daily["gpu_utilization_avg"] is not None


def test_its_log_lines_go_to_its_file_not_between_its_progress_lines(demo: Demo):
    log = (demo.out / "observer.log").read_text(encoding="utf-8").splitlines()
    assert log and all(json.loads(line)["level"] for line in log)
    assert not [line for line in demo.stderr.splitlines() if line.lstrip().startswith("{")]
    assert f"Its log lines: {demo.out / 'observer.log'}" in demo.stdout


def test_every_injected_fault_is_found_and_nothing_else(demo: Demo):
    assert "MISSED" not in demo.stdout
    assert "No finding that was not injected." in demo.stdout
    assert "NOT INJECTED" not in demo.stdout
    score = _json(demo.out / "score.json")
    assert score["passed"] is True and score["unexplained"] == []
    kinds = [f["kind"] for f in score["faults"]]
    assert kinds == [
        "unfair_scheduler",
        "leaked_probe_process",
        "ecc_burst",
        "log_loss",
        "stuck_terminating",
        "gpu_off_bus",
        "thermal_slowdown",
        "prometheus_stall",
    ]
    for fault in score["faults"]:
        assert fault["injected"] and fault["findings"] and fault["missed"] == [], fault
        assert re.search(rf"found\s+{fault['kind']}", demo.stdout), fault["kind"]
    assert re.search(
        r"found\s+unfair.*\n\s+persistent_unfairness \{'tenant': 'research'\}", demo.stdout
    )
    # The GPU that fell off the bus ran a GPU-busy probe: the summary puts its failure down to
    # the GPU, with the Xid as evidence.
    [off_bus] = [f for f in score["faults"] if f["kind"] == "gpu_off_bus"]
    [hit] = off_bus["hit"]
    daily = _json(demo.out / "reports" / f"daily-{MONDAY}.json")
    [record] = [r for r in daily["task_records"] if r["run_id"] == hit["run_id"]]
    assert (record["probe"], record["outcome"], record["cause"]) == (
        "gpu-busy",
        "failed",
        "gpu_driver",
    )
    on_its_gpu = rf"Xid 79 on {hit['node']} GPU {hit['gpu']} \(GPU has fallen off the bus\)"
    assert any(re.fullmatch(on_its_gpu, e) for e in record["cause_evidence"])
    assert off_bus["miscaused"] == []


def test_the_days_summary_has_the_gpu_faults_in_its_health_section(demo: Demo):
    daily = _json(demo.out / "reports" / f"daily-{MONDAY}.json")
    health = daily["gpu_health"]
    score = _json(demo.out / "score.json")
    hit = {f["kind"]: f["hit"][0] for f in score["faults"] if f["hit"]}
    rows = {(row["node"], row["gpu"]): row for row in health["gpus"]}
    assert set(rows) == {
        (hit[kind]["node"], hit[kind]["gpu"])
        for kind in ("gpu_off_bus", "ecc_burst", "thermal_slowdown")
    }
    assert rows[(hit["gpu_off_bus"]["node"], hit["gpu_off_bus"]["gpu"])]["xids"] == {"79": 1}
    ecc = rows[(hit["ecc_burst"]["node"], hit["ecc_burst"]["gpu"])]["conditions"]
    assert set(ecc) == {"gpu_ecc_uncorrected", "gpu_row_remap_pending"}
    hot = rows[(hit["thermal_slowdown"]["node"], hit["thermal_slowdown"]["gpu"])]
    # within 11:00-11:40, while a job ran on it and past the rule's hold
    assert 0 < hot["throttled_gpu_hours"] <= 40 / 60
    [reaction] = health["reactions"]
    assert reaction["node"] == hit["gpu_off_bus"]["node"] and reaction["jobs_placed"]
    markdown = (demo.out / "reports" / f"daily-{MONDAY}.md").read_text(encoding="utf-8")
    assert "## GPU and node health" in markdown


def test_the_days_summary_shows_sm_activity_beside_utilisation(demo: Demo):
    """The simulated H200s report GPM: the GPU-busy probe's SM activity is what its GPUs
    said (its burner fills every SM), the tenants' training jobs' well under their
    utilisation; every GPU has GPM, so none is named as not supporting it."""
    daily = _json(demo.out / "reports" / f"daily-{MONDAY}.json")
    gpu = daily["gpu"]
    busy, busy_sm = gpu["by_task"]["gpu-busy"], gpu["sm_by_task"]["gpu-busy"]
    assert busy["samples"] > 0 and busy_sm["samples"] > 0
    assert busy_sm["p50_percent"] == round(100 * BUSY_PROBE_ACTIVITY.sm_active_ratio)
    assert busy["p50_percent"] > busy_sm["p50_percent"]
    job, job_sm = gpu["by_task"]["job"], gpu["sm_by_task"]["job"]
    assert job_sm["p50_percent"] == round(100 * TRAINING_ACTIVITY.sm_active_ratio)
    assert job["p50_percent"] > job_sm["p50_percent"]
    assert gpu["gpm_not_supported_nodes"] == []
    assert daily["gpu_sm_active_avg"] is not None
    markdown = (demo.out / "reports" / f"daily-{MONDAY}.md").read_text(encoding="utf-8")
    assert "SM active (avg)" in markdown


def test_it_says_its_settings_and_writes_them_as_a_valid_config(demo: Demo):
    assert "fairness persistence 2 of 3 windows" in demo.stderr
    assert "timezone Asia/Shanghai" in demo.stderr
    config = demo.out / "observer.yaml"
    assert f"--config {config}" in demo.stdout
    checked = run_cli("check-config", str(config))
    assert checked.exit_code == 0, checked.stderr


def test_its_config_rebuilds_the_days_summary_byte_for_byte(demo: Demo):
    paths = [demo.out / "reports" / f"daily-{MONDAY}.{s}" for s in ("md", "html", "json", "csv")]
    written = [path.read_bytes() for path in paths]
    rebuilt = run_cli(
        "report", "daily", "--config", str(demo.out / "observer.yaml"), "--date", MONDAY
    )
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert [path.read_bytes() for path in paths] == written


def test_its_config_rebuilds_the_verdict_byte_for_byte_days_later(demo: Demo):
    """The soak's end is in the written settings: a verdict built now, days after the
    simulated soak, counts none of the days since as blind."""
    paths = [demo.out / "reports" / f"verdict-{MONDAY}.{s}" for s in ("md", "html", "json")]
    written = [path.read_bytes() for path in paths]
    rebuilt = run_cli("report", "verdict", "--config", str(demo.out / "observer.yaml"))
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert [path.read_bytes() for path in paths] == written


def test_the_reports_name_every_finding_the_store_holds(demo: Demo):
    with Store(f"sqlite:///{demo.out / 'observer.db'}") as store:
        stored = {(f.detector, tuple(sorted(f.subject.items()))) for f in store.findings()}
    daily = _json(demo.out / "reports" / f"daily-{MONDAY}.json")
    reported = {
        (item["detector"], tuple(sorted(item["subject"].items())))
        for item in daily["findings"]["items"]
    }
    assert stored == reported
    assert {d for d, _ in reported} >= {
        "persistent_unfairness",
        "unreleased_memory",
        "probe_unreleased",
        "stuck_terminating",
        "log_loss",
        "monitoring_lag",
        "gpu_xid",
        "gpu_lost",
        "unhealthy_gpu_in_service",
        "gpu_ecc_uncorrected",
        "gpu_row_remap_pending",
        "gpu_clock_slowdown",
    }


def test_the_verdict_fails_what_was_injected_and_passes_the_rest(demo: Demo):
    verdict = _json(demo.out / "reports" / f"verdict-{MONDAY}.json")
    status = {c["criterion"]: c["status"] for c in verdict["criteria"]}
    for failed in (
        "no_unreleased_resources",
        "no_log_loss",
        "monitoring_lag_bound",
        "no_persistent_unfairness",
        "gpu_health",
    ):
        assert status[failed] == "fail", failed
    for passed in (
        "queue_explainable",
        "failure_evidence",
        "tenant_isolation",
        "quota_enforced",
    ):
        assert status[passed] == "pass", passed
    assert verdict["recommendation"] == "no_go"


def _chinese(demo: Demo) -> tuple[DailyReport, Verdict, set[str]]:
    """The demo's day and verdict built again from its store, in Chinese, and the names
    its reports give (tenants, windows, probes, detectors, what the findings concern)."""
    settings = load_settings(demo.out / "observer.yaml", {"reports": {"language": "zh-CN"}})
    monday = date.fromisoformat(MONDAY)
    now = datetime.combine(monday + timedelta(days=1), time(0), ZoneInfo("Asia/Shanghai"))
    with Store(f"sqlite:///{demo.out / 'observer.db'}") as store:
        daily = build_daily(load_daily(store, settings, monday, now))
        verdict = build_verdict(load_verdict(store, settings, now))
        findings = store.findings()
    c = settings.controller
    names = {t.name for t in c.tenants} | {w.name for w in c.windows} | {p.probe for p in c.plan}
    names |= {f.detector for f in findings} | {v for f in findings for v in f.subject.values()}
    return daily, verdict, names


@pytest.mark.parametrize("form", ["md", "html"])
def test_its_reports_in_chinese_say_nothing_in_english(demo: Demo, form: str):
    daily, verdict, names = _chinese(demo)
    items = daily.figures.findings.items
    assert len({i.detector for i in items}) >= 10
    assert all(i.sentence is not None for i in items), [i.summary for i in items]
    left = {
        phrase
        for r in (render_daily(daily, "zh-CN"), render_verdict(verdict, "zh-CN"))
        for phrase in english_left(r.markdown if form == "md" else r.html, form, names)
    }
    assert not left, sorted(left)


@pytest.mark.parametrize("form", ["md", "html"])
def test_one_english_finding_left_in_its_chinese_summary_is_caught(demo: Demo, form: str):
    daily, _, names = _chinese(demo)
    findings = daily.figures.findings
    first, *rest = findings.items
    # A finding without a sentence of its own: the summary falls back to its stored English.
    items = (replace(first, sentence=None), *rest)
    bad = replace(daily, figures=replace(daily.figures, findings=replace(findings, items=items)))

    rendered = render_daily(bad, "zh-CN")
    left = english_left(rendered.markdown if form == "md" else rendered.html, form, names)

    assert left
    assert all(phrase in first.summary for phrase in left), left


def test_its_console_speaks_the_language_of_its_reports(demo: Demo, tmp_path: Path):
    with Store(f"sqlite:///{demo.out / 'observer.db'}") as store:
        findings = store.findings()
    names = {f.detector for f in findings} | {v for f in findings for v in f.subject.values()}
    said = {}
    for language in ("en", "zh-CN"):
        scenario = load_scenario(None, tmp_path, language, start=date.fromisoformat(MONDAY))
        # No fault declared: every finding is one no injected fault explains.
        result = DemoResult(
            scenario, [demo.out / "reports" / "verdict.md"], tmp_path, score([], findings), tmp_path
        )
        said[language] = "\n".join([*describe(scenario, words(scenario)), summary(result)])
        names |= {scenario.spec.name, *(p.probe for p in scenario.settings.controller.plan)}
    assert "Findings no injected fault explains:" in said["en"]
    assert "没有注入故障可以解释的发现：" in said["zh-CN"]
    assert all(f"{f.detector} " in said["en"] for f in findings)
    chinese = Words("zh-CN", ZoneInfo("Asia/Shanghai"))
    assert all(chinese.detector(f.detector) in said["zh-CN"] for f in findings)
    assert "fairness persistence 2 of 3 windows" in said["en"]
    assert "公平性持续判定：3 个窗口中 2 个" in said["zh-CN"]
    # The command that rebuilds a report is code, in either language.
    lines = [line for line in said["zh-CN"].splitlines() if "observer report" not in line]
    assert english_left("\n".join(lines), "md", names) == []
