"""slurmctld frozen (SIGSTOP) for three minutes under a running controller, then thawed:
every Slurm command hangs until its timeout meanwhile. The controller stays up and answers
/healthz and /v1/snapshot within a second, naming the scheduler as blind; nothing opens or
closes from the frozen view; the stretch is the scheduler's blind time; probes resume."""

from __future__ import annotations

import os
import signal
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from observer.domain import Outcome
from observer.reports.compute.data import Period
from observer.reports.compute.events import BLIND_DETECTORS, blind_figures
from observer.reports.inputs import load_period, report_context, soak_started_at
from observer.settings import load_settings
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmCluster, slurm_harness
from tests.faults.daemon import Controller, controller, slurm_config, stop
from tests.support.waiting import wait_until

# Real time on the real components, and a shared Slurm another test may hold: not 120 s.
# The other Slurm tests run on the same xdist worker, in turn, so none sees it frozen.
pytestmark = pytest.mark.timeout(600)

FROZEN_SECONDS = 180
SNAPSHOT_INTERVAL_SECONDS = 1


def test_a_frozen_slurmctld_is_blind_time_that_opens_and_closes_nothing(
    slurm_cluster: SlurmCluster, tmp_path: Path
):
    url = f"sqlite:///{tmp_path / 'observer.db'}"
    log = tmp_path / "controller.log"
    with slurm_harness(slurm_cluster) as slurm:
        pid = int((slurm.cluster.files / "run" / "slurmctld.pid").read_text())
        config = slurm_config(
            tmp_path, slurm, url, snapshot_interval_seconds=SNAPSHOT_INTERVAL_SECONDS
        )
        with controller(config, log) as ctl:
            wait_until(
                lambda: _passed_since(url, datetime.min.replace(tzinfo=UTC)),
                "no probe passed",
                seconds=60,
                poll_seconds=0.5,
            )
            assert ctl.get("/healthz").json()["blind"] == []
            frozen_at = datetime.now(UTC)
            os.kill(pid, signal.SIGSTOP)
            answers: list[dict[str, Any]] = []
            try:
                while datetime.now(UTC) < frozen_at + timedelta(seconds=FROZEN_SECONDS):
                    answers.append(_answers_within_a_second(ctl))
                    _hang_up_early(ctl)
                    time.sleep(2)
            finally:
                thawed_at = datetime.now(UTC)
                os.kill(pid, signal.SIGCONT)
            wait_until(
                lambda: ctl.get("/healthz").json()["blind"] == [],
                "the controller stayed blind after the thaw",
                seconds=60,
                poll_seconds=0.5,
            )
            wait_until(
                lambda: _passed_since(url, thawed_at),
                "no probe passed after the thaw",
                seconds=60,
                poll_seconds=0.5,
            )
            stop(ctl)
        logged = log.read_text()

    assert "scheduler" in answers[-1]["blind"]
    assert all(a["active_runs"] >= 0 for a in answers)
    # Clients that hung up left no traceback, raw or logged.
    assert "Traceback" not in logged
    with Store(url) as store:
        findings = store.findings()
        settings = load_settings(config)
        started = soak_started_at(store, settings)
        assert started is not None
        context = report_context(settings, started)
        data = load_period(store, context, Period(started, datetime.now(UTC)))
        blind = blind_figures(data, context)
    # Nothing the scheduler's view decides opened or closed while the view was frozen.
    decided_in_the_dark = [
        f
        for f in findings
        if f.detector not in BLIND_DETECTORS
        and any(t and frozen_at < t < thawed_at for t in (f.opened_at, f.closed_at))
    ]
    assert decided_in_the_dark == []
    covered = [
        p
        for p in blind.periods
        if p.source == "scheduler" and p.start < thawed_at < p.end + timedelta(seconds=30)
    ]
    assert covered, blind.periods
    assert sum(p.seconds for p in covered) > FROZEN_SECONDS - 15


def _answers_within_a_second(ctl: Controller) -> dict[str, Any]:
    started = time.monotonic()
    health = ctl.get("/healthz")
    assert ctl.get("/v1/snapshot").status_code == 200
    assert time.monotonic() - started < 2  # two answers, each within ctl.get's 1 s timeout
    body: dict[str, Any] = health.json()
    body["active_runs"] = int(body["active_runs"])
    return body


def _hang_up_early(ctl: Controller) -> None:
    """A client that gives up (a readiness probe past its timeout): asks and hangs up."""
    address = urlsplit(ctl.base)
    with socket.create_connection((address.hostname, address.port), timeout=1) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def _passed_since(url: str, since: datetime) -> bool:
    with Store(url) as store:
        return any(
            r.outcome is Outcome.PASSED and r.submitted_at and r.submitted_at > since
            for r in store.runs()
        )
