"""The PrometheusRule's alerts: valid for promtool, each with its severity and runbook, each
unit-tested firing and not firing against the chart's render with paging off
(alerts_test.yaml) and on (alerts_paging_test.yaml), and reading only exported metrics."""

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

pytestmark = pytest.mark.chart

UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")
PAGING_UNIT_TESTS = Path(__file__).with_name("alerts_paging_test.yaml")
SEVERITIES = {"critical", "warning", "info"}
# What Prometheus expands a finding alert's severity label to: the finding's own.
FINDING_SEVERITY = "{{ $labels.severity }}"


def rendered(paging: bool) -> list[dict[str, Any]]:
    return render(
        tool("helm"),
        sets={"prometheusRule.enabled": "true", "prometheusRule.paging": str(paging).lower()},
    )


@pytest.fixture(scope="module")
def rule_objects() -> list[dict[str, Any]]:
    return render(tool("helm"), sets={"prometheusRule.enabled": "true"})


@pytest.fixture(scope="module")
def paging_rule_objects() -> list[dict[str, Any]]:
    return rendered(paging=True)


@pytest.fixture(scope="module")
def promtool() -> Path:
    return tool("promtool")


@pytest.mark.parametrize("paging", [False, True])
def test_rendered_rules_pass_promtool_check(paging: bool, promtool: Path, tmp_path: Path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups(rendered(paging))}, sort_keys=False))
    result = run(promtool, "check", "rules", rules)
    assert "SUCCESS" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("paging", "unit_tests", "rule_file"),
    [(False, UNIT_TESTS, "rules.yaml"), (True, PAGING_UNIT_TESTS, "rules-paging.yaml")],
)
def test_alerts_fire_and_stay_quiet_as_specified(
    paging: bool, unit_tests: Path, rule_file: str, promtool: Path, tmp_path: Path
):
    groups = copy.deepcopy(rule_groups(rendered(paging)))
    for group in groups:
        for rule in group["rules"]:
            rule["annotations"] = {
                k: v for k, v in rule["annotations"].items() if k not in ("runbook", "runbook_url")
            }
    (tmp_path / rule_file).write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    shutil.copy(unit_tests, tmp_path / unit_tests.name)
    result = run(promtool, "test", "rules", tmp_path / unit_tests.name, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_every_alert_has_a_for_duration(rule_objects):
    assert [a["alert"] for a in alerts(rule_objects) if not a.get("for")] == []


def test_without_paging_no_alert_pages(rule_objects):
    """Not even the observer's own health: a new install whose scrapes a NetworkPolicy drops
    reads as controller down and agents blind. The finding alerts' templated severity is
    capped too: the promtool cases show it."""
    critical = [a["alert"] for a in alerts(rule_objects) if a["labels"]["severity"] == "critical"]
    assert critical == []


def test_with_paging_the_observers_own_health_pages(paging_rule_objects):
    critical = {
        (group["name"], rule["alert"])
        for group in rule_groups(paging_rule_objects)
        for rule in group["rules"]
        if rule["labels"]["severity"] == "critical"
    }
    assert {"ObserverControllerDown", "ObserverAgentBlind", "ObserverStoreFailing"} <= {
        name for group, name in critical if group == "observer.health"
    }


def test_with_paging_finding_alerts_carry_the_findings_severity(paging_rule_objects):
    by_name = {a["alert"]: a for a in alerts(paging_rule_objects)}
    for name in (
        "ObserverCriticalFindingOpen",
        "ObserverWarningFindingOpen",
        "ObserverPersistentUnfairness",
        "ObserverUnexplainedWait",
        "ObserverLogLoss",
        "ObserverGpuUnusable",
        "ObserverMonitoringLag",
    ):
        assert by_name[name]["labels"]["severity"] == FINDING_SEVERITY, name
        assert "severity" in by_name[name]["expr"], name
    assert by_name["ObserverGpuLost"]["labels"]["severity"] == "critical"


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
        severity = alert["labels"]["severity"]
        assert severity in SEVERITIES or "$labels.severity" in severity, alert["alert"]
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
        "ObserverStoreFailing",
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


def test_maintenance_and_fraction_follow_the_values(tmp_path: Path):
    values = tmp_path / "values.yaml"
    values.write_text(
        "prometheusRule:\n  enabled: true\n  blindNodeFraction: 0.5\n"
        "  driverPods: {namespace: nvidia, pod: driver-.*}\n"
    )
    objects = render(tool("helm"), values)
    blind = next(a for a in alerts(objects) if a["alert"] == "ObserverAgentBlind")
    assert blind["expr"].rstrip().endswith("> 0.5")
    assert 'namespace="nvidia", pod=~"driver-.*"' in blind["expr"]
    assert "__" not in yaml.safe_dump(rule_groups(objects)).replace("__name__", "")


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
