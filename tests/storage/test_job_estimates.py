"""What migration 0020 keeps, the same on SQLite and PostgreSQL: each job seen waiting, its
first estimate of its start (and when it was seen) and the last before it started, written
once when it first gets one and once at its start; a job that started with none; a probe
run's own estimate of its wait."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from observer.domain import SchedulerSnapshot
from observer.records import JobEstimate, JobOrigin
from observer.storage.database import upgrade
from observer.storage.store import Store
from tests.storage.test_probe_runs import submitted
from tests.storage.test_store import migrate

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


@pytest.fixture
def store(db_url: str):
    upgrade(db_url)
    with Store(db_url) as opened:
        yield opened


def waiting(job_id: str, expected: datetime | None, seen: datetime) -> JobEstimate:
    first_seen = seen if expected is not None else None
    return JobEstimate(job_id, "prod", JobOrigin.TENANT, 4, expected, first_seen, expected)


def test_a_job_keeps_its_first_estimate_and_its_last_one_before_it_started(store: Store):
    first = waiting("7", T0 + 30 * MINUTE, T0)
    store.save_scheduler_snapshot(SchedulerSnapshot(T0, (), (), ()), estimates=[first])
    assert store.job_estimates(T0, T0 + timedelta(days=1)) == []  # not started yet

    started = replace(first, last_expected_start_at=T0 + 40 * MINUTE, started_at=T0 + 45 * MINUTE)
    store.save_job_estimates([started])

    assert store.job_estimates(T0, T0 + timedelta(days=1)) == [started]


def test_a_restarted_controller_keeps_what_was_stored_before(store: Store):
    first = waiting("7", T0 + 30 * MINUTE, T0)
    store.save_job_estimates([first])
    # seen anew after a restart: a later first estimate, then a start with none seen since
    store.save_job_estimates([waiting("7", T0 + 50 * MINUTE, T0 + 20 * MINUTE)])
    store.save_job_estimates([replace(waiting("7", None, T0), started_at=T0 + 45 * MINUTE)])

    # the first stays the first; the last is the latest seen, before the restart or after
    assert store.job_estimates(T0, T0 + timedelta(days=1)) == [
        replace(first, last_expected_start_at=T0 + 50 * MINUTE, started_at=T0 + 45 * MINUTE)
    ]


def test_a_job_that_started_with_no_estimate_is_kept_with_none(store: Store):
    none = replace(waiting("8", None, T0), started_at=T0 + 5 * MINUTE)
    store.save_job_estimates([none])

    [kept] = store.job_estimates(T0, T0 + timedelta(days=1))
    assert kept == none and kept.first_expected_start_at is None


def test_a_run_keeps_the_observers_own_estimate_of_its_wait(store: Store):
    run = replace(submitted("r1", T0), expected_wait_seconds=1800.0)
    store.save_runs([run])

    assert store.run("r1") == run


def test_migration_0020_goes_both_ways(db_url: str, inspect_engine: sa.Engine):
    migrate(db_url, "0019")
    upgrade(db_url)
    inspector = sa.inspect(inspect_engine)
    assert "job_estimates" in inspector.get_table_names()
    assert "expected_wait_seconds" in {c["name"] for c in inspector.get_columns("probe_runs")}

    migrate(db_url, "0019", down=True)

    inspector = sa.inspect(inspect_engine)
    assert "job_estimates" not in inspector.get_table_names()
    assert "expected_wait_seconds" not in {c["name"] for c in inspector.get_columns("probe_runs")}
