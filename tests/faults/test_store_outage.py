"""PostgreSQL stopped for 60 s, then started again, while the controller runs probes on the
real Slurm: the controller keeps running and says the store is blind, keeps what it saw
until the store is back, loses no run and counts none twice; the outage is one condition
and the daily summary's blind time of the store."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from observer.domain import RunState
from observer.reports.compute.data import Period
from observer.reports.compute.events import blind_figures
from observer.reports.inputs import load_period, report_context, soak_started_at
from observer.settings import load_settings
from observer.storage.database import upgrade
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmCluster, slurm_harness
from tests.faults.daemon import accounted_jobs, controller, slurm_config, stop
from tests.support.waiting import wait_until

# Real time on the real components, and a shared Slurm another test may hold: not 120 s.
# Every test that uses PostgreSQL runs on this one's xdist worker, so stopping it fails no other.
pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

OUTAGE_SECONDS = 60


def test_a_minute_without_postgresql_loses_no_run_and_is_the_stores_blind_time(
    slurm_cluster: SlurmCluster, tmp_path: Path, postgres_schema_url: str
):
    cluster = _cluster()
    log = tmp_path / "controller.log"
    url = postgres_schema_url
    with slurm_harness(slurm_cluster) as slurm:
        upgrade(url)
        since = datetime.now(UTC) - timedelta(seconds=1)
        # Long probes launched before the outage end in it: their outcomes must not be lost.
        config = slurm_config(
            tmp_path,
            slurm,
            url,
            probes={"short": {"duration_seconds": 2}, "long": {"duration_seconds": 15}},
            plan=[
                {"window": "always", "probe": "short", "every_seconds": 2},
                {"window": "always", "probe": "long", "every_seconds": 3},
            ],
        )
        with controller(config, log) as ctl:
            time.sleep(8)
            down_at = datetime.now(UTC)
            _pg(cluster, "stop")
            seen: list[dict[str, Any]] = []
            try:
                while datetime.now(UTC) < down_at + timedelta(seconds=OUTAGE_SECONDS):
                    started = time.monotonic()
                    seen.append(ctl.get("/healthz").json())
                    assert time.monotonic() - started < 1
                    assert ctl.proc.poll() is None
                    time.sleep(1)
            finally:
                up_at = datetime.now(UTC)  # asked: the server may serve before the command ends
                _pg(cluster, "start")
            wait_until(
                lambda: "store" not in ctl.get("/healthz").json()["blind"],
                "the controller stayed blind to the store",
                seconds=30,
                poll_seconds=0.5,
                ignoring=(OSError,),
            )
            time.sleep(6)
            stop(ctl)
        with Store(url) as store:
            runs = {run.run_id: run for run in store.runs()}
            outages = store.findings(detector="store_unreachable")
            blind = _blind_seconds(config, store, datetime.now(UTC))
        jobs = accounted_jobs(slurm, since, {r.job_id for r in runs.values() if r.job_id})

    assert any("store" in h["blind"] and h["store_error"] for h in seen)
    # Every job Slurm ran is one stored run with its outcome, those that ended in the dark too.
    per_run = Counter(run_id for run_id, _ in jobs.values())
    assert max(per_run.values()) == 1
    assert set(per_run) == {r.run_id for r in runs.values() if r.job_id}
    assert all(run.state is RunState.DONE for run in runs.values())
    ended_in_the_dark = [
        r for r in runs.values() if r.finished_at and down_at < r.finished_at < up_at
    ]
    assert ended_in_the_dark, "no probe ended while the store was down"
    assert any(r.submitted_at and r.submitted_at > up_at for r in runs.values())

    [outage] = outages
    assert outage.closed_at is not None
    assert down_at <= outage.opened_at < down_at + timedelta(seconds=10)
    assert up_at <= outage.closed_at < up_at + timedelta(seconds=30)
    assert OUTAGE_SECONDS - 10 < blind["store"] < OUTAGE_SECONDS + 30


def _cluster() -> list[str]:
    """The local PostgreSQL cluster as pg_ctlcluster names it ([version, name])."""
    conf = Path("/etc/postgresql")
    if os.geteuid() != 0 or shutil.which("pg_ctlcluster") is None or not conf.is_dir():
        reason = "stopping PostgreSQL needs root and pg_ctlcluster (Debian's postgresql-common)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason + " (CI=true makes this fail)")
    version = sorted(conf.iterdir())[0].name
    return [version, "main"]


def _pg(cluster: list[str], action: str) -> None:
    subprocess.run(
        [
            "pg_ctlcluster",
            "--skip-systemctl-redirect",
            *cluster,
            action,
            *(["-m", "fast"] if action == "stop" else []),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )


def _blind_seconds(config: Path, store: Store, end: datetime) -> dict[str, float]:
    """The blind time by source the daily summary would show for the soak up to `end` (the
    day is not over: `observer report daily` refuses it), from the same loaders."""
    settings = load_settings(config)
    started = soak_started_at(store, settings)
    assert started is not None
    context = report_context(settings, started)
    return dict(blind_figures(load_period(store, context, Period(started, end)), context).by_source)
