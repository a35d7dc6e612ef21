"""slurmdbd stopped under a running controller, then started again: sacct and sacctmgr are
refused while squeue answers. The controller says so on /healthz (200, "accounting
failing", with Slurm's words) and opens one accounting_unreachable condition, closed when
slurmdbd is back; the stretch is the accounting's blind time, and the probes go on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from observer.domain import Outcome
from observer.reports.compute.data import Period
from observer.reports.compute.events import blind_figures
from observer.reports.inputs import load_period, report_context, soak_started_at
from observer.settings import load_settings
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmCluster, SlurmHarness, slurm_harness
from tests.faults.daemon import controller, slurm_config, stop
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(600)

# Long enough for several listings to fail (one every LISTING_SECONDS) and for the blind time
# to stand well above their cadence; the two minutes prove nothing more.
OUTAGE_SECONDS = 60
LISTING_SECONDS = 2


def test_slurmdbd_down_is_the_accountings_blind_time_and_named_on_healthz(
    slurm_cluster: SlurmCluster, tmp_path: Path
):
    url = f"sqlite:///{tmp_path / 'observer.db'}"
    log = tmp_path / "controller.log"
    with slurm_harness(slurm_cluster) as slurm:
        config = slurm_config(tmp_path, slurm, url, job_listing_interval_seconds=LISTING_SECONDS)
        with controller(config, log) as ctl:
            wait_until(
                lambda: _listed_and_ok(ctl.get("/healthz").json()),
                "the controller was not ok with a listing made at the start",
                seconds=60,
                poll_seconds=0.5,
            )
            stopped_at = datetime.now(UTC)
            answers: list[tuple[int, dict[str, Any]]] = []
            try:
                _stop_slurmdbd(slurm)
                while (datetime.now(UTC) - stopped_at).total_seconds() < OUTAGE_SECONDS:
                    health = ctl.get("/healthz")
                    answers.append((health.status_code, health.json()))
                    time.sleep(2)
                # slurm-up.sh of a session started meanwhile without the lock around it
                assert _slurmdbd(slurm) is None, "slurmdbd was started again"
            finally:
                _start_slurmdbd(slurm)
            restarted_at = datetime.now(UTC)
            wait_until(
                lambda: ctl.get("/healthz").json()["status"] == "ok",
                "the controller still named the accounting after slurmdbd was back",
                seconds=60,
                poll_seconds=0.5,
            )
            back = ctl.get("/healthz").json()
            wait_until(
                lambda: _passed_since(url, restarted_at),
                "no probe passed after the outage",
                seconds=60,
                poll_seconds=0.5,
            )
            stop(ctl)

    code, during = answers[-1]
    assert code == 200
    assert during["status"] == "accounting failing"
    assert during["parts"]["scheduler"] == "ok"
    assert "sacct" in during["errors"]["accounting"]  # Slurm's words, not a made-up one
    assert back["parts"]["accounting"] == "ok"
    with Store(url) as store:
        [down] = store.findings(detector="accounting_unreachable")
        passed_during = [
            r
            for r in store.runs()
            if r.outcome is Outcome.PASSED
            and r.submitted_at
            and stopped_at < r.submitted_at < restarted_at
        ]
        settings = load_settings(config)
        soak_start = soak_started_at(store, settings)
        assert soak_start is not None
        context = report_context(settings, soak_start)
        blind = blind_figures(
            load_period(store, context, Period(soak_start, datetime.now(UTC))), context
        )
    assert stopped_at < down.opened_at < stopped_at + timedelta(seconds=3 * LISTING_SECONDS)
    assert down.closed_at is not None
    assert restarted_at < down.closed_at < restarted_at + timedelta(seconds=60)
    assert passed_during, "the probes stopped while only the accounting was down"
    assert blind.by_source["accounting"] > OUTAGE_SECONDS - 3 * LISTING_SECONDS
    assert blind.by_source["accounting"] < OUTAGE_SECONDS + 60
    assert blind.by_source["scheduler"] < 10


def _listed_and_ok(health: dict[str, Any]) -> bool:
    return health["status"] == "ok" and health["last_good_tick_age_seconds"]["jobs"] is not None


def _pid(slurm: SlurmHarness) -> Path:
    return slurm.cluster.files / "run" / "slurmdbd.pid"


def _slurmdbd(slurm: SlurmHarness) -> int | None:
    """slurmdbd's pid while it runs (it removes its pid file when it stops)."""
    try:
        pid = int(_pid(slurm).read_text())
    except FileNotFoundError:
        return None
    return pid if _alive(pid) else None


def _stop_slurmdbd(slurm: SlurmHarness) -> None:
    pid = _slurmdbd(slurm)
    assert pid is not None, "slurmdbd was not running"
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not _alive(pid), "slurmdbd did not stop", seconds=30, poll_seconds=0.2)


def _start_slurmdbd(slurm: SlurmHarness) -> None:
    """As the up script starts it (it daemonises, its configuration beside SLURM_CONF); back
    once sacct answers."""
    env = {**os.environ, "SLURM_CONF": str(slurm.slurm_conf)}
    if _slurmdbd(slurm) is None:
        subprocess.run(slurm.cluster.installed("slurmdbd"), check=True, timeout=30)
    wait_until(
        lambda: (
            subprocess.run(
                [slurm.cluster.program("sacct"), "-n", "-X", "-S", "now-1minutes"],
                env=env,
                capture_output=True,
                check=False,
                timeout=10,
            ).returncode
            == 0
        ),
        "sacct did not answer after slurmdbd was started again",
        seconds=60,
        poll_seconds=0.5,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _passed_since(url: str, since: datetime) -> bool:
    with Store(url) as store:
        return any(
            r.outcome is Outcome.PASSED and r.submitted_at and r.submitted_at > since
            for r in store.runs()
        )
