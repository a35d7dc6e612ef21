"""A real lossy log pipeline for the tests: rsyslog tails app.log, ships it over TCP to
itself and writes collected.log; logrotate rotates app.log with copytruncate
(deploy/local/infra/logs-up.sh, started once per session by the `pipeline` fixture in
conftest.py). What a test does to it (write canary lines, stop and resume the shipper, rotate)
and what it reads back."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from observer.domain import Workload, canary_padding
from observer.log_readers.base import DeliveredLine
from observer.log_readers.files import FileLogReader
from tests import components
from tests.support.waiting import wait_until

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
def start_pipeline() -> str | None:
    """Why the pipeline is not available, or None once logs-up.sh has brought it up."""
    why_root = "the local log pipeline needs root (logs-up.sh installs and starts rsyslog)"
    return components.bring_up(LOGS_UP, 300, why_root)


@dataclass(frozen=True)
class Pipeline:
    dir: Path

    @property
    def app_log(self) -> Path:
        return self.dir / "app.log"

    @property
    def shipper_pid(self) -> int:
        return int((self.dir / "rsyslogd.pid").read_text())

    def append(self, lines: list[str]) -> None:
        """Lines a job wrote, appended to app.log as a container runtime writes its output."""
        with self.app_log.open("a") as f:
            f.write("".join(line + "\n" for line in lines))

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
        wait_until(
            lambda: all(_stopped(task) for task in Path(f"/proc/{pid}/task").iterdir()),
            "rsyslogd did not stop",
            seconds=5,
            poll_seconds=0.001,
        )

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
