"""Findings that share a cause and a time are one incident: a Prometheus stall seen by every
check, a leak seen at the node, by the probe and by the scheduler. Counts show incidents
first, findings second."""

from __future__ import annotations

from observer.domain import FindingKind, Severity
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.compute.events import finding_figures
from observer.reports.render.daily import render_daily
from tests.reports.builders import DAY, at, context, finding
from tests.reports.test_gpu_health_daily import FELL_OFF, LOST, kept_in_service

STALL = [
    finding("monitoring_lag", at(14, minute), at(14, 20), pipeline="prometheus", check=check)
    for minute, check in enumerate(["heartbeat", "freshness", *(f"scrape:{t}" for t in range(7))])
]
LEAK = [
    finding("unreleased_memory", at(3, 2), at(3, 45), node="node-3", gpu_uuid="GPU-1", pid="7"),
    finding("probe_unreleased", at(3, 3), at(3, 45), node="node-3", run_id="r1", tenant="prod"),
    finding("stuck_terminating", at(3, 4), at(3, 45), node="node-3", job_id="j1", tenant="prod"),
]
UNFAIR = finding("persistent_unfairness", at(12), None, tenant="research")


def test_one_stall_and_one_leak_are_two_incidents_of_many_findings():
    figures = finding_figures([*STALL, *LEAK, UNFAIR], DAY.start, DAY.end)

    assert (figures.incidents_opened, figures.opened) == (3, 13)
    leak, stall = (i for i in figures.incidents if len(i.findings) > 1)  # in time order
    assert (leak.subject, leak.detectors) == (
        {"node": "node-3"},
        ("probe_unreleased", "stuck_terminating", "unreleased_memory"),
    )
    assert (stall.subject, len(stall.findings), stall.closed_at) == (
        {"pipeline": "prometheus"},
        9,
        at(14, 20),
    )


def test_the_same_pipeline_hours_apart_is_two_incidents_and_the_worst_severity_leads():
    later = finding(
        "monitoring_lag",
        at(20),
        at(20, 5),
        severity=Severity.CRITICAL,
        pipeline="prometheus",
        check="heartbeat",
    )
    event = finding(
        "prometheus_unreachable",
        at(20, 1),
        at(20, 1),
        kind=FindingKind.EVENT,
        pipeline="prometheus",
    )

    figures = finding_figures([STALL[0], later, event], DAY.start, DAY.end)

    assert [len(i.findings) for i in figures.incidents] == [1, 2]
    assert figures.incidents[1].severity == "critical"


def test_the_daily_summary_counts_incidents_before_findings():
    data = PeriodData(DAY, findings=[*STALL, *LEAK])
    report = build_daily(DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1))

    markdown = render_daily(report, "en").markdown

    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    incidents = next(i for i, r in enumerate(rows) if r.startswith("| Incidents"))
    findings = next(i for i, r in enumerate(rows) if r.startswith("| Findings opened"))
    assert incidents < findings
    assert rows[incidents].split(" | ")[1] == "2" and rows[findings].split(" | ")[1] == "12"
    assert "12 findings in 2 incidents" in markdown


def test_a_gpu_fault_and_the_node_kept_in_service_on_it_later_are_one_incident():
    kept = kept_in_service(FELL_OFF, at(3, 25))  # past the grace, long after the Xid

    figures = finding_figures([FELL_OFF, LOST, kept], DAY.start, DAY.end)

    [incident] = figures.incidents
    assert incident.detectors == ("gpu_lost", "gpu_xid", "unhealthy_gpu_in_service")
