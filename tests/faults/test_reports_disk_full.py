"""reports.output_dir on a full disk (a small tmpfs): the daily build fails with one line
naming the file and the reason, nothing half-written is ever visible there, the controller
carries on, and the next build after the space is back writes the whole summary."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, time
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.errors import ReportError
from observer.reports.publish import daily_paths, write_daily
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.cli import run_cli
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

T0 = datetime(2026, 11, 30, 20, 0, tzinfo=UTC)
DAY = T0.date()
STEP_SECONDS = 60.0


def test_a_full_reports_disk_loses_no_summary_and_never_shows_half_of_one(tmp_path: Path):
    with small_tmpfs(tmp_path / "reports") as reports:
        settings = controller_settings(
            plan=[{"window": "always", "probe": "short", "every_seconds": 600}],
            simulation={"nodes": 2, "gpus_per_node": 4, "pools": ["a"]},
            reports={
                "output_dir": str(reports),
                "soak_started_at": T0,
                "daily_build_time": time(0, 5),
            },
        )
        clock = ManualClock(T0)
        url = migrated_sqlite(tmp_path / "observer.db")
        registry = CollectorRegistry()
        with Store(url, clock) as store:
            soak = SimulatedSoak(
                settings, clock, store, simulated_cluster(settings, clock), registry=registry
            )
            filler = _fill(reports)
            # Past 00:05: the 30th is due, its build runs (every 10 min) and fails each time.
            soak.run_for(5 * 3600, lambda: clock.advance(STEP_SECONDS))
            assert _visible(reports) == ["filler"]
            failures = registry.get_sample_value("observer_report_errors_total", {"kind": "daily"})
            assert failures is not None and failures >= 2
            with pytest.raises(ReportError) as caught:
                write_daily(store, settings, DAY, clock.now())
            message = str(caught.value)
            assert message.startswith(f"cannot write {daily_paths(settings, DAY)[0]}")
            assert os.strerror(errno.ENOSPC) in message
            assert "\n" not in message
            assert _cli_report(tmp_path, settings) == (1, f"observer: {message}")
            assert _visible(reports) == ["filler"]

            filler.unlink()
            soak.run_for(700, lambda: clock.advance(STEP_SECONDS))
        written = _visible(reports)
        # The summary's three forms and, beside them, its per-task record and GPU-hours.
        csv = [f"daily-{DAY.isoformat()}.csv", f"daily-{DAY.isoformat()}-gpu_hours.csv"]
        assert written == sorted([*(p.name for p in daily_paths(settings, DAY)), *csv])
        summary = json.loads((reports / f"daily-{DAY.isoformat()}.json").read_text())
        assert summary["report"] == "daily"
        assert (reports / f"daily-{DAY.isoformat()}.html").read_text().rstrip().endswith("</html>")


def _visible(directory: Path) -> list[str]:
    """Every name in `directory`, temporary files included (a half-written report would
    show as one)."""
    return sorted(os.listdir(directory))


def _fill(directory: Path) -> Path:
    """A file that takes every free byte of the file system."""
    filler = directory / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(descriptor)
    return filler


def _cli_report(tmp_path: Path, settings: Settings) -> tuple[int, str]:
    config = tmp_path / "observer.yaml"
    tree = settings.model_dump(mode="json", exclude_defaults=True)
    tree.setdefault("storage", {})["sqlite_path"] = str(tmp_path / "observer.db")
    config.write_text(yaml.safe_dump(tree))
    done = run_cli("report", "daily", "--config", str(config), "--date", DAY.isoformat())
    return done.exit_code, done.stderr.strip()


@contextmanager
def small_tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    """`path`, a tmpfs of `size` (mount's words) while inside."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        reason = "mounting a tmpfs needs root"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason + " (CI=true makes this fail)")
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
