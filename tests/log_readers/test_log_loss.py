"""The log-loss detector: what a log-canary run's delivered lines say about the pipeline."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from observer.backends.simulated import NodeSpec, SimulatedCluster, TenantSpec
from observer.clock import ManualClock
from observer.detectors.log_loss import (
    Attribution,
    CanaryLine,
    analyse,
    findings,
    parse_canary,
)
from observer.domain import Finding, FindingKind, JobRequest, Severity
from observer.log_readers.base import DeliveredLine
from observer.log_readers.pod_logs import PodLogReader
from observer.probes.catalog import builtin_catalog
from observer.settings.detectors import LogLossSettings

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RUN = "3f2a9c0d"
RULES = LogLossSettings()


def written(seq: int) -> datetime:
    """The canary in these tests writes ten lines a second from T0."""
    return T0 + timedelta(seconds=seq / 10)


def line(
    seq: int,
    *,
    run: str = RUN,
    delivered_after: float | None = None,
    backend_after: float | None = None,
) -> DeliveredLine:
    at = written(seq)
    return DeliveredLine(
        f"observer-canary run={run} seq={seq} ts={at.timestamp():.6f}",
        "collected.log",
        delivered_at=at + timedelta(seconds=delivered_after)
        if delivered_after is not None
        else None,
        backend_timestamp=at + timedelta(seconds=backend_after)
        if backend_after is not None
        else None,
    )


def lines(seqs: Iterable[int], delivered_after: float | None = None) -> list[DeliveredLine]:
    return [line(s, delivered_after=delivered_after) for s in seqs]


def loss_findings(delivered: list[DeliveredLine], expected: int) -> list[Finding]:
    report = analyse(RUN, expected, delivered)
    return findings(report, tenant="research", pipeline="rsyslog", rules=RULES, at=T0)


# --- parsing ------------------------------------------------------------------------------


def test_a_canary_line_gives_its_run_sequence_number_and_write_time() -> None:
    # as Slurm's batch script writes it: date +%s.%N has nine fractional digits
    parsed = parse_canary("observer-canary run=ab12 seq=41 ts=1796008092.076528370")

    assert parsed == CanaryLine("ab12", 41, datetime(2026, 11, 30, 3, 8, 12, 76528, tzinfo=UTC))


def test_a_canary_line_is_found_behind_a_collector_prefix() -> None:
    parsed = parse_canary("2026-11-30T03:08:12.077861+00:00 app: observer-canary run=x seq=0 ts=17")

    assert parsed == CanaryLine("x", 0, datetime.fromtimestamp(17, UTC))


@pytest.mark.parametrize(
    "text",
    [
        "GET /healthz 200",
        "observer-canary run=x seq=12",  # torn before its timestamp
        "ary run=x seq=12 ts=1796008092.07",  # torn at the front
        "observer-canary run=x seq=12 ts=17960080xx",
    ],
)
def test_anything_but_a_whole_canary_line_is_not_one(text: str) -> None:
    assert parse_canary(text) is None


def test_a_padded_canary_line_parses_as_the_unpadded_one() -> None:
    parsed = parse_canary("observer-canary run=ab12 seq=41 ts=17 pad=5:xxxxx")

    assert parsed == CanaryLine("ab12", 41, datetime.fromtimestamp(17, UTC))


@pytest.mark.parametrize(
    "text",
    [
        "observer-canary run=ab12 seq=41 ts=17 pad=5:xxx",  # cut at a line-size limit
        "observer-canary run=ab12 seq=41 ts=17 pad=5",
        "observer-canary run=ab12 seq=41 ts=17 pad=5:xxxxxx",
    ],
)
def test_a_padded_line_cut_short_or_run_on_is_not_a_whole_canary_line(text: str) -> None:
    assert parse_canary(text) is None
    report = analyse("ab12", 42, [DeliveredLine(text, "collected.log")])
    assert report.malformed == 1


# --- counting -----------------------------------------------------------------------------


def test_a_run_delivered_whole_and_in_order_is_clean_and_gives_no_finding() -> None:
    report = analyse(RUN, 100, lines(range(100), delivered_after=0.2))

    assert report.clean
    assert (report.expected, report.received, report.missing_lines) == (100, 100, 0)
    assert findings(report, tenant="research", pipeline="rsyslog", rules=RULES, at=T0) == []


def test_missing_lines_are_reported_as_compact_ranges() -> None:
    kept = [s for s in range(100) if not (10 <= s <= 19 or s == 50)]

    report = analyse(RUN, 100, lines(kept))

    assert [(r.first_seq, r.last_seq, r.lines) for r in report.missing] == [
        (10, 19, 10),
        (50, 50, 1),
    ]
    assert (report.received, report.missing_lines) == (89, 11)


def test_a_missing_range_is_bounded_by_the_write_times_of_its_neighbours() -> None:
    report = analyse(RUN, 100, lines([s for s in range(100) if not 10 <= s <= 19]))

    (gap,) = report.missing
    assert (gap.written_after, gap.written_before) == (written(9), written(20))


def test_lost_head_and_tail_are_open_on_their_outer_side() -> None:
    report = analyse(RUN, 100, lines(range(5, 95)))

    head, tail = report.missing
    assert (head.first_seq, head.last_seq, head.written_after, head.written_before) == (
        0,
        4,
        None,
        written(5),
    )
    assert (tail.first_seq, tail.last_seq, tail.written_after, tail.written_before) == (
        95,
        99,
        written(94),
        None,
    )


def test_nothing_delivered_is_every_line_missing() -> None:
    report = analyse(RUN, 20, [])

    assert [(r.first_seq, r.last_seq) for r in report.missing] == [(0, 19)]
    assert report.received == 0
    assert report.latency is None


def test_duplicates_are_counted_per_sequence_number() -> None:
    report = analyse(RUN, 10, lines([0, 1, 2, 3, 4, 5, 5, 5, 6, 6, 7, 8, 9]))

    assert report.duplicated == {5: 3, 6: 2}
    assert report.received == 10
    assert not report.missing
    assert report.out_of_order == 0


def test_a_line_first_delivered_after_a_higher_one_is_out_of_order() -> None:
    # 2 comes after 3; the late second copy of 1 is a duplicate, not out of order
    report = analyse(RUN, 6, lines([0, 1, 3, 2, 4, 1, 5]))

    assert report.out_of_order == 1
    assert report.duplicated == {1: 2}


def test_other_runs_and_other_programs_are_ignored_and_torn_lines_counted() -> None:
    delivered = [
        *lines(range(5)),
        line(5, run=RUN + "-2"),  # another run whose id starts with this one's
        line(6, run="other"),
        DeliveredLine("kubelet: container started", "collected.log"),
        DeliveredLine(f"observer-canary run={RUN} seq=5", "collected.log"),  # torn
    ]

    report = analyse(RUN, 6, delivered)

    assert report.received == 5
    assert [(r.first_seq, r.last_seq) for r in report.missing] == [(5, 5)]
    assert report.malformed == 1


def test_sequence_numbers_the_canary_never_wrote_are_reported() -> None:
    # a canary counting from 1 instead of 0: seq 0 missing, seq 10 unexpected
    report = analyse(RUN, 10, lines(range(1, 11)))

    assert report.unexpected == (10,)
    assert [(r.first_seq, r.last_seq) for r in report.missing] == [(0, 0)]
    assert report.received == 9


# --- delivery latency -----------------------------------------------------------------------


def test_latency_percentiles_are_measured_values_over_first_deliveries() -> None:
    delivered = [line(s, delivered_after=(s + 1) / 10) for s in range(100)]
    delivered.append(line(0, delivered_after=60.0))  # a late duplicate does not count

    latency = analyse(RUN, 100, delivered).latency

    assert latency is not None
    assert (latency.lines, latency.basis) == (100, "delivered_at")
    assert latency.p50_seconds == pytest.approx(5.0)
    assert latency.p95_seconds == pytest.approx(9.5)
    assert latency.max_seconds == pytest.approx(10.0)


def test_the_backends_timestamp_stands_in_when_no_delivery_time_is_known() -> None:
    delivered = [line(0, delivered_after=1.0), line(1, backend_after=3.0), line(2)]

    latency = analyse(RUN, 3, delivered).latency

    assert latency is not None
    assert (latency.lines, latency.basis) == (2, "backend_timestamp+delivered_at")
    assert latency.max_seconds == pytest.approx(3.0)


def test_slow_delivery_of_a_whole_run_is_its_own_warning() -> None:
    report = analyse(RUN, 20, lines(range(20), delivered_after=45.0))

    (slow,) = findings(
        report,
        tenant="research",
        pipeline="loki",
        rules=LogLossSettings(delivery_p95_max_seconds=30),
        at=T0,
    )

    assert (slow.detector, slow.severity, slow.kind) == (
        "log_delivery_latency",
        Severity.WARNING,
        FindingKind.EVENT,
    )
    assert slow.evidence["latency_seconds"]["p95"] == pytest.approx(45.0)
    assert "30 s" in slow.evidence["rule"]


# --- attribution --------------------------------------------------------------------------


def test_a_missing_range_is_attributed_to_the_rotation_during_its_writing() -> None:
    rotation = written(15)
    report = analyse(
        RUN, 100, lines([s for s in range(100) if not 10 <= s <= 19]), rotations=[rotation]
    )

    (gap,) = report.missing
    assert gap.attributions == (Attribution("rotation", rotation, rotation, True, 0.0),)


def test_a_missing_range_overlapping_a_pipeline_gap_is_attributed_to_it() -> None:
    outage = (written(0) - timedelta(seconds=5), written(12))
    report = analyse(
        RUN,
        100,
        lines([s for s in range(100) if not 10 <= s <= 19]),
        rotations=[written(80)],
        gaps=[outage],
    )

    (gap,) = report.missing
    assert gap.attributions == (Attribution("gap", *outage, True, 0.0),)


def test_without_an_overlap_the_nearest_rotation_or_gap_is_named_with_its_distance() -> None:
    report = analyse(
        RUN,
        100,
        lines([s for s in range(100) if not 10 <= s <= 19]),
        rotations=[written(60), written(30)],  # 1 s after the range's last neighbour
    )

    (gap,) = report.missing
    assert gap.attributions == (Attribution("rotation", written(30), written(30), False, 1.0),)


def test_a_missing_range_is_attributed_to_nothing_when_nothing_happened() -> None:
    report = analyse(RUN, 100, lines([s for s in range(100) if s != 42]))

    assert report.missing[0].attributions == ()


# --- findings -----------------------------------------------------------------------------


def test_missing_lines_are_one_critical_event_with_checkable_evidence() -> None:
    rotation = written(15)
    report = analyse(
        RUN,
        100,
        lines([s for s in range(100) if not 10 <= s <= 19], delivered_after=0.5),
        rotations=[rotation],
    )

    (finding,) = findings(report, tenant="research", pipeline="rsyslog", rules=RULES, at=T0)

    assert (finding.detector, finding.kind, finding.severity) == (
        "log_loss",
        FindingKind.EVENT,
        Severity.CRITICAL,
    )
    assert finding.subject == {"run_id": RUN, "tenant": "research", "pipeline": "rsyslog"}
    assert finding.opened_at == finding.closed_at == T0
    assert "10 of 100 lines missing: seq 10-19" in finding.summary
    assert f"in the rotation at {rotation.isoformat()}" in finding.summary
    evidence = finding.evidence
    assert (evidence["expected_lines"], evidence["received_lines"]) == (100, 90)
    assert evidence["missing_ranges"] == [
        {
            "first_seq": 10,
            "last_seq": 19,
            "lines": 10,
            "written_after": written(9).isoformat(),
            "written_before": written(20).isoformat(),
            "attributed_to": [
                {
                    "cause": "rotation",
                    "start": rotation.isoformat(),
                    "end": rotation.isoformat(),
                    "overlaps": True,
                    "distance_seconds": 0.0,
                }
            ],
        }
    ]
    assert evidence["latency_seconds"] == {
        "lines": 90,
        "basis": "delivered_at",
        "p50": 0.5,
        "p95": 0.5,
        "max": 0.5,
    }
    assert evidence["rule"].startswith("each of seq 0..99 delivered exactly once")


def test_duplicates_or_disorder_alone_are_a_warning() -> None:
    (finding,) = loss_findings(lines([0, 2, 1, 3, 3, 4]), 5)

    assert finding.severity is Severity.WARNING
    assert finding.evidence["duplicate_deliveries"] == 1
    assert finding.evidence["duplicated_ranges"] == [[3, 3, 2]]
    assert finding.evidence["out_of_order_lines"] == 1
    assert "1 duplicate deliveries of 1 lines, 1 lines out of order" in finding.summary


def test_evidence_lists_a_bounded_number_of_ranges_and_the_totals() -> None:
    (finding,) = loss_findings(lines(range(0, 400, 2)), 400)  # every other line lost

    assert finding.evidence["missing_lines"] == 200
    assert finding.evidence["missing_range_count"] == 200
    assert len(finding.evidence["missing_ranges"]) == 50


# --- with the simulated cluster --------------------------------------------------------------


def test_the_simulated_clusters_log_loss_is_counted_exactly_through_the_job_output() -> None:
    clock = ManualClock(T0)
    cluster = SimulatedCluster([NodeSpec("n1", 8)], [TenantSpec("research")], clock)
    canary = builtin_catalog(8)["log-canary"]
    job_id = cluster.submit(JobRequest("run-7", "log-canary", "research", None, canary.workload))
    # lines written in [10 s, 12 s) are lost: seq 200..239 at 20 lines a second
    cluster.faults.log_loss.append((T0 + timedelta(seconds=10), T0 + timedelta(seconds=12)))
    clock.advance(canary.workload.duration_seconds + 1)

    reader = PodLogReader(cluster.logs, {"run-7": job_id}.get)
    report = analyse(
        "run-7",
        canary.workload.log_lines,
        reader.read("run-7", T0, clock.now()),
        gaps=cluster.faults.log_loss,
    )

    (lost,) = report.missing
    assert (lost.first_seq, lost.last_seq) == (200, 239)
    assert lost.attributions[0].cause == "gap" and lost.attributions[0].overlaps
    assert report.received == canary.workload.log_lines - 40
    assert not report.duplicated and report.out_of_order == 0
