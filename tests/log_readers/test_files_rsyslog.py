"""The file reader and the log-loss detector at the end of a real lossy pipeline: rsyslog
tails app.log, ships it over TCP to itself and writes collected.log; logrotate rotates app.log
with copytruncate (deploy/local/infra/logs-up.sh, started once per session).

copytruncate loses whatever the shipper has not read when the file is truncated. A run that
rotates once the shipper has caught up loses nothing; a run that stops the shipper, writes,
rotates and resumes loses exactly the lines written in between, deterministically. The log
burst's padded lines, written without pause, cross logrotate's size threshold within one run
and are rotated by size (logrotate without -f, as its cron job runs it). A pipeline that
cannot start skips these tests, and fails them when CI=true."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from observer.detectors.log_loss import analyse, findings
from observer.domain import Severity
from observer.settings.detectors import LogLossSettings
from tests.log_readers.rsyslog import BURST_LINE_BYTES, Pipeline

pytestmark = pytest.mark.rsyslog


def test_a_canary_rotated_once_the_shipper_caught_up_arrives_whole(pipeline: Pipeline) -> None:
    run_id = uuid.uuid4().hex
    since = datetime.now(UTC) - timedelta(seconds=1)

    pipeline.write(run_id, range(100))
    pipeline.wait_collected(run_id, since, 100)
    rotated_at = pipeline.rotate()
    pipeline.write(run_id, range(100, 200))
    delivered = pipeline.wait_collected(run_id, since, 200)

    report = analyse(run_id, 200, delivered, rotations=[rotated_at])
    assert f"run={run_id} seq=99 " in (pipeline.dir / "app.log.1").read_text()  # it rotated
    assert (report.received, report.missing, report.duplicated, report.out_of_order) == (
        200,
        (),
        {},
        0,
    )
    assert report.clean
    assert report.latency is not None
    assert (report.latency.lines, report.latency.basis) == (200, "delivered_at")
    assert 0 <= report.latency.max_seconds < 5
    assert findings(report, tenant="t", pipeline="rsyslog", rules=LogLossSettings(), at=since) == []


def test_lines_written_while_the_shipper_stalls_across_a_rotation_are_counted_exactly(
    pipeline: Pipeline,
) -> None:
    run_id = uuid.uuid4().hex
    since = datetime.now(UTC) - timedelta(seconds=1)

    pipeline.write(run_id, range(50))
    pipeline.wait_collected(run_id, since, 50)
    pipeline.stop_shipper()
    pipeline.write(run_id, range(50, 150))  # copied into app.log.1, truncated, never shipped
    rotated_at = pipeline.rotate()
    pipeline.resume_shipper()
    # the first line after the truncation is shorter than the shipper's old offset, which is
    # how imfile tells a truncation; once it arrived, imfile reads the new file from its start
    pipeline.write(run_id, range(150, 151))
    pipeline.wait_collected(run_id, since, 51)
    pipeline.write(run_id, range(151, 200))
    delivered = pipeline.wait_collected(run_id, since, 100)

    report = analyse(run_id, 200, delivered, rotations=[rotated_at])
    rotated = (pipeline.dir / "app.log.1").read_text()
    assert all(f"run={run_id} seq={seq} " in rotated for seq in range(50, 150))
    (lost,) = report.missing
    assert (lost.first_seq, lost.last_seq, lost.lines) == (50, 149, 100)
    assert [(a.cause, a.start, a.overlaps) for a in lost.attributions] == [
        ("rotation", rotated_at, True)
    ]
    assert (report.received, report.duplicated, report.out_of_order, report.malformed) == (
        100,
        {},
        0,
        0,
    )

    (finding,) = findings(
        report, tenant="research", pipeline="rsyslog", rules=LogLossSettings(), at=rotated_at
    )
    assert finding.severity is Severity.CRITICAL
    assert "100 of 200 lines missing: seq 50-149 (in the rotation at" in finding.summary
    assert finding.evidence["missing_lines"] == 100


def test_a_burst_past_the_size_threshold_rotated_once_shipped_arrives_whole(
    pipeline: Pipeline,
) -> None:
    run_id = uuid.uuid4().hex
    since = datetime.now(UTC) - timedelta(seconds=1)
    threshold = pipeline.rotate_size_bytes
    lines = threshold // BURST_LINE_BYTES + 300  # past the threshold within the run
    pipeline.start_empty()

    pipeline.burst(run_id, range(lines - 100), lines)
    assert pipeline.app_log.stat().st_size > threshold
    pipeline.wait_collected(run_id, since, lines - 100)
    rotated_at = pipeline.rotate(force=False)  # by size
    pipeline.burst(run_id, range(lines - 100, lines), lines)
    delivered = pipeline.wait_collected(run_id, since, lines)

    assert f"run={run_id} seq={lines - 101} " in (pipeline.dir / "app.log.1").read_text()
    report = analyse(run_id, lines, delivered, rotations=[rotated_at])
    assert (report.received, report.missing, report.duplicated, report.malformed) == (
        lines,
        (),
        {},
        0,
    )
    assert report.clean
    assert findings(report, tenant="t", pipeline="rsyslog", rules=LogLossSettings(), at=since) == []


def test_a_burst_rotated_by_size_while_the_shipper_stalls_loses_exactly_what_it_missed(
    pipeline: Pipeline,
) -> None:
    run_id = uuid.uuid4().hex
    since = datetime.now(UTC) - timedelta(seconds=1)
    threshold = pipeline.rotate_size_bytes
    shipped = threshold // BURST_LINE_BYTES // 2  # half the threshold: no rotation yet
    lines = threshold // BURST_LINE_BYTES + 300
    pipeline.start_empty()

    pipeline.burst(run_id, range(shipped), lines)
    pipeline.wait_collected(run_id, since, shipped)
    pipeline.rotate(force=False)  # below the threshold: not rotated
    assert pipeline.app_log.stat().st_size > shipped * 1000
    pipeline.stop_shipper()
    pipeline.burst(run_id, range(shipped, lines - 100), lines)  # crosses the threshold
    assert pipeline.app_log.stat().st_size > threshold
    rotated_at = pipeline.rotate(force=False)  # by size: copied, truncated, never shipped
    assert pipeline.app_log.stat().st_size == 0
    pipeline.resume_shipper()
    # as in the stall above: the first line after the truncation lets imfile see it
    pipeline.burst(run_id, range(lines - 100, lines - 99), lines)
    pipeline.wait_collected(run_id, since, shipped + 1)
    pipeline.burst(run_id, range(lines - 99, lines), lines)
    delivered = pipeline.wait_collected(run_id, since, shipped + 100)

    report = analyse(run_id, lines, delivered, rotations=[rotated_at])
    (lost,) = report.missing
    assert (lost.first_seq, lost.last_seq) == (shipped, lines - 101)
    assert [(a.cause, a.overlaps) for a in lost.attributions] == [("rotation", True)]
    assert (report.received, report.duplicated, report.out_of_order, report.malformed) == (
        shipped + 100,
        {},
        0,
        0,
    )
    (finding,) = findings(
        report, tenant="research", pipeline="rsyslog", rules=LogLossSettings(), at=rotated_at
    )
    assert finding.severity is Severity.CRITICAL
    assert finding.evidence["missing_lines"] == lines - 100 - shipped
