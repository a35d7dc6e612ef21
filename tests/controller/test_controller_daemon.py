"""`observer controller` as a process: it serves its health and metrics, runs the plan, writes
the daily summary at its build time in a process of its own, and on SIGTERM cancels every
probe in flight and ends a build under way before it exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock_time
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from observer.domain import Outcome, RunState
from observer.reports.compute.criteria.result import Status
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import load_verdict
from observer.settings import load_settings
from observer.storage.store import Store
from tests.support.waiting import wait_until


@pytest.mark.parametrize(
    "burst",
    [
        [signal.SIGTERM],
        # As GNU timeout, a forwarding supervisor or Ctrl-C pressed twice deliver them: every
        # signal after the first arrives while the first is being dealt with.
        [signal.SIGTERM, signal.SIGTERM, signal.SIGTERM, signal.SIGINT, signal.SIGINT],
    ],
    ids=["sigterm", "sigterm-x3-sigint-x2"],
)
def test_runs_the_plan_serves_health_and_cancels_probes_on_signals(
    tmp_path: Path, burst: list[signal.Signals]
):
    db = tmp_path / "observer.db"
    extra = (
        "  probes: {long: {duration_seconds: 3600}}\n"
        "  max_probe_gpus: 4\n"
        "  shutdown_deadline_seconds: 5\n"
    )
    with _controller(tmp_path, extra) as (proc, base):
        assert proc.stderr is not None
        deadline = time.monotonic() + 20
        while True:
            health = httpx.get(f"{base}/healthz")
            active = httpx.get(f"{base}/v1/snapshot").json()["active_runs"]
            if health.status_code == 200 and len(active) >= 2:
                break
            assert time.monotonic() < deadline, (health.text, active)
            time.sleep(0.2)
        assert health.json()["blind"] == []
        metrics = httpx.get(f"{base}/metrics").text
        assert 'observer_probe_runs_active{tenant="research"}' in metrics
        assert "observer_scheduler_last_snapshot_timestamp_seconds" in metrics

        started = time.monotonic()
        for sig in burst:
            proc.send_signal(sig)
        assert proc.wait(timeout=15) == 0
        assert time.monotonic() - started < 5  # shutdown_deadline_seconds
        events = [json.loads(line) for line in proc.stderr.read().splitlines()]
    stopped = [e for e in events if e.get("event") == "controller stopped"]
    assert stopped and stopped[0]["cancelled_runs"] >= 2

    with Store(f"sqlite:///{db}") as store:
        runs = store.runs()
    assert runs
    assert all(r.state is RunState.DONE for r in runs)
    assert {r.outcome for r in runs} == {Outcome.CANCELLED}
    assert all(r.reason == "ControllerShutdown" for r in runs)


def test_probes_a_sigterm_cancelled_are_the_observers_own_not_failure_evidence(tmp_path: Path):
    extra = (
        "  probes: {long: {duration_seconds: 3600}}\n"
        "  max_probe_gpus: 4\n"
        "  shutdown_deadline_seconds: 5\n"
    )
    with _controller(tmp_path, extra) as (proc, base):
        wait_until(
            lambda: len(httpx.get(f"{base}/v1/snapshot").json()["active_runs"]) >= 2,
            "two probes running",
            20,
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0

    settings = load_settings(tmp_path / "controller.yaml")
    with Store(f"sqlite:///{tmp_path / 'observer.db'}") as store:
        cancelled = store.runs()
        now = max(r.finished_at for r in cancelled if r.finished_at) + timedelta(seconds=1)
        verdict = build_verdict(load_verdict(store, settings, now, provisional=True))
    [evidence] = [c for c in verdict.criteria if c.criterion == "failure_evidence"]

    assert len(cancelled) >= 2
    assert evidence.status is not Status.FAIL
    assert Note("ev.cancelled_by_observer", {"runs": len(cancelled)}) in evidence.evidence
    assert verdict.figures.tasks.cancelled_by_observer == len(cancelled)
    assert verdict.figures.tasks.failed == 0


def test_a_hangup_is_logged_and_the_controller_carries_on_until_sigterm_cancels_its_probes(
    tmp_path: Path,
):
    extra = "  probes: {long: {duration_seconds: 3600}}\n  shutdown_deadline_seconds: 5\n"
    with _controller(tmp_path, extra) as (proc, base):
        assert proc.stderr is not None
        wait_until(
            lambda: httpx.get(f"{base}/v1/snapshot").json()["active_runs"], "a probe running", 20
        )
        proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert proc.poll() is None
        assert httpx.get(f"{base}/healthz").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        events = [json.loads(line) for line in proc.stderr.read().splitlines()]
    said = [e["event"] for e in events]
    assert any(event.startswith("SIGHUP received") for event in said)
    [stopped] = [e for e in events if e["event"] == "controller stopped"]
    assert stopped["cancelled_runs"] >= 1


def test_a_hung_submission_holds_up_neither_health_nor_snapshot_nor_detection(tmp_path: Path):
    extra = "  simulation: {submit_hang_seconds: 30}\n  shutdown_deadline_seconds: 2\n"
    with _controller(tmp_path, extra) as (proc, base):
        time.sleep(3)  # the first launch is in its 30 s submission by now
        with httpx.Client(base_url=base, timeout=1.0) as client:
            health = client.get("/healthz")
            # The follow loop is the one waiting on the platform, and health says so.
            assert health.status_code == 503
            assert health.json()["blind"] == ["follow"]
            assert client.get("/v1/snapshot").status_code == 200
            detected = _last_success(client.get("/metrics").text, "detect")
            time.sleep(1)
            assert _last_success(client.get("/metrics").text, "detect") > detected
            sampled = _last_success(client.get("/metrics").text, "scheduler")
            assert sampled > time.time() - 2
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)


def test_yesterdays_summary_is_written_within_a_minute_of_the_daily_build_time(tmp_path: Path):
    zone = _noon_zone()  # the build time a few seconds ahead is today's, whatever the hour
    build = (datetime.now(zone) + timedelta(seconds=15)).replace(microsecond=0)
    yesterday = build.date() - timedelta(days=1)
    reports = tmp_path / "reports"
    summary = reports / f"daily-{yesterday.isoformat()}.json"
    others = (
        f"reports: {{output_dir: '{reports}', daily_build_time: '{build.time()}', "
        f"soak_started_at: '{datetime.combine(yesterday, clock_time(), zone).isoformat()}'}}\n"
    )
    with _controller(tmp_path, f"  timezone: {zone.key}\n", others) as (proc, _):
        # Started before the build time: yesterday is not due yet, so it is not written at start.
        assert datetime.now(zone) < build - timedelta(seconds=2), "the controller started late"
        assert not summary.exists()
        wait_until(summary.exists, "yesterday's summary", 15 + 60)
        written = datetime.fromtimestamp(summary.stat().st_mtime, zone)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)

    assert build <= written <= build + timedelta(seconds=60)
    assert json.loads(summary.read_text(encoding="utf-8"))["report"] == "daily"


def test_the_daily_summaries_are_built_by_a_process_of_their_own_logging_as_the_controller(
    tmp_path: Path,
):
    zone = _noon_zone()
    today = datetime.now(zone).date()
    days = [today - timedelta(days=2), today - timedelta(days=1)]
    reports = tmp_path / "reports"
    summaries = [reports / f"daily-{day.isoformat()}.json" for day in days]
    with _controller(
        tmp_path, f"  timezone: {zone.key}\n", _soak_reports(reports, days[0], zone)
    ) as (proc, _):
        assert proc.stderr is not None
        wait_until(lambda: all(s.exists() for s in summaries), "both days' summaries", 60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        events = [json.loads(line) for line in proc.stderr.read().splitlines()]

    written = [e for e in events if e["event"] == "daily summary written"]
    assert [e["day"] for e in written] == [day.isoformat() for day in days]
    assert {e["level"] for e in written} == {"info"}
    [builder] = {e["pid"] for e in written}
    assert builder != proc.pid
    assert [json.loads(s.read_text(encoding="utf-8"))["report"] for s in summaries] == [
        "daily",
        "daily",
    ]


def test_sigterm_during_a_long_report_build_stops_the_controller_and_the_build_within_3_s(
    tmp_path: Path,
):
    zone = _noon_zone()
    reports = tmp_path / "reports"
    a_year_ago = datetime.now(zone).date() - timedelta(days=365)
    with _controller(
        tmp_path,
        f"  timezone: {zone.key}\n  shutdown_deadline_seconds: 5\n",
        _soak_reports(reports, a_year_ago, zone),
    ) as (proc, _):
        assert proc.stderr is not None
        wait_until(lambda: list(reports.glob("daily-*.json")), "the first summary", 60)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert time.monotonic() - started < 3
        events = [json.loads(line) for line in proc.stderr.read().splitlines()]

    [builder] = {e["pid"] for e in events if e["event"] == "daily summary written"}
    with pytest.raises(ProcessLookupError):
        os.kill(builder, 0)
    written = sorted(reports.iterdir())
    assert 0 < len(written) < 365 * 4
    time.sleep(0.5)
    assert sorted(reports.iterdir()) == written


def _noon_zone() -> ZoneInfo:
    """A platform whose local time is about noon: past the default daily build time (08:00),
    and far from midnight, so that today and yesterday stay what they are while a test runs."""
    hours = (12 - datetime.now(UTC).hour + 12) % 24 - 12
    return ZoneInfo(f"Etc/GMT{-hours:+d}")  # the Etc zones' signs are inverted


def _soak_reports(reports: Path, first: date, zone: ZoneInfo) -> str:
    """The reports group of a soak that began on `first` (platform time), written to `reports`."""
    started = datetime.combine(first, clock_time(), zone).isoformat()
    return f"reports: {{output_dir: '{reports}', soak_started_at: '{started}'}}\n"


@contextmanager
def _controller(
    tmp_path: Path, settings: str, others: str = ""
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`observer controller` over the simulated cluster, a long probe launched every second,
    with `settings` (lines of the controller group) and `others` (other groups) added; the
    process and its base URL; killed if the test left it running."""
    config = tmp_path / "controller.yaml"
    config.write_text(
        "controller:\n"
        "  backend: simulated\n"
        "  windows: [{name: always, days: '*', start: '00:00', end: '00:00'}]\n"
        "  plan: [{window: always, probe: long, every_seconds: 1}]\n"
        "  follow_interval_seconds: 0.2\n"
        "  snapshot_interval_seconds: 0.5\n"
        "  listen_host: 127.0.0.1\n"
        "  listen_port: 0\n"
        f"{settings}"
        f"storage: {{sqlite_path: {tmp_path / 'observer.db'}}}\n"
        "logging: {format: json}\n"
        f"{others}"
    )
    with subprocess.Popen(
        [sys.executable, "-m", "observer.cli", "controller", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        assert proc.stderr is not None
        port = next(
            json.loads(line)["port"]
            for line in proc.stderr
            if json.loads(line).get("event") == "controller listening"
        )
        try:
            yield proc, f"http://127.0.0.1:{port}"
        finally:
            if proc.poll() is None:  # a test that failed before its SIGTERM
                proc.kill()


def _last_success(metrics: str, loop: str) -> float:
    prefix = f'observer_loop_last_success_timestamp_seconds{{loop="{loop}"}} '
    [line] = [line for line in metrics.splitlines() if line.startswith(prefix)]
    return float(line.removeprefix(prefix))
