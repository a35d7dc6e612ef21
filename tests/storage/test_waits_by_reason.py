"""What migration 0018 keeps, the same on SQLite and PostgreSQL: the tenants' own jobs' time
pending per slot, tenant and reason, added to by every snapshot stored; the listed jobs'
waits by who submitted them (those kept before read back with no origin, and going back
adds up the waits that differed by it alone); the user a probe run ran as."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from observer.domain import SchedulerSnapshot
from observer.records import JobOrigin, JobSlot, JobWait, PendingTime
from observer.storage.database import upgrade
from observer.storage.store import Store
from observer.storage.tables import UtcDateTime, job_listings_table
from tests.storage.test_probe_runs import submitted
from tests.storage.test_store import migrate

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
QUARTER = timedelta(minutes=15)
# job_waits as migration 0012 made it, before origins were kept.
_WAITS_0017 = sa.table(
    "job_waits",
    sa.column("slot", UtcDateTime()),
    sa.column("tenant"),
    sa.column("wait_seconds"),
    sa.column("jobs"),
)


@pytest.fixture
def store(db_url: str):
    upgrade(db_url)
    with Store(db_url) as opened:
        yield opened


def _snapshot(at: datetime) -> SchedulerSnapshot:
    return SchedulerSnapshot(at=at, queues=(), nodes=(), jobs=())


def test_each_snapshot_adds_its_pending_time_to_its_slot_tenant_and_reason(store: Store):
    first = [PendingTime(T0, "batch", "Priority", 60.0), PendingTime(T0, "batch", "QOSMax", 30.0)]
    second = [
        PendingTime(T0, "batch", "Priority", 90.0),
        PendingTime(T0 + QUARTER, "prod", "Resources", 15.0),
    ]
    store.save_scheduler_snapshot(_snapshot(T0 + timedelta(seconds=30)), first)
    store.save_scheduler_snapshot(_snapshot(T0 + timedelta(seconds=60)), second)

    assert store.pending_times(T0, T0 + 2 * QUARTER) == [
        PendingTime(T0, "batch", "Priority", 60.0 + 90.0),
        PendingTime(T0, "batch", "QOSMax", 30.0),
        PendingTime(T0 + QUARTER, "prod", "Resources", 15.0),
    ]
    assert store.pending_times(T0 + QUARTER, T0 + 2 * QUARTER) == [second[1]]


def test_a_run_keeps_the_user_the_platform_ran_it_as(store: Store):
    run = replace(submitted("r1", T0), user="alice")
    store.save_runs([run, submitted("r2", T0)])

    assert store.run("r1") == run
    assert (store.run("r2") or run).user is None


def test_migration_0018_keeps_the_waits_with_no_origin_and_going_back_adds_them_up(
    db_url: str, inspect_engine: sa.Engine
):
    migrate(db_url, "0017")
    with inspect_engine.begin() as connection:
        connection.execute(
            sa.insert(job_listings_table),
            {"slot": T0, "listed_until": T0 + QUARTER, "complete": True, "note": ""},
        )
        connection.execute(
            sa.insert(_WAITS_0017), {"slot": T0, "tenant": "prod", "wait_seconds": 5, "jobs": 2}
        )

    upgrade(db_url)

    def listed(*waits: JobWait) -> list[JobSlot]:
        return [JobSlot(T0, T0 + QUARTER, True, "", (), waits)]

    with Store(db_url) as store:
        assert store.job_slots(T0, T0 + QUARTER) == listed(JobWait("prod", 5, 2, origin=None))
        store.save_job_slots(
            listed(JobWait("prod", 5, 2), JobWait("prod", 5, 1, JobOrigin.OBSERVER))
        )
        assert store.job_slots(T0, T0 + QUARTER) == listed(
            JobWait("prod", 5, 1, JobOrigin.OBSERVER), JobWait("prod", 5, 2)
        )

    migrate(db_url, "0017", down=True)

    inspector = sa.inspect(inspect_engine)
    assert "job_pending" not in inspector.get_table_names()
    assert "user" not in {c["name"] for c in inspector.get_columns("probe_runs")}
    with inspect_engine.connect() as connection:
        rows = connection.execute(sa.text("SELECT tenant, wait_seconds, jobs FROM job_waits")).all()
    assert [tuple(row) for row in rows] == [("prod", 5, 3)]
