"""The PrometheusRule's alerts: valid for promtool, each with its severity and runbook, each
unit-tested firing and not firing (alerts_test.yaml), and reading only exported metrics."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import (
    CHART,
    alerts,
    is_known_metric,
    promql_metric_names,
    render,
    rule_groups,
    run,
    tool,
)

UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")
SEVERITIES = {"critical", "warning", "info"}


@pytest.fixture(scope="module")
def rule_objects() -> list[dict[str, Any]]:
    return render(tool("helm"), sets={"prometheusRule.enabled": "true"})


@pytest.fixture(scope="module")
def promtool() -> Path:
    return tool("promtool")


def test_rendered_rules_pass_promtool_check(rule_objects, promtool: Path, tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups(rule_objects)}, sort_keys=False))
    result = run(promtool, "check", "rules", rules)
    assert "SUCCESS" in result.stdout + result.stderr


def test_rule_source_file_passes_promtool_check(promtool: Path):
    run(promtool, "check", "rules", CHART / "files" / "alerts.yaml")


def test_alerts_fire_and_stay_quiet_as_specified(rule_objects, promtool: Path, tmp_path: Path):
    groups = copy.deepcopy(rule_groups(rule_objects))
    for group in groups:
        for rule in group["rules"]:
            rule["annotations"] = {
                k: v for k, v in rule["annotations"].items() if k not in ("runbook", "runbook_url")
            }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    result = run(promtool, "test", "rules", tmp_path / UNIT_TESTS.name, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_every_alert_is_unit_tested_both_ways(rule_objects):
    spec = yaml.safe_load(UNIT_TESTS.read_text())
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in spec["tests"]:
        for check in case["alert_rule_test"]:
            (fires if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {a["alert"] for a in alerts(rule_objects)}
    assert names - fires == set(), "alerts never seen firing"
    assert names - quiet == set(), "alerts never seen staying quiet"


def test_every_alert_has_a_severity_summary_and_runbook(rule_objects):
    names = [a["alert"] for a in alerts(rule_objects)]
    assert len(names) == len(set(names))
    for alert in alerts(rule_objects):
        assert alert["alert"].startswith("Observer"), alert["alert"]
        assert alert["labels"]["severity"] in SEVERITIES, alert["alert"]
        for key in ("summary", "description", "runbook"):
            assert alert["annotations"].get(key, "").strip(), (alert["alert"], key)
    # the list: a finding by severity, unfairness, log loss, lag, down or blind,
    # probes failing
    for required in (
        "ObserverCriticalFindingOpen",
        "ObserverWarningFindingOpen",
        "ObserverPersistentUnfairness",
        "ObserverLogLoss",
        "ObserverMonitoringLag",
        "ObserverAgentDown",
        "ObserverControllerDown",
        "ObserverAgentBlind",
        "ObserverControllerBlind",
        "ObserverProbesFailing",
    ):
        assert required in names, required


def test_every_alert_has_a_runbook_section(rule_objects):
    runbook = (CHART / "RUNBOOK.md").read_text()
    sections = set(re.findall(r"^## (\w+)$", runbook, re.MULTILINE))
    assert sections == {a["alert"] for a in alerts(rule_objects)}


def test_alerts_read_only_exported_metrics(rule_objects):
    unknown = {
        (alert["alert"], name)
        for alert in alerts(rule_objects)
        for name in promql_metric_names(alert["expr"])
        if not is_known_metric(name)
    }
    assert not unknown, f"not in `observer metrics list`: {sorted(unknown)}"


def test_disabled_alerts_are_left_out():
    objects = render(
        tool("helm"),
        sets={
            "prometheusRule.enabled": "true",
            "prometheusRule.disabledAlerts": "{ObserverGpuLost,ObserverAgentsAbsent}",
        },
    )
    names = {a["alert"] for a in alerts(objects)}
    assert not {"ObserverGpuLost", "ObserverAgentsAbsent"} & names
    assert "ObserverAgentBlind" in names
