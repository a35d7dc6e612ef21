"""A scenario file is validated like the settings: every problem one 'field.path: problem'
line, exit 2, nothing run; a valid one is what the demo plays, the packaged default too."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import get_args

import pytest
import yaml

from observer.demo.faults import KINDS
from observer.demo.scenario import DEFAULT, load_scenario
from observer.errors import ConfigError
from tests.support.cli import CliResult, run_cli

BENCH = Path(__file__).parents[2] / "bench" / "scenarios"


def _demo(*args: str, cwd: Path) -> CliResult:
    return run_cli("demo", "--port", "0", *args, cwd=cwd)


def test_a_scenario_with_errors_is_refused_with_one_line_per_problem(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        """
name: bad
start: 2026-11-30
days: 2
platform: {nodes: 4}
faults:
  - {kind: unfair_schedulr, favoured: prod, at: "2026-11-30 01:50", until: "2026-12-01 12:05"}
  - {kind: agent_down, node: node-009, at: "2026-11-30 03:00", until: "2026-11-30 02:45"}
  - {kind: prometheus_stall, at: "2026-12-05 03:00", until: "2026-12-05 04:00"}
  - {kind: stuck_terminating, tenant: nobody, at: "2026-11-30 10:00"}
  - {kind: log_loss, at: "10:00", secs: 3}
""",
        encoding="utf-8",
    )
    result = _demo("--scenario", str(bad), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "faults.0.kind: unknown fault kind 'unfair_schedulr'",
        "faults.1.until: must be after at (2026-11-30 03:00)",
        "faults.1.node: no node 'node-009' (the platform has node-000 to node-003)",
        "faults.2.at: 2026-12-05 03:00 is outside the scenario's days (2026-11-30 to 2026-12-01)",
        "faults.2.until: 2026-12-05 04:00 is outside the scenario's days "
        "(2026-11-30 to 2026-12-01)",
        "faults.3.until: is required for stuck_terminating",
        "faults.3.tenant: no tenant 'nobody' (batch, prod, research)",
        "faults.4.at: must be a local time \"YYYY-MM-DD HH:MM\", not '10:00'",
        "faults.4.secs: unknown key for log_loss",
    ]
    assert not (tmp_path / "out" / "observer.db").exists()


def test_a_fault_may_last_until_the_end_of_the_last_day_and_not_a_minute_more(tmp_path: Path):
    scenario = tmp_path / "s.yaml"
    faults = [
        '{kind: prometheus_stall, at: "2026-11-30 23:00", until: "2026-12-01 00:00"}',
        '{kind: prometheus_stall, at: "2026-11-30 23:30", until: "2026-12-01 00:01"}',
    ]
    scenario.write_text(
        "name: x\nstart: 2026-11-30\ndays: 1\nfaults:\n" + "".join(f"  - {f}\n" for f in faults),
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as refused:
        load_scenario(scenario, tmp_path, "en")
    assert refused.value.problems == [
        "faults.1.until: 2026-12-01 00:01 is outside the scenario's days (2026-11-30 to 2026-11-30)"
    ]


def test_a_settings_problem_is_named_below_settings(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nstart: 2026-11-30\nsettings: {controller: {follow_interval_seconds: 0}}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as refused:
        load_scenario(bad, tmp_path, "en")
    assert refused.value.problems == [
        "settings.controller.follow_interval_seconds: must be greater than 0"
    ]


def test_a_scenario_file_that_is_not_one_says_so(tmp_path: Path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    result = _demo("--scenario", str(empty), cwd=tmp_path)
    assert (result.exit_code, result.stderr.strip()) == (
        2,
        f"{empty}: empty, no scenario keys in it",
    )


def test_the_packaged_default_moves_with_its_start(tmp_path: Path):
    as_filed = load_scenario(None, tmp_path, "en")
    moved = load_scenario(None, tmp_path, "en", start=date(2026, 12, 7))
    assert as_filed.spec.start == date(2026, 11, 23) and moved.spec.start == date(2026, 12, 7)
    assert [f.at - as_filed.faults[0].at for f in as_filed.faults] == [
        f.at - moved.faults[0].at for f in moved.faults
    ]
    assert moved.faults[0].at == datetime(2026, 12, 7, 1, 50)
    assert moved.start.isoformat() == "2026-12-07T00:00:00+08:00"
    assert {f.kind for f in as_filed.faults} >= {"gpu_off_bus", "ecc_burst", "thermal_slowdown"}


def test_its_settings_are_the_ones_the_daemon_accepts(tmp_path: Path):
    scenario = load_scenario(DEFAULT, tmp_path, "zh-CN")
    config = tmp_path / "observer.yaml"
    config.write_text(yaml.safe_dump(scenario.tree), encoding="utf-8")
    checked = run_cli("check-config", str(config))
    assert checked.exit_code == 0, checked.stderr
    assert scenario.settings.reports.language == "zh-CN"


def test_the_bench_rehearsals_use_every_fault_kind_three_times(tmp_path: Path):
    counts = dict.fromkeys((get_args(k.model_fields["kind"].annotation)[0] for k in KINDS), 0)
    days = []
    for path in sorted(BENCH.glob("*.yaml")):
        scenario = load_scenario(path, tmp_path, "en")
        days.append(scenario.spec.days)
        for fault in scenario.faults:
            counts[fault.kind] += 1
    assert min(days) >= 2
    assert {kind: n for kind, n in counts.items() if n < 3} == {}


def _readme_section() -> str:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    return readme.split("### Scenario files", 1)[1].split("\n## ", 1)[0]


def test_the_readmes_example_is_a_scenario_the_demo_accepts(tmp_path: Path):
    example = _readme_section().split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.yaml"
    path.write_text(example, encoding="utf-8")
    scenario = load_scenario(path, tmp_path, "en")
    assert scenario.spec.days == 2
    assert [f.kind for f in scenario.faults] == [
        "unfair_scheduler",
        "gpu_off_bus",
        "prometheus_blip",
    ]


def test_the_readme_lists_every_fault_kind_and_whether_it_must_produce_nothing():
    rows = {
        cells[1].strip("` "): cells[4].strip()
        for line in _readme_section().splitlines()
        if line.startswith("| `") and len(cells := line.split("|")) > 4
    }
    kinds = {get_args(k.model_fields["kind"].annotation)[0]: k for k in KINDS}
    assert set(rows) == set(kinds)
    for kind, must in rows.items():
        assert must.startswith("nothing") == kinds[kind].confounder, kind


OWN_NAMES = """
name: own windows and tenants
start: 2026-11-30
settings:
  controller:
    windows:
      - {name: morning, days: '*', start: '08:00', end: '09:00'}
      - {name: evening, days: mon-fri, start: '20:00', end: '22:00'}
    tenants:
      - {name: vision, weight: 0.6}
      - {name: speech, weight: 0.4, quota_gpus: 4}
faults:
  - {kind: stuck_terminating, tenant: speech, at: "2026-11-30 20:10", until: "2026-11-30 21:00"}
  - {kind: prometheus_blip, at: "2026-11-30 08:30"}
"""


def test_a_scenario_naming_its_own_windows_and_tenants_gets_the_default_plan_over_them(
    tmp_path: Path,
):
    path = tmp_path / "own.yaml"
    path.write_text(OWN_NAMES, encoding="utf-8")

    plan = load_scenario(path, tmp_path, "en").settings.controller.plan

    # The packaged default's plan, its first window, last window and quota tenant renamed.
    default = load_scenario(None, tmp_path, "en").settings.controller.plan
    windows = {"weekday-peak": "morning", "night": "evening"}
    assert [(e.window, e.probe, e.every_seconds, e.tenants) for e in plan] == [
        (windows[e.window], e.probe, e.every_seconds, ["speech"] if e.tenants else [])
        for e in default
    ]


def test_demo_check_prints_what_would_be_played_and_plays_nothing(tmp_path: Path):
    path = tmp_path / "own.yaml"
    path.write_text(OWN_NAMES, encoding="utf-8")
    out = tmp_path / "out"

    result = _demo("--scenario", str(path), "--out", str(out), "--check", cwd=tmp_path)

    assert (result.exit_code, result.stderr) == (0, "")
    head, *lines = result.stdout.splitlines()
    assert head == f"{path}: valid; it would play (not played with --check):"
    said = "\n".join(lines)
    assert "1 day(s) from 2026-11-30" in said
    assert "windows morning * 08:00-09:00, evening mon-fri 20:00-22:00" in said
    assert "tenants vision weight 0.6, speech weight 0.4 quota 4 GPUs" in said
    scenario = load_scenario(path, out, "en")
    entries = [line for line in lines if line.startswith("  plan.")]
    assert len(entries) == len(scenario.settings.controller.plan)
    assert entries[0] == "  plan.0: window morning, probe quota, every_seconds 3600, tenants speech"
    assert [line for line in lines if line.startswith("  faults.")] == [
        "  faults.0: stuck_terminating (tenant speech) at 2026-11-30 20:10 until 2026-11-30 21:00",
        "  faults.1: prometheus_blip (seconds 20) at 2026-11-30 08:30",
    ]
    assert not out.exists()


def test_demo_check_refuses_a_bad_scenario_with_its_lines_and_the_config_error_status(
    tmp_path: Path,
):
    path = tmp_path / "bad.yaml"
    path.write_text(
        OWN_NAMES.replace("tenant: speech", "tenant: audio").replace("08:30", "25:30"),
        encoding="utf-8",
    )

    result = _demo("--scenario", str(path), "--out", str(tmp_path / "out"), "--check", cwd=tmp_path)

    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "faults.0.tenant: no tenant 'audio' (speech, vision)",
        "faults.1.at: must be a local time \"YYYY-MM-DD HH:MM\", not '2026-11-30 25:30'",
    ]
    assert not (tmp_path / "out").exists()
