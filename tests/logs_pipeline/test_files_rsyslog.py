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

import fcntl
import functools
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from observer.detectors.log_loss import analyse, findings
from observer.domain import Severity, Workload, canary_padding
from observer.logs_pipeline.base import DeliveredLine
from observer.logs_pipeline.files import FileLogReader
from observer.settings.detectors import LogLossSettings

REPO = Path(__file__).resolve().parents[2]
LOGS_UP = REPO / "deploy" / "local" / "infra" / "logs-up.sh"
WRITE_INTERVAL_SECONDS = 0.005  # the canary's cadence: 200 lines a second
POLL_SECONDS = 0.02
DELIVERY_DEADLINE_SECONDS = 15.0
QUIET_SECONDS = 0.3  # no further line for this long: nothing (no duplicate) is still coming
BURST_LINE_BYTES = 1024  # the log-burst probe's line size
# logrotate's size units (logrotate.conf's `size`, set by logs-up.sh from LOGS_ROTATE_SIZE)
SIZE_UNITS = {"": 1, "k": 2**10, "M": 2**20, "G": 2**30}


def logs_dir() -> Path:
    return Path(os.environ.get("LOGS_DIR", "/tmp/observer-logs"))


@functools.cache
def _start_pipeline() -> str | None:
    """Why the pipeline is not available, or None once logs-up.sh has brought it up."""
    if os.geteuid() != 0:
        return "the local log pipeline needs root (logs-up.sh installs and starts rsyslog)"
    try:
        done = subprocess.run(
            ["bash", str(LOGS_UP)], capture_output=True, text=True, timeout=300, check=False
        )
    except subprocess.TimeoutExpired:
        return f"{LOGS_UP.name} did not finish within 300 s"
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        return f"{LOGS_UP.name} failed: " + " | ".join(tail)
    return None


@dataclass(frozen=True)
class Pipeline:
    dir: Path

    @property
    def app_log(self) -> Path:
        return self.dir / "app.log"

    @property
    def shipper_pid(self) -> int:
        return int((self.dir / "rsyslogd.pid").read_text())

    def write(
        self,
        run_id: str,
        seqs: range,
        *,
        padding: str = "",
        interval_seconds: float = WRITE_INTERVAL_SECONDS,
    ) -> None:
        """The canary as the probes write it, one line at a time at a steady cadence (0: as
        fast as it can, as the log burst does)."""
        with self.app_log.open("a") as f:
            for seq in seqs:
                seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
                f.write(
                    f"observer-canary run={run_id} seq={seq} ts={seconds}.{nanos:09d}{padding}\n"
                )
                f.flush()
                if interval_seconds:
                    time.sleep(interval_seconds)

    def burst(self, run_id: str, seqs: range, lines: int) -> None:
        """The log-burst probe's lines of a run of `lines`, padded and without pause."""
        workload = Workload(1, log_lines=lines, log_line_bytes=BURST_LINE_BYTES)
        self.write(run_id, seqs, padding=canary_padding(run_id, workload), interval_seconds=0)

    def start_empty(self) -> None:
        """A fresh app.log that the shipper reads from its start: rotated, then one line of
        another run, delivered (shorter than the old file: imfile sees the truncation by it,
        before a burst could outgrow the old read offset)."""
        self.rotate()
        marker = uuid.uuid4().hex
        since = datetime.now(UTC) - timedelta(seconds=1)
        self.write(marker, range(1))
        assert len(self.wait_collected(marker, since, 1)) == 1

    @property
    def rotate_size_bytes(self) -> int:
        """The size past which logrotate rotates app.log."""
        conf = (self.dir / "logrotate.conf").read_text()
        (size,) = (line.split()[1] for line in conf.splitlines() if line.split()[:1] == ["size"])
        number, unit = size.rstrip("kMG"), size[len(size.rstrip("kMG")) :]
        return int(number) * SIZE_UNITS[unit]

    def rotate(self, *, force: bool = True) -> datetime:
        """logrotate with copytruncate, forced or (force=False) only if app.log is past the
        size threshold; the instant logrotate was done."""
        subprocess.run(
            [
                "logrotate",
                "-s",
                str(self.dir / "logrotate.state"),
                *(["-f"] if force else []),
                str(self.dir / "logrotate.conf"),
            ],
            check=True,
            timeout=30,
        )
        return datetime.now(UTC)

    def stop_shipper(self) -> None:
        """SIGSTOP, then wait until every rsyslogd thread has stopped: a thread still
        running could read lines written after kill() returned."""
        pid = self.shipper_pid
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not all(_stopped(task) for task in Path(f"/proc/{pid}/task").iterdir()):
            assert time.monotonic() < deadline, "rsyslogd did not stop"
            time.sleep(0.001)

    def resume_shipper(self) -> None:
        os.kill(self.shipper_pid, signal.SIGCONT)

    def collected(self, run_id: str, since: datetime) -> list[DeliveredLine]:
        reader = FileLogReader(str(self.dir / "collected.log"), leading_timestamp=True)
        return reader.read(run_id, since, datetime.now(UTC))

    def wait_collected(self, run_id: str, since: datetime, lines: int) -> list[DeliveredLine]:
        """The run's collected lines once at least `lines` have arrived and no more came for
        QUIET_SECONDS (or the deadline passed: the caller's assertions say what is missing)."""
        deadline = time.monotonic() + DELIVERY_DEADLINE_SECONDS
        seen = self.collected(run_id, since)
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            now = self.collected(run_id, since)
            if len(now) != len(seen):
                seen, quiet_since = now, time.monotonic()
            elif len(seen) >= lines and time.monotonic() - quiet_since >= QUIET_SECONDS:
                break
        return seen


def _stopped(task: Path) -> bool:
    # the state follows the command name, which may hold spaces and parentheses
    return (task / "stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t")


@pytest.fixture(scope="session")
def pipeline_dir() -> Path:
    reason = _start_pipeline()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(f"{reason} (CI=true makes this fail)")
    return logs_dir()


@pytest.fixture
def pipeline(pipeline_dir: Path) -> Iterator[Pipeline]:
    """The pipeline to one test at a time across sessions: a stopped shipper would lose
    another session's lines. The shipper always runs again afterwards."""
    with (pipeline_dir / "tests.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pipeline = Pipeline(pipeline_dir)
        try:
            yield pipeline
        finally:
            pipeline.resume_shipper()


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
