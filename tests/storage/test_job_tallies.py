"""Every tenant's finished jobs, stored as counts per quarter hour of their end, a failed
job's by its cause too; tallies kept before causes were have none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from observer.domain import JobPhase
from observer.records import JobOrigin, JobSlot, JobTally, job_slot
from observer.storage.database import upgrade
from observer.storage.store import Store
from observer.storage.tables import UtcDateTime, job_listings_table
from tests.storage.test_store import migrate

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
QUARTER = timedelta(minutes=15)


@pytest.fixture
def store(db_url: str):
    upgrade(db_url)
    with Store(db_url) as opened:
        yield opened


def slot(start: datetime, *tallies: JobTally, complete: bool = True) -> JobSlot:
    note = "" if complete else "finished Jobs are deleted after their TTL"
    return JobSlot(start, start + QUARTER, complete, note, tallies)


def test_a_slot_is_the_quarter_hour_holding_an_instant_in_utc():
    shanghai = timezone(timedelta(hours=8))

    assert job_slot(datetime(2026, 11, 30, 10, 44, 59, 999, tzinfo=shanghai)) == datetime(
        2026, 11, 30, 2, 30, tzinfo=UTC
    )
    assert job_slot(T0) == T0


def test_stored_slots_read_back_with_their_tallies_in_order(store: Store):
    crashed = JobTally("prod", JobPhase.FAILED, "NonZeroExitCode", "application", 2)
    xid = JobTally("prod", JobPhase.FAILED, "NonZeroExitCode", "gpu_driver", 1)
    done = JobTally("research", JobPhase.SUCCEEDED, None, None, 5)
    store.save_job_slots(
        [slot(T0 + QUARTER, complete=False), slot(T0, done, xid, crashed)],
    )

    assert store.job_slots(T0, T0 + 2 * QUARTER) == [
        slot(T0, crashed, xid, done),
        slot(T0 + QUARTER, complete=False),
    ]
    assert store.job_slots(T0 + QUARTER, T0 + 2 * QUARTER) == [slot(T0 + QUARTER, complete=False)]
    assert store.jobs_listed_until() == T0 + 2 * QUARTER


def test_listing_a_slot_again_replaces_its_tallies(store: Store):
    store.save_job_slots(
        [slot(T0, JobTally("prod", JobPhase.FAILED, "OOMKilled", "application", 1))]
    )
    partial = JobSlot(T0, T0 + timedelta(minutes=5), True, "", ())
    store.save_job_slots([partial])
    whole = slot(
        T0,
        JobTally("prod", JobPhase.FAILED, "OOMKilled", "application", 1),
        JobTally("prod", JobPhase.SUCCEEDED, None, None, 3),
    )
    store.save_job_slots([whole])

    assert store.job_slots(T0, T0 + QUARTER) == [whole]


def test_nothing_listed_yet_reads_as_no_slots_and_no_end(store: Store):
    assert store.job_slots(T0, T0 + QUARTER) == []
    assert store.jobs_listed_until() is None


# job_tallies as migration 0006 made it, before causes were kept.
_TALLIES_0007 = sa.table(
    "job_tallies",
    sa.column("slot", UtcDateTime()),
    sa.column("tenant"),
    sa.column("phase"),
    sa.column("reason"),
    sa.column("jobs"),
)


def test_tallies_kept_before_causes_read_back_with_no_cause_nor_origin_and_going_back_adds_up(
    db_url: str, inspect_engine: sa.Engine
):
    migrate(db_url, "0007")
    with inspect_engine.begin() as connection:
        connection.execute(
            sa.insert(job_listings_table),
            {"slot": T0, "listed_until": T0 + QUARTER, "complete": True, "note": ""},
        )
        connection.execute(
            sa.insert(_TALLIES_0007),
            [
                {"slot": T0, "tenant": "prod", "phase": "failed", "reason": "Error", "jobs": 2},
                {"slot": T0, "tenant": "prod", "phase": "succeeded", "reason": "", "jobs": 7},
            ],
        )

    upgrade(db_url)

    # Who submitted them was not kept either: the observer's probes were among them.
    before = slot(
        T0,
        JobTally("prod", JobPhase.FAILED, "Error", None, 2, origin=None),
        JobTally("prod", JobPhase.SUCCEEDED, None, None, 7, origin=None),
    )
    with Store(db_url) as store:
        assert store.job_slots(T0, T0 + QUARTER) == [before]
        store.save_job_slots(
            [
                slot(
                    T0,
                    JobTally("prod", JobPhase.FAILED, "Error", "application", 2),
                    JobTally("prod", JobPhase.FAILED, "Error", "node", 1),
                    JobTally("prod", JobPhase.FAILED, "Error", "node", 1, JobOrigin.OBSERVER),
                    JobTally("prod", JobPhase.SUCCEEDED, None, None, 7),
                )
            ]
        )

    migrate(db_url, "0007", down=True)

    with inspect_engine.connect() as connection:
        rows = connection.execute(
            sa.select(_TALLIES_0007.c.phase, _TALLIES_0007.c.reason, _TALLIES_0007.c.jobs).order_by(
                _TALLIES_0007.c.phase
            )
        ).all()
    assert [tuple(row) for row in rows] == [("failed", "Error", 4), ("succeeded", "", 7)]
