"""The controller's daily summaries built in a process of their own: the same files as a build
in the controller's process; what the build failed with, as the same error with the same
message (a store failure as the controller's store outage); a build process that dies, runs
past its time or is stopped with the controller, ended and one ReportError."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from observer.errors import ReportError, StoreError
from observer.reports.apart import build_apart
from observer.reports.publish import due_days, write_daily
from observer.settings import Settings
from observer.storage.store import Store
from tests.reports.builders import run
from tests.support.databases import migrated_sqlite

NOW = datetime(2026, 12, 10, 12, tzinfo=UTC)
DAY = date(2026, 12, 8)
LONG = 60.0  # seconds: no build here comes near it


def _settings(output: Path, days: int = 3) -> Settings:
    return Settings.model_validate(
        {
            "reports": {
                "output_dir": str(output),
                "soak_started_at": (NOW - timedelta(days=days)).isoformat(),
            }
        }
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(migrated_sqlite(tmp_path / "observer.db")) as store:
        store.save_runs([run(submitted=NOW - timedelta(days=2, hours=h)) for h in range(4)])
        yield store


def test_a_summary_built_apart_is_byte_for_byte_the_one_built_here(store: Store, tmp_path: Path):
    apart, here = _settings(tmp_path / "apart"), _settings(tmp_path / "here")

    [written] = build_apart(store, apart, [DAY], NOW, threading.Event(), LONG)

    assert written.day == DAY
    assert written.ends_at == datetime(2026, 12, 9, tzinfo=UTC)
    built_here = write_daily(store, here, DAY, NOW)
    assert [p.name for p in written.paths] == [p.name for p in built_here]
    assert [p.read_bytes() for p in written.paths] == [p.read_bytes() for p in built_here]
    assert due_days(store, apart, NOW) == [DAY - timedelta(days=1), DAY + timedelta(days=1)]


def test_a_failed_write_arrives_as_the_report_error_a_build_here_raises(
    store: Store, tmp_path: Path
):
    (tmp_path / "reports").write_text("not a directory")
    settings = _settings(tmp_path / "reports")
    with pytest.raises(ReportError) as here:
        write_daily(store, settings, DAY, NOW)

    with pytest.raises(ReportError) as apart:
        list(build_apart(store, settings, [DAY], NOW, threading.Event(), LONG))

    assert str(apart.value) == str(here.value)
    assert str(apart.value).startswith(f"cannot write {tmp_path / 'reports'}")
    assert store.outage is None


def test_a_store_failure_of_the_build_is_the_controllers_store_outage(store: Store, tmp_path: Path):
    (tmp_path / "observer.db").unlink()  # the build opens the database again: it is gone

    with pytest.raises(StoreError) as failed:
        list(build_apart(store, _settings(tmp_path), [DAY], NOW, threading.Event(), LONG))

    assert type(failed.value) is StoreError
    assert "schema revision none (no such file)" in str(failed.value)
    assert store.outage is not None
    assert store.outage.error == str(failed.value)


def test_a_build_process_killed_is_one_report_error_naming_the_signal(store: Store, tmp_path: Path):
    settings = _settings(tmp_path / "reports", days=30)
    built = build_apart(
        store, settings, due_days(store, settings, NOW), NOW, threading.Event(), LONG
    )
    next(built)
    [child] = multiprocessing.active_children()
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)

    with pytest.raises(ReportError, match=r"process ended without an answer \(killed by SIGKILL\)"):
        list(built)

    assert multiprocessing.active_children() == []


def test_a_build_past_its_time_is_ended(store: Store, tmp_path: Path):
    settings = _settings(tmp_path / "reports", days=30)

    with pytest.raises(ReportError, match=r"wrote no summary in 0\.01 s and was stopped"):
        list(
            build_apart(
                store, settings, due_days(store, settings, NOW), NOW, threading.Event(), 0.01
            )
        )

    assert multiprocessing.active_children() == []


def test_a_build_is_ended_within_a_second_of_the_controllers_stop(store: Store, tmp_path: Path):
    settings = _settings(tmp_path / "reports", days=30)
    stop = threading.Event()
    built = build_apart(store, settings, due_days(store, settings, NOW), NOW, stop, LONG)
    next(built)

    stop.set()
    stopped = time.monotonic()
    with pytest.raises(ReportError, match="stopped with the controller"):
        list(built)

    assert time.monotonic() - stopped < 1
    assert multiprocessing.active_children() == []
    written = sorted(p.name for p in (tmp_path / "reports").iterdir())
    time.sleep(0.5)
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == written
