"""Monitoring lag: metrics that reach Prometheus late, stale, or flat-lined.

Checks, each a condition of detector "monitoring_lag" on {"pipeline": "prometheus", "check": ...}:
- heartbeat: the observer's own clock, exported and read back through Prometheus, is older
  than heartbeat_max_lag_seconds, or cannot be read back at all;
- freshness: the newest sample of a configured series is older than series_max_age_seconds,
  or the series has no data;
- scrape: a target's last scrape failed, or Prometheus last scraped it longer ago than
  scrape_max_age_seconds;
- flatline: Prometheus shows one value over the window while the agent's own NVML readings of
  the same series changed;
- gpu_busy_lag: a GPU-busy probe started and Prometheus did not show its GPU busy within
  busy_lag_max_seconds.
A failed read is its own condition, prometheus_unreachable, never "all good": conditions of a
check that could not be read stay as they are (`covers`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from observer.domain import Severity, Subject, Symptom, TargetHealth, TargetState
from observer.settings.detectors import MonitoringLagSettings

DETECTOR = "monitoring_lag"
UNREACHABLE = "prometheus_unreachable"
PIPELINE = "prometheus"
HEARTBEAT = "heartbeat"
FRESHNESS = "freshness"
SCRAPE = "scrape"
FLATLINE = "flatline"
GPU_BUSY_LAG = "gpu_busy_lag"


@dataclass(frozen=True, slots=True)
class HeartbeatReading:
    value: datetime  # the observer's clock when Prometheus scraped the heartbeat
    scraped_at: datetime  # the sample's timestamp, on Prometheus's clock


@dataclass(frozen=True, slots=True)
class SeriesAge:
    labels: Mapping[str, str]
    age_seconds: float


@dataclass(frozen=True, slots=True)
class FlatlineReading:
    """One series over the flat-line window: as Prometheus has it and as the agent read it."""

    series: str
    prometheus_values: Sequence[float]
    agent_values: Sequence[float]


@dataclass(frozen=True, slots=True)
class BusyProbeReading:
    run_id: str
    gpu_uuid: str
    started_at: datetime  # when the probe's workload began keeping the GPU busy
    # When Prometheus first showed it busy: the first busy sample's time, or, for a sample
    # that arrived late, the last check that had not seen it; None: not yet.
    first_busy_at: datetime | None


@dataclass(frozen=True, slots=True)
class LagView:
    """One check of the pipeline. A check listed in `read_errors` could not be read; its
    other fields then hold only what was read."""

    now: datetime
    heartbeat: HeartbeatReading | None = None  # None: absent from Prometheus
    freshness: Mapping[str, Sequence[SeriesAge]] = field(default_factory=dict)  # empty: no data
    targets: Sequence[TargetHealth] = ()
    flatlines: Sequence[FlatlineReading] = ()
    busy_probes: Sequence[BusyProbeReading] = ()
    read_errors: Mapping[str, str] = field(default_factory=dict)  # check -> error


def evaluate(view: LagView, rules: MonitoringLagSettings) -> list[Symptom]:
    symptoms: list[Symptom] = []
    if view.read_errors:
        symptoms.append(_unreachable(view, rules))
    for check, rule in (
        (HEARTBEAT, _heartbeat),
        (FRESHNESS, _freshness),
        (SCRAPE, _scrape),
        (FLATLINE, _flatline),
        (GPU_BUSY_LAG, _busy_lag),
    ):
        if check not in view.read_errors:
            symptoms += rule(view, rules)
    return symptoms


def covers(view: LagView, detector: str, subject: Subject) -> bool:
    """Whether this check read what a condition is about, so its absence means 'gone'."""
    return detector == UNREACHABLE or subject.get("check") not in view.read_errors


def lag_seconds(view: LagView, rules: MonitoringLagSettings) -> dict[str, float]:
    """The worst lag each check measured, for the metrics; a check that measured nothing is
    absent rather than zero."""
    lags: dict[str, float] = {}
    if view.heartbeat is not None:
        lags[HEARTBEAT] = (view.now - view.heartbeat.value).total_seconds()
    ages = [a.age_seconds for series in view.freshness.values() for a in series]
    if ages:
        lags[FRESHNESS] = max(ages)
    scrapes = [
        (view.now - t.last_scrape).total_seconds()
        for t in view.targets
        if t.last_scrape is not None and _in_scope(t, rules)
    ]
    if scrapes:
        lags[SCRAPE] = max(scrapes)
    busy = [
        (p.first_busy_at - p.started_at).total_seconds()
        for p in view.busy_probes
        if p.first_busy_at is not None
    ]
    if busy:
        lags[GPU_BUSY_LAG] = max(busy)
    return lags


def first_busy(
    points: Sequence[tuple[datetime, float]], started_at: datetime, threshold_ratio: float
) -> datetime | None:
    """The first sample at or after `started_at` above the threshold."""
    return next((t for t, v in points if t >= started_at and v > threshold_ratio), None)


def _subject(check: str, **more: str) -> dict[str, str]:
    return {"pipeline": PIPELINE, "check": check, **more}


def _in_scope(target: TargetHealth, rules: MonitoringLagSettings) -> bool:
    return not rules.scrape_jobs or target.job in rules.scrape_jobs


def _unreachable(view: LagView, rules: MonitoringLagSettings) -> Symptom:
    first = next(iter(view.read_errors.values()))
    return Symptom(
        detector=UNREACHABLE,
        subject={"pipeline": PIPELINE},
        severity=Severity.CRITICAL,
        summary=f"Prometheus could not be read, monitoring lag is unknown: {first}",
        rule="a read of Prometheus's HTTP API failed: unreachable, timed out, or an error answer",
        evidence={"errors": dict(view.read_errors), "unread_checks": sorted(view.read_errors)},
        hold_seconds=rules.hold_seconds,
    )


def _heartbeat(view: LagView, rules: MonitoringLagSettings) -> Iterator[Symptom]:
    beat = view.heartbeat
    if beat is None:
        yield Symptom(
            detector=DETECTOR,
            subject=_subject(HEARTBEAT),
            severity=Severity.CRITICAL,
            summary="The observer's heartbeat cannot be read back through Prometheus: what "
            "the observer exports does not reach it",
            rule="the heartbeat series is absent from Prometheus (target down, not scraped, "
            "or its samples went stale)",
            evidence={"now": view.now.isoformat()},
            hold_seconds=rules.hold_seconds,
        )
        return
    lag = (view.now - beat.value).total_seconds()
    if lag > rules.heartbeat_max_lag_seconds:
        yield Symptom(
            detector=DETECTOR,
            subject=_subject(HEARTBEAT),
            severity=Severity.WARNING,
            summary=f"Metrics reach Prometheus {lag:.0f} s late: the heartbeat read back is "
            f"{lag:.1f} s old",
            rule=f"now - heartbeat value read back > {rules.heartbeat_max_lag_seconds:g} s",
            evidence={
                "lag_seconds": lag,
                "heartbeat_value": beat.value.isoformat(),
                "scraped_at": beat.scraped_at.isoformat(),
                "now": view.now.isoformat(),
                "max_lag_seconds": rules.heartbeat_max_lag_seconds,
            },
            hold_seconds=rules.hold_seconds,
        )


def _freshness(view: LagView, rules: MonitoringLagSettings) -> Iterator[Symptom]:
    limit = rules.series_max_age_seconds
    for series, ages in view.freshness.items():
        subject = _subject(FRESHNESS, series=series)
        if not ages:
            yield Symptom(
                detector=DETECTOR,
                subject=subject,
                severity=Severity.WARNING,
                summary=f"{series} has no data in Prometheus",
                rule=f"time() - timestamp({series}) returns nothing: no sample within "
                "Prometheus's lookback",
                evidence={"series": series},
                hold_seconds=rules.hold_seconds,
            )
            continue
        stale = sorted((a for a in ages if a.age_seconds > limit), key=lambda a: -a.age_seconds)
        if stale:
            yield Symptom(
                detector=DETECTOR,
                subject=subject,
                severity=Severity.WARNING,
                summary=f"{len(stale)} of {len(ages)} {series} series are stale, the oldest "
                f"last sampled {stale[0].age_seconds:.0f} s ago",
                rule=f"time() - timestamp({series}) > {limit:g} s",
                evidence={
                    "series": series,
                    "stale_series": len(stale),
                    "total_series": len(ages),
                    "max_age_seconds": limit,
                    "stalest": [
                        {"labels": dict(a.labels), "age_seconds": a.age_seconds} for a in stale[:5]
                    ],
                },
                hold_seconds=rules.hold_seconds,
            )


def _scrape(view: LagView, rules: MonitoringLagSettings) -> Iterator[Symptom]:
    limit = rules.scrape_max_age_seconds
    for target in view.targets:
        # Not scraped yet: Prometheus has only just discovered it; nothing to judge.
        if target.last_scrape is None or not _in_scope(target, rules):
            continue
        age = (view.now - target.last_scrape).total_seconds()
        reasons = []
        if target.health is TargetState.DOWN:
            reasons.append(f"its last scrape failed ({target.last_error or 'no error given'})")
        if age > limit:
            reasons.append(f"it was last scraped {age:.0f} s ago")
        if not reasons:
            continue
        yield Symptom(
            detector=DETECTOR,
            subject=_subject(SCRAPE, job=target.job, instance=target.instance),
            severity=Severity.WARNING,
            summary=f"Prometheus does not get {target.job} {target.instance}: "
            + " and ".join(reasons),
            rule=f"target health is down, or its last scrape is older than {limit:g} s",
            evidence={
                "job": target.job,
                "instance": target.instance,
                "health": target.health.value,
                "last_error": target.last_error,
                "last_scrape": target.last_scrape.isoformat(),
                "last_scrape_age_seconds": age,
                "last_scrape_duration_seconds": target.last_scrape_duration_seconds,
                "scrape_interval_seconds": target.scrape_interval_seconds,
                "scrape_timeout_seconds": target.scrape_timeout_seconds,
                "max_age_seconds": limit,
            },
            hold_seconds=rules.hold_seconds,
        )


def _flatline(view: LagView, rules: MonitoringLagSettings) -> Iterator[Symptom]:
    for reading in view.flatlines:
        prometheus = set(reading.prometheus_values)
        agent = set(reading.agent_values)
        # Fewer than two samples is missing data, which freshness and scrape report.
        if (
            len(reading.prometheus_values) < 2
            or len(prometheus) > 1
            or len(agent) < rules.flatline_min_agent_distinct_values
        ):
            continue
        value = reading.prometheus_values[0]
        yield Symptom(
            detector=DETECTOR,
            subject=_subject(FLATLINE, series=reading.series),
            severity=Severity.WARNING,
            summary=f"{reading.series} is flat at {value:g} in Prometheus while the agent read "
            f"{len(agent)} different values",
            rule=f"over {rules.flatline_window_seconds:g} s Prometheus shows one value while the "
            f"agent's own readings take at least {rules.flatline_min_agent_distinct_values} "
            "distinct values",
            evidence={
                "series": reading.series,
                "window_seconds": rules.flatline_window_seconds,
                "prometheus_samples": len(reading.prometheus_values),
                "prometheus_value": value,
                "agent_readings": len(reading.agent_values),
                "agent_distinct_values": len(agent),
                "agent_min": min(agent),
                "agent_max": max(agent),
            },
        )


def _busy_lag(view: LagView, rules: MonitoringLagSettings) -> Iterator[Symptom]:
    limit = rules.busy_lag_max_seconds
    for probe in view.busy_probes:
        seen = probe.first_busy_at
        lag = ((seen or view.now) - probe.started_at).total_seconds()
        if lag <= limit:
            continue
        if seen is None:
            summary = (
                f"GPU {probe.gpu_uuid} is still not busy in Prometheus {lag:.0f} s after "
                f"GPU-busy probe {probe.run_id} started"
            )
        else:
            summary = (
                f"GPU {probe.gpu_uuid} showed busy in Prometheus {lag:.0f} s after GPU-busy "
                f"probe {probe.run_id} started"
            )
        yield Symptom(
            detector=DETECTOR,
            subject=_subject(GPU_BUSY_LAG, gpu_uuid=probe.gpu_uuid),
            severity=Severity.WARNING,
            summary=summary,
            rule=f"utilisation > {rules.busy_utilization_threshold_ratio:g} shows in Prometheus "
            f"more than {limit:g} s after a GPU-busy probe's known start",
            evidence={
                "run_id": probe.run_id,
                "gpu_uuid": probe.gpu_uuid,
                "started_at": probe.started_at.isoformat(),
                "first_busy_at": seen.isoformat() if seen else None,
                "lag_seconds": lag,
                "max_lag_seconds": limit,
            },
        )
