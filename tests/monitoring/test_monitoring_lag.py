"""The monitoring-lag detector on hand-made views: each check stays quiet while the pipeline
keeps up and raises a symptom, with the raw readings and the rule as evidence, when it falls
behind. A failed read is never taken for health: it is its own symptom and closes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from observer.detectors.conditions import ConditionTracker, covers_all
from observer.detectors.monitoring_lag import (
    BusyProbeReading,
    FlatlineReading,
    HeartbeatReading,
    LagView,
    SeriesAge,
    covers,
    evaluate,
    first_busy,
    lag_seconds,
)
from observer.domain import Severity, Symptom, TargetHealth, TargetState
from observer.settings.detectors import MonitoringLagSettings

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
RULES = MonitoringLagSettings(
    heartbeat_max_lag_seconds=60,
    series_max_age_seconds=60,
    scrape_max_age_seconds=60,
    hold_seconds=30,
    flatline_window_seconds=300,
    busy_lag_max_seconds=60,
)
GPU = "GPU-6b3e8f1c-0d2a-4c57-9e11-7f0a2b9c4d10"


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def beat(lag_seconds: float) -> HeartbeatReading:
    """A heartbeat Prometheus scraped `lag_seconds` ago (its clock 0.2 s ahead of ours)."""
    return HeartbeatReading(value=ago(lag_seconds), scraped_at=ago(lag_seconds - 0.2))


def target(
    job: str = "observer-agent",
    instance: str = "10.0.3.7:9400",
    health: TargetState = TargetState.UP,
    scraped_seconds_ago: float | None = 4.0,
    last_error: str = "",
) -> TargetHealth:
    return TargetHealth(
        job=job,
        instance=instance,
        labels={"job": job, "instance": instance},
        health=health,
        last_scrape=None if scraped_seconds_ago is None else ago(scraped_seconds_ago),
        last_scrape_duration_seconds=0.004,
        last_error=last_error,
        scrape_interval_seconds=15.0,
        scrape_timeout_seconds=10.0,
    )


def check(symptoms: Sequence[Symptom], name: str) -> list[Symptom]:
    return [s for s in symptoms if s.subject.get("check") == name]


HEALTHY = LagView(
    now=NOW,
    heartbeat=beat(7.5),
    freshness={"observer_gpu_up": [SeriesAge({"node": "n1"}, 9.0)]},
    targets=[target()],
    flatlines=[FlatlineReading("gpu0_util", [0.2, 0.9, 0.4], [0.2, 0.9, 0.4])],
    busy_probes=[BusyProbeReading("run-1", GPU, ago(100), ago(80))],
)


def test_a_pipeline_that_keeps_up_raises_nothing() -> None:
    assert evaluate(HEALTHY, RULES) == []


# --- heartbeat ------------------------------------------------------------------------------


def test_a_heartbeat_read_back_older_than_the_limit_is_lag() -> None:
    [symptom] = evaluate(LagView(now=NOW, heartbeat=beat(75)), RULES)

    assert symptom.detector == "monitoring_lag"
    assert symptom.subject == {"pipeline": "prometheus", "check": "heartbeat"}
    assert symptom.severity is Severity.WARNING
    assert symptom.hold_seconds == 30
    assert symptom.rule == "now - heartbeat value read back > 60 s"
    assert symptom.evidence == {
        "lag_seconds": 75.0,
        "heartbeat_value": ago(75).isoformat(),
        "scraped_at": ago(74.8).isoformat(),
        "now": NOW.isoformat(),
        "max_lag_seconds": 60,
    }


def test_a_heartbeat_at_the_limit_is_not_lag() -> None:
    assert evaluate(LagView(now=NOW, heartbeat=beat(60)), RULES) == []


def test_a_heartbeat_missing_from_prometheus_is_critical() -> None:
    [symptom] = evaluate(LagView(now=NOW, heartbeat=None), RULES)

    assert symptom.subject == {"pipeline": "prometheus", "check": "heartbeat"}
    assert symptom.severity is Severity.CRITICAL
    assert "cannot be read back" in symptom.summary


# --- freshness ------------------------------------------------------------------------------


def test_stale_series_are_reported_stalest_first_with_their_labels() -> None:
    ages = [SeriesAge({"node": f"n{i}"}, age) for i, age in enumerate([5, 200, 61, 30])]

    [symptom] = evaluate(
        LagView(now=NOW, heartbeat=beat(1), freshness={"observer_gpu_up": ages}), RULES
    )

    assert symptom.subject == {
        "pipeline": "prometheus",
        "check": "freshness",
        "series": "observer_gpu_up",
    }
    assert symptom.summary == (
        "2 of 4 observer_gpu_up series are stale, the oldest last sampled 200 s ago"
    )
    assert symptom.rule == "time() - timestamp(observer_gpu_up) > 60 s"
    assert symptom.evidence["stalest"] == [
        {"labels": {"node": "n1"}, "age_seconds": 200},
        {"labels": {"node": "n2"}, "age_seconds": 61},
    ]


def test_a_watched_series_without_data_is_reported() -> None:
    [symptom] = evaluate(
        LagView(now=NOW, heartbeat=beat(1), freshness={"dcgm_gpu_temp": []}), RULES
    )

    assert symptom.subject["series"] == "dcgm_gpu_temp"
    assert symptom.summary == "dcgm_gpu_temp has no data in Prometheus"


# --- scrape ---------------------------------------------------------------------------------


def test_a_target_whose_last_scrape_failed_is_reported_with_prometheus_error() -> None:
    down = target(health=TargetState.DOWN, last_error="context deadline exceeded")

    [symptom] = evaluate(LagView(now=NOW, heartbeat=beat(1), targets=[down]), RULES)

    assert symptom.subject == {
        "pipeline": "prometheus",
        "check": "scrape",
        "job": "observer-agent",
        "instance": "10.0.3.7:9400",
    }
    assert symptom.summary == (
        "Prometheus does not get observer-agent 10.0.3.7:9400: its last scrape failed "
        "(context deadline exceeded)"
    )
    assert symptom.evidence["last_error"] == "context deadline exceeded"
    assert symptom.evidence["health"] == "down"
    assert symptom.evidence["scrape_timeout_seconds"] == 10.0


def test_a_target_prometheus_stopped_scraping_is_reported_even_if_its_last_scrape_was_good() -> (
    None
):
    [symptom] = evaluate(
        LagView(now=NOW, heartbeat=beat(1), targets=[target(scraped_seconds_ago=95)]), RULES
    )

    assert symptom.summary.endswith("it was last scraped 95 s ago")
    assert symptom.evidence["last_scrape_age_seconds"] == 95


def test_a_target_not_scraped_yet_and_targets_of_other_jobs_are_not_judged() -> None:
    rules = RULES.model_copy(update={"scrape_jobs": ("observer-agent",)})
    targets = [
        target(health=TargetState.UNKNOWN, scraped_seconds_ago=None),
        target(job="node-exporter", health=TargetState.DOWN, last_error="connection refused"),
    ]

    assert evaluate(LagView(now=NOW, heartbeat=beat(1), targets=targets), rules) == []


# --- flat lines -----------------------------------------------------------------------------


def flat(prometheus: list[float], agent: list[float]) -> list[Symptom]:
    view = LagView(
        now=NOW, heartbeat=beat(1), flatlines=[FlatlineReading("gpu0_util", prometheus, agent)]
    )
    return evaluate(view, RULES)


def test_a_series_flat_in_prometheus_while_the_agent_reads_it_changing_is_a_flat_line() -> None:
    [symptom] = flat([0.37] * 20, [0.1, 0.5, 0.9, 0.3, 0.5])

    assert symptom.subject == {"pipeline": "prometheus", "check": "flatline", "series": "gpu0_util"}
    assert symptom.summary == (
        "gpu0_util is flat at 0.37 in Prometheus while the agent read 4 different values"
    )
    assert symptom.hold_seconds == 0
    assert symptom.evidence == {
        "series": "gpu0_util",
        "window_seconds": 300,
        "prometheus_samples": 20,
        "prometheus_value": 0.37,
        "agent_readings": 5,
        "agent_distinct_values": 4,
        "agent_min": 0.1,
        "agent_max": 0.9,
    }


def test_a_series_flat_on_both_sides_is_a_quiet_gpu_not_a_flat_line() -> None:
    assert flat([0.0] * 20, [0.0] * 300) == []


def test_one_step_in_the_agent_readings_is_not_enough_to_call_a_flat_line() -> None:
    assert flat([0.37] * 20, [0.37, 0.37, 0.8]) == []


def test_fewer_than_two_prometheus_samples_are_missing_data_not_a_flat_line() -> None:
    assert flat([0.37], [0.1, 0.5, 0.9]) == []
    assert flat([], [0.1, 0.5, 0.9]) == []


# --- GPU-busy probe correlation -------------------------------------------------------------


def busy(started_seconds_ago: float, first_busy_seconds_ago: float | None) -> list[Symptom]:
    first = None if first_busy_seconds_ago is None else ago(first_busy_seconds_ago)
    probe = BusyProbeReading("run-7", GPU, ago(started_seconds_ago), first)
    return evaluate(LagView(now=NOW, heartbeat=beat(1), busy_probes=[probe]), RULES)


def test_a_gpu_shown_busy_late_after_the_probe_started_is_lag() -> None:
    [symptom] = busy(started_seconds_ago=200, first_busy_seconds_ago=110)

    assert symptom.subject == {"pipeline": "prometheus", "check": "gpu_busy_lag", "gpu_uuid": GPU}
    assert symptom.summary == (
        f"GPU {GPU} showed busy in Prometheus 90 s after GPU-busy probe run-7 started"
    )
    assert symptom.evidence["lag_seconds"] == 90
    assert symptom.evidence["first_busy_at"] == ago(110).isoformat()


def test_a_gpu_not_yet_shown_busy_is_lag_only_once_the_limit_has_passed() -> None:
    assert busy(started_seconds_ago=45, first_busy_seconds_ago=None) == []

    [symptom] = busy(started_seconds_ago=75, first_busy_seconds_ago=None)

    assert symptom.summary == (
        f"GPU {GPU} is still not busy in Prometheus 75 s after GPU-busy probe run-7 started"
    )
    assert symptom.evidence["first_busy_at"] is None


def test_the_first_busy_sample_is_the_first_above_the_threshold_since_the_start() -> None:
    points = [(ago(40), 0.9), (ago(30), 0.1), (ago(20), 0.5), (ago(10), 0.95), (ago(5), 0.97)]

    assert first_busy(points, ago(35), 0.5) == ago(10)
    assert first_busy(points, ago(3), 0.5) is None


# --- a blind read ---------------------------------------------------------------------------


def test_an_unreadable_prometheus_is_its_own_symptom_and_not_a_missing_heartbeat() -> None:
    error = "query 'x': no answer from http://prometheus:9090/api/v1/query within 5 s"
    blind = LagView(
        now=NOW, read_errors={c: error for c in ("heartbeat", "freshness", "scrape", "flatline")}
    )

    [symptom] = evaluate(blind, RULES)

    assert symptom.detector == "prometheus_unreachable"
    assert symptom.subject == {"pipeline": "prometheus"}
    assert symptom.severity is Severity.CRITICAL
    assert symptom.hold_seconds == 30
    assert symptom.evidence["unread_checks"] == ["flatline", "freshness", "heartbeat", "scrape"]
    assert error in symptom.summary


def test_checks_that_were_read_still_report_when_another_read_failed() -> None:
    view = LagView(
        now=NOW,
        heartbeat=beat(90),
        read_errors={"freshness": "query 'up{': bad_data: parse error"},
    )

    assert sorted(s.detector for s in evaluate(view, RULES)) == [
        "monitoring_lag",
        "prometheus_unreachable",
    ]
    assert covers(view, "monitoring_lag", {"pipeline": "prometheus", "check": "heartbeat"})
    assert not covers(
        view, "monitoring_lag", {"pipeline": "prometheus", "check": "freshness", "series": "up"}
    )
    assert covers(view, "prometheus_unreachable", {"pipeline": "prometheus"})


def test_a_blind_check_keeps_a_lag_condition_open_and_a_good_read_closes_it() -> None:
    rules = RULES.model_copy(update={"hold_seconds": 0})
    tracker = ConditionTracker()
    lagging = LagView(now=NOW, heartbeat=beat(90))
    blind = LagView(now=NOW, read_errors={"heartbeat": "connection refused"})

    [opened] = tracker.update(evaluate(lagging, rules), NOW, covers_all)
    [unreachable] = tracker.update(
        evaluate(blind, rules), ago(-10), lambda d, s: covers(blind, d, s)
    )
    changed = tracker.update(evaluate(HEALTHY, rules), ago(-20), lambda d, s: covers(HEALTHY, d, s))

    assert opened.subject["check"] == "heartbeat"
    assert unreachable.detector == "prometheus_unreachable"
    assert {(f.detector, f.is_open) for f in changed} == {
        ("monitoring_lag", False),
        ("prometheus_unreachable", False),
    }


# --- the lag figures ------------------------------------------------------------------------


def test_the_lag_figures_are_the_worst_each_check_measured() -> None:
    view = LagView(
        now=NOW,
        heartbeat=beat(2.5),
        freshness={"a": [SeriesAge({}, 3.0), SeriesAge({}, 8.0)], "b": [SeriesAge({}, 1.0)]},
        targets=[target(scraped_seconds_ago=4), target(scraped_seconds_ago=None)],
        busy_probes=[
            BusyProbeReading("r1", GPU, ago(30), ago(27)),
            BusyProbeReading("r2", GPU, ago(10), None),
        ],
    )

    assert lag_seconds(view, RULES) == {
        "heartbeat": 2.5,
        "freshness": 8.0,
        "scrape": 4.0,
        "gpu_busy_lag": 3.0,
    }


def test_a_check_that_measured_nothing_has_no_lag_figure_rather_than_zero() -> None:
    assert lag_seconds(LagView(now=NOW, read_errors={"heartbeat": "refused"}), RULES) == {}
