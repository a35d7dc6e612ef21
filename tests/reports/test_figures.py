"""A day's figures from hand-made data: what counts as failed and how failures group, queue
waits and their percentiles, GPU use per pool and window, alerts, findings per detector and
the observer's blind time; and what was not observed says so instead of reading 0."""

from __future__ import annotations

from datetime import timedelta

import pytest

from observer.domain import Expectation, FindingKind, Outcome, Severity
from observer.records import (
    ControllerRun,
    InterventionSource,
    StoredAlert,
    StoredDelivery,
    StoredIntervention,
    StoredNodeChange,
)
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import (
    Period,
    PeriodData,
    UtilizationHistogram,
    allocation,
    gpu_usage,
)
from observer.reports.compute.events import scheduler_gaps
from observer.reports.compute.figures import period_figures
from observer.reports.compute.notes import Note
from observer.reports.compute.queues import wait_stats
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language
from tests.reports.builders import CALENDAR, DAY, at, context, finding, gpu, node, queue, run


def _figures(data: PeriodData, **ctx: bool):
    return period_figures(
        data, context(**ctx), intervention_match_seconds=3600, layer_blind_max_share=0.1
    )


def test_failed_tasks_are_those_that_did_not_end_as_expected_grouped_by_reason():
    runs = [
        run(),
        run(
            "fail-exit",
            outcome=Outcome.PASSED,
            reason="NonZeroExitCode",
            exit_code=3,
            expectation=Expectation.FAIL,
        ),  # an expected failure, as expected: not failed
        run(outcome=Outcome.FAILED, reason="NodeFailure", message="node n2 lost"),
        run(tenant="prod", outcome=Outcome.FAILED, reason="NodeFailure", message="node n3 lost"),
        run(outcome=Outcome.TIMED_OUT, reason="QuotaExceeded", wait_seconds=None),
        run(outcome=Outcome.REJECTED, reason="Rejected", wait_seconds=None),
        run(outcome=Outcome.CANCELLED, reason="ControllerShutdown"),
        run(outcome=None),
    ]
    tasks = _figures(PeriodData(DAY, runs=runs)).tasks
    assert (tasks.total, tasks.passed, tasks.failed, tasks.cancelled, tasks.unfinished) == (
        8,
        2,
        4,
        1,
        1,
    )
    first, *rest = tasks.failure_groups
    assert (first.cause, first.outcome, first.reason, first.count) == (
        "node",
        "failed",
        "NodeFailure",
        2,
    )
    assert first.tenants == ("prod", "research")
    # Every distinct explanation of the group, each with its runs: not the first message only.
    assert [(e.explanation, e.tenants) for e in first.explanations] == [
        (Note("why.platform", {"words": "NodeFailure — node n2 lost"}), ("research",)),
        (Note("why.platform", {"words": "NodeFailure — node n3 lost"}), ("prod",)),
    ]
    # In the order of the causes: the platform's scheduling, then its configuration.
    assert [(g.cause, g.outcome, g.reason) for g in rest] == [
        ("scheduling", "timed_out", "QuotaExceeded"),
        ("platform_configuration", "rejected", "Rejected"),
    ]


def test_queue_waits_overall_per_tenant_window_and_probe_kind():
    runs = [
        run(wait_seconds=s, tenant=t, window=w, probe=p)
        for s, t, w, p in [
            (0, "research", "weekday-peak", "short"),
            (10, "research", "weekday-peak", "short"),
            (20, "prod", "weekday-peak", "short"),
            (600, "prod", "night", "long"),
        ]
    ] + [run(wait_seconds=None, outcome=Outcome.REJECTED, reason="Rejected")]
    queue_figures = _figures(PeriodData(DAY, runs=runs)).queue
    overall = queue_figures.overall
    assert (overall.runs, overall.avg_seconds, overall.p50_seconds, overall.p95_seconds) == (
        4,
        157.5,
        10.0,
        600.0,
    )
    assert queue_figures.by_tenant["prod"].avg_seconds == 310.0
    assert queue_figures.by_window["night"].max_seconds == 600.0
    assert queue_figures.by_probe["short"].runs == 3
    assert queue_figures.never_started == 1


def test_nearest_rank_percentiles():
    stats = wait_stats(float(i) for i in range(1, 21))
    assert (stats.p50_seconds, stats.p95_seconds, stats.max_seconds) == (10.0, 19.0, 20.0)
    assert wait_stats([]).avg_seconds is None


def test_gpu_utilisation_per_pool_window_and_hour_with_allocated_against_used():
    samples = [
        gpu("n1", at(10), 80),
        gpu("n1", at(10), 0, index=1),  # peak, pool a
        gpu("n2", at(10), 40),  # peak, pool b
        gpu("n1", at(23), 100),
        gpu("n1", at(23), None, index=1),  # night, one unread
    ]
    usage = gpu_usage(samples, {"n1": "a", "n2": "b"}, CALENDAR)
    # n1: 4 of its 8 GPUs allocated all day; n2: 8 of 8 from noon.
    nodes_at_start = [node("n1", "a", 8, 4), node("n2", "b", 8, 0, "idle")]
    changes = [StoredNodeChange(at(12), node("n2", "b", 8, 8, "allocated"))]
    data = PeriodData(
        DAY,
        nodes_at_start=nodes_at_start,
        node_changes=changes,
        gpu=usage,
        allocation=allocation(DAY, nodes_at_start, changes, CALENDAR),
    )
    g = _figures(data).gpu
    assert g.observed
    assert g.overall is not None and g.overall.samples == 4 and g.overall.avg_percent == 55.0
    assert g.unread_samples == 1
    assert g.by_pool["a"].allocated_share == 0.5
    assert g.by_pool["a"].used_share == pytest.approx(2 / 3)
    assert g.by_pool["b"].allocated_share == 0.5
    assert g.by_pool["b"].gpus_avg == 8.0
    assert g.by_window["weekday-peak"].avg_percent == 40.0
    assert g.by_window["night"].avg_percent == 100.0
    assert g.by_hour["10"].samples == 3
    assert g.allocated_share_by_hour["11"] == 0.25
    assert g.allocated_share_by_hour["12"] == 0.75
    assert g.allocated_share == 0.5
    assert (g.nodes_sampled, g.nodes_known) == (2, 2)


def test_gpu_utilisation_per_tenant_whose_job_held_the_gpu_beside_its_allocation():
    samples = [
        gpu("n1", at(10), 80, tenant="research"),
        gpu("n1", at(10), 0, index=1, tenant="research"),
        gpu("n2", at(10), 40, tenant="prod"),
        gpu("n2", at(10), 0, index=1),  # no job the scheduler names: no tenant
    ]
    usage = gpu_usage(samples, {"n1": "a", "n2": "b"}, CALENDAR)
    queues = [queue(at(10), "research", running_gpus=2), queue(at(10), "prod", running_gpus=1)]
    g = _figures(PeriodData(DAY, gpu=usage, queue_samples=queues)).gpu
    assert g.tenant_samples == 3
    assert g.by_tenant["research"].avg_percent == 40.0
    assert g.by_tenant["research"].busy_share == 0.5
    assert g.by_tenant["prod"].avg_percent == 40.0
    assert g.tenant_running_gpus_avg == {"prod": 1.0, "research": 2.0}
    doubled = usage.plus(usage)
    assert doubled.by_tenant["prod"].samples == 2


def test_without_agent_samples_utilisation_is_not_observed_rather_than_zero():
    nodes = [node("n1", "a", 8, 2)]
    data = PeriodData(DAY, nodes_at_start=nodes, allocation=allocation(DAY, nodes, [], CALENDAR))
    g = _figures(data, agents=False).gpu
    assert not g.observed
    assert g.overall is None
    assert g.by_pool["a"].utilization is None and g.by_pool["a"].used_share is None
    assert g.by_pool["a"].allocated_share == 0.25  # the scheduler's side is still known


def test_histograms_of_two_days_add_up_to_the_histogram_of_both():
    a = UtilizationHistogram.of([0, 50, 100])
    b = UtilizationHistogram.of([25, 75])
    both = a.plus(b)
    assert both == UtilizationHistogram.of([0, 25, 50, 75, 100])
    assert both.mean() == 50.0 and both.percentile(0.5) == 50.0 and both.busy_share() == 0.8
    assert both.deciles() == (1, 0, 1, 0, 0, 1, 0, 1, 0, 1)


def test_alerts_that_fired_by_name_and_severity_without_the_ignored_ones():
    def alert(name: str, severity: str, minute: int) -> StoredAlert:
        return StoredAlert(f"f{name}{minute}", name, severity, at(10, minute), None, at(10, 59), {})

    data = PeriodData(
        DAY,
        alerts=[
            alert("GPUDown", "critical", 1),
            alert("GPUDown", "critical", 30),
            alert("SlowQueue", "warning", 5),
            alert("Watchdog", "none", 0),
        ],
    )
    alerts = _figures(data).alerts
    assert alerts.total == 3
    assert [(a.name, a.severity, a.count) for a in alerts.by_name] == [
        ("GPUDown", "critical", 2),
        ("SlowQueue", "warning", 1),
    ]
    assert _figures(data, alertmanager=False).alerts.total is None


def test_findings_opened_closed_and_still_open_that_day_per_detector():
    before = DAY.start - timedelta(hours=3)
    findings = [
        finding("unreleased_memory", at(3), None),  # opened, still open
        finding("unreleased_memory", at(4), at(5), node="n2"),  # opened and closed
        finding("allocated_idle", before, at(6)),  # closed that day
        finding("gpu_lost", before, None),  # open all day
        finding(
            "log_loss",
            at(7),
            at(7),
            kind=FindingKind.EVENT,
            severity=Severity.CRITICAL,
            run_id="r1",
        ),
        finding("gpu_lost", at(2) + timedelta(days=1), None, node="n9"),  # the next day
    ]
    f = _figures(PeriodData(DAY, findings=findings)).findings
    assert (f.opened, f.closed, f.still_open, f.events, f.critical) == (2, 2, 2, 1, 1)
    assert f.by_detector["unreleased_memory"].opened == 2
    assert f.by_detector["unreleased_memory"].still_open == 1
    assert f.by_detector["allocated_idle"].closed == 1
    assert f.by_detector["gpu_lost"].still_open == 1
    statuses = sorted(i.status for i in f.items)
    assert statuses == ["closed", "event", "open", "opened", "opened_closed"]
    assert all(i.evidence == {"rule": "a rule", "seen": [1, 2]} for i in f.items)


def test_blind_time_is_the_union_of_what_the_observer_could_not_see():
    findings = [
        finding("agent_unreachable", at(1), at(2), agent="n1"),
        finding("agent_unreachable", at(1, 30), at(2, 30), agent="n2"),  # overlaps n1
        finding("nvml_unavailable", at(23), None, node="n3"),  # open at the day's end
        finding("prometheus_unreachable", at(5), at(5, 10), pipeline="prometheus"),
        finding("unreleased_memory", at(1), at(9)),  # not blindness
    ]
    snapshots = [at(0) + timedelta(seconds=30 * i) for i in range(2 * 60 * 24)]
    snapshots = [s for s in snapshots if not at(12) < s < at(13)]  # an hour without
    data = PeriodData(
        DAY, findings=findings, queue_samples=[queue(s, "research") for s in snapshots]
    )
    b = _figures(data).blind
    assert b.by_source["agents"] == 90 * 60
    assert b.by_source["nvml"] == 60 * 60
    assert b.by_source["prometheus"] == 10 * 60
    assert b.by_source["scheduler"] == 60 * 60
    assert b.total_seconds == (90 + 60 + 10 + 60) * 60
    # Prometheus and the scheduler blind the whole fleet; each of the three nodes out for an
    # hour is a third of the fleet for that hour.
    assert b.share == pytest.approx((10 + 60 + 3 * 60 / 3) * 60 / 86400)
    assert b.by_source["logs"] == 0
    assert b.scheduler_gap_seconds == 90


def test_a_lost_gpu_blinds_its_node_not_the_fleet():
    lost = finding("gpu_lost", at(10), at(16), node="n1", gpu="0")
    samples = [gpu(f"n{i}", at(9), 50) for i in range(1, 7)]
    snapshots = [queue(at(0) + timedelta(seconds=30 * i), "research") for i in range(2 * 60 * 24)]
    data = PeriodData(
        DAY, findings=[lost], queue_samples=snapshots, gpu=gpu_usage(samples, {}, CALENDAR)
    )
    b = _figures(data).blind
    assert (b.total_seconds, b.by_source["nvml"]) == (6 * 3600, 6 * 3600)
    assert b.share == pytest.approx(3600 / 86400)  # one node of six for six hours


def test_alertmanager_unreadable_is_blind_time_of_the_alerts():
    findings = [finding("alertmanager_unreachable", at(3), at(3, 20), source="alertmanager")]
    b = _figures(PeriodData(DAY, findings=findings)).blind
    assert b.by_source["alerts"] == 20 * 60
    assert [(p.source, p.start, p.end) for p in b.periods if p.source == "alerts"] == [
        ("alerts", at(3), at(3, 20))
    ]


def test_an_accounting_outage_is_blind_time_of_the_accounting_alone():
    findings = [finding("accounting_unreachable", at(3), at(3, 20), accounting="slurm")]
    b = _figures(PeriodData(DAY, findings=findings)).blind
    assert b.by_source["accounting"] == 20 * 60
    assert [(p.source, p.start, p.end) for p in b.periods if p.source == "accounting"] == [
        ("accounting", at(3), at(3, 20))
    ]
    assert b.by_source["store"] == 0


def test_a_scheduler_showing_only_the_observers_own_jobs_is_blind_time_of_the_scheduler():
    findings = [finding("scheduler_partly_visible", at(3), at(5), scheduler="slurm")]
    b = _figures(PeriodData(DAY, findings=findings)).blind
    hidden = [p for p in b.periods if p.cause == "scheduler_partly_visible"]
    assert [(p.source, p.start, p.end) for p in hidden] == [("scheduler", at(3), at(5))]


def test_a_source_not_set_up_is_named_never_counted_healthy():
    b = _figures(
        PeriodData(DAY), agents=False, prometheus=False, logs=False, alertmanager=False
    ).blind
    assert b.not_set_up == ("agents", "nvml", "xid", "prometheus", "logs", "alerts")
    # always set up: every backend lists finished jobs and quota changes
    assert set(b.by_source) == {"controller", "store", "scheduler", "accounting"}
    assert b.by_source["scheduler"] == 86400  # no snapshot at all: blind all day


def test_a_source_is_set_up_as_the_controller_runs_recorded_it_whatever_the_settings_say():
    """The demo's in-process Prometheus has no URL; a fault-free day read through it has no
    finding to show it was there: the controller's run says it was."""
    runs = [ControllerRun(1, at(0), at(23, 59), "host", 7, watching=("agents", "prometheus"))]

    b = _figures(PeriodData(DAY, controller_runs=runs), prometheus=False, logs=True).blind

    assert b.not_set_up == ("logs", "alerts")  # the run read neither, whatever the settings
    assert b.by_source["prometheus"] == 0


def test_a_source_only_some_controller_runs_read_is_blind_while_the_others_ran():
    runs = [
        ControllerRun(1, at(0), at(6), "host", 7, stopped_at=at(6), watching=("agents",)),
        ControllerRun(2, at(6), at(23, 59), "host", 8, watching=("agents", "prometheus")),
    ]

    b = _figures(PeriodData(DAY, controller_runs=runs), prometheus=False).blind

    assert "prometheus" not in b.not_set_up
    assert [(p.start, p.end, p.cause) for p in b.periods if p.source == "prometheus"] == [
        (at(0), at(6), "not_set_up")
    ]
    assert b.by_source["prometheus"] == 6 * 3600


def test_a_monitoring_lag_finding_does_not_make_prometheus_set_up():
    stall = finding("monitoring_lag", at(14), at(14, 20), pipeline="prometheus", check="heartbeat")

    b = _figures(PeriodData(DAY, findings=[stall]), prometheus=False).blind

    assert "prometheus" in b.not_set_up


def test_scheduler_gaps_count_whole_from_the_last_snapshot_seen():
    gaps = scheduler_gaps([at(0, 0, 10), at(0, 1), at(0, 9)], at(0), at(0, 10), 90)
    assert [(g.start, g.end) for g in gaps] == [(at(0, 1), at(0, 9))]


def test_recorded_and_detected_interventions_and_their_audit():
    nodes = [node("n1", "a", 8, 0, "idle")]
    changes = [
        StoredNodeChange(at(10), node("n1", "a", 8, 0, "drained", "swap PSU")),
        StoredNodeChange(at(14), node("n1", "a", 8, 0, "idle")),
    ]
    recorded = [StoredIntervention(at(9, 45), "alice", "PSU swap", {"node": "n1"})]
    cancelled = run(outcome=Outcome.CANCELLED, reason="Cancelled", submitted=at(11))
    data = PeriodData(
        DAY, runs=[cancelled], nodes_at_start=nodes, node_changes=changes, interventions=recorded
    )
    i = _figures(data).interventions
    # The record audits the drain and its resume: it is theirs, not a fourth intervention.
    assert (i.total, i.recorded, i.detected, i.unaudited) == (3, 1, 3, 1)
    assert [(x.source, x.action, x.audited_by) for x in i.items] == [
        ("detected", "drain", "alice"),
        ("detected", "job_cancelled", None),
        ("detected", "resume", "alice"),  # the end of the recorded maintenance
    ]


def test_a_record_that_audits_nothing_detected_is_an_intervention_of_its_own():
    recorded = [StoredIntervention(at(9), "bob", "firmware update", {"node": "n7"})]
    i = _figures(PeriodData(DAY, interventions=recorded)).interventions
    assert (i.total, [x.source for x in i.items]) == (1, [InterventionSource.RECORDED.value])


def test_deliveries_made_in_the_day_and_each_that_failed():
    deliveries = [
        StoredDelivery(at(8), "daily-2026-11-30", "directory", "full", 1, "wrote it"),
        StoredDelivery(at(8), "daily-2026-11-30", "wecom", "summary", 1, "summary and link"),
        StoredDelivery(at(8, 1), "daily-2026-11-30", "slack", "failed", 4, "HTTP 500 (gave up)"),
    ]
    d = _figures(PeriodData(DAY, deliveries=deliveries)).deliveries
    assert (d.total, d.failed) == (3, 1)
    [failure] = d.failures
    assert (failure.report, failure.channel, failure.attempts) == ("daily-2026-11-30", "slack", 4)
    assert failure.detail == "HTTP 500 (gave up)"


def test_the_daily_report_puts_the_previous_day_and_the_soak_beside_the_day():
    yesterday = Period(DAY.start - timedelta(days=1), DAY.start)
    soak = Period(yesterday.start, DAY.end)
    old, new = run(submitted=yesterday.start + timedelta(hours=10)), run()
    report = build_daily(
        DailyInputs(
            context=context(),
            day=DAY.start.date(),
            data=PeriodData(DAY, runs=[new]),
            previous=PeriodData(yesterday, runs=[old, run(outcome=Outcome.LOST, reason="Gone")]),
            soak=PeriodData(soak, runs=[old, new]),
            intervention_match_seconds=0,
            layer_blind_max_share=0.1,
        )
    )
    assert report.timezone == "Asia/Shanghai"
    assert report.figures.tasks.total == 1
    assert report.previous_day is not None and report.previous_day.tasks.failed == 1
    assert report.soak_to_date.tasks.total == 2


def test_the_blind_table_lists_every_source_each_agent_and_the_causes() -> None:
    findings = [
        finding("agent_unreachable", at(1), at(2), agent="n1"),
        finding("agent_unreachable", at(3), at(3, 30), agent="n2"),
    ]
    data = PeriodData(DAY, findings=findings)  # no snapshot: the scheduler was never read
    ctx = context(prometheus=False, alertmanager=False)
    report = build_daily(
        DailyInputs(
            context=ctx,
            day=DAY.start.date(),
            data=data,
            previous=None,
            soak=data,
            intervention_match_seconds=0,
            layer_blind_max_share=0.1,
        )
    )
    assert report.figures.blind.by_agent == {"agent=n1": 3600.0, "agent=n2": 1800.0}
    markdown = render_daily(report, "en").markdown
    section = markdown.split("## Observer blind time")[1].split("\n## ")[0]
    for row in (
        "| scheduler | 1 d | — | 1 d |",
        # Two agents of two for 1 h and 30 min: 1.5 node-hours, of 2 nodes for 24 h.
        "| node agents | 1.5 node-hours, 3.1% of the fleet's node time | — | 1.5 node-hours, 3.1% "
        "of the fleet's node time |",
        "| node agents · agent=n1 | 1 h | — | 1 h |",
        "| node agents · agent=n2 | 30 min | — | 30 min |",
        "| NVML | 0 s | — | 0 s |",
        "| Prometheus | not set up | — | not set up |",
        "| log backend | 0 s | — | 0 s |",
        "| Alertmanager | not set up | — | not set up |",
    ):
        assert row in section, row
    assert "| scheduler | snapshots | snapshot_gap |" in section
    assert "| node agents | agent=n1 | agent_unreachable |" in section
    zh = render_daily(report, "zh-CN").markdown
    assert "| Prometheus | 未配置 | — | 未配置 |" in zh


def test_one_gpu_of_48_lost_for_two_hours_is_two_gpu_hours_of_the_fleets_gpu_time():
    lost = finding("gpu_lost", at(10), at(12), node="n1", gpu="3")
    nodes = [node(f"n{i}", "a", 8, 0) for i in range(1, 7)]
    samples = [gpu(f"n{i}", at(9), 50) for i in range(1, 7)]
    snapshots = [queue(at(0) + timedelta(seconds=30 * i), "research") for i in range(2 * 60 * 24)]
    data = PeriodData(
        DAY,
        findings=[lost],
        queue_samples=snapshots,
        nodes_at_start=nodes,
        gpu=gpu_usage(samples, {}, CALENDAR),
    )
    report = build_daily(
        DailyInputs(context(), DAY.start.date(), data, None, data, 0, layer_blind_max_share=0.1)
    )

    b = report.figures.blind
    gpu_share = 2 / (48 * 24)
    assert (b.by_source_part["nvml"].unit, b.by_source_part["nvml"].hours) == ("gpu", 2.0)
    assert b.by_source_share["nvml"] == pytest.approx(gpu_share)
    assert b.share == pytest.approx(gpu_share)
    assert b.everywhere_seconds == 0
    expected: dict[Language, str] = {
        "en": "2.0 GPU-hours, 0.2% of the fleet's GPU time",
        "zh-CN": "2.0 GPU·小时，占集群 GPU 时间的 0.2%",
    }
    for language, words in expected.items():
        section = render_daily(report, language).markdown.split("\n## ")
        assert sum(f"| NVML | {words} |" in s for s in section) == 1, section
