"""Every tenant's finished jobs, stored as counts per quarter hour of their end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from observer.domain import JobPhase
from observer.records import JobSlot, JobTally, job_slot
from observer.storage.database import upgrade
from observer.storage.store import Store

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
    failed = JobTally("prod", JobPhase.FAILED, "NonZeroExitCode", 2)
    done = JobTally("research", JobPhase.SUCCEEDED, None, 5)
    store.save_job_slots(
        [slot(T0 + QUARTER, complete=False), slot(T0, done, failed)],
    )

    assert store.job_slots(T0, T0 + 2 * QUARTER) == [
        slot(T0, failed, done),
        slot(T0 + QUARTER, complete=False),
    ]
    assert store.job_slots(T0 + QUARTER, T0 + 2 * QUARTER) == [slot(T0 + QUARTER, complete=False)]
    assert store.jobs_listed_until() == T0 + 2 * QUARTER


def test_listing_a_slot_again_replaces_its_tallies(store: Store):
    store.save_job_slots([slot(T0, JobTally("prod", JobPhase.FAILED, "OOMKilled", 1))])
    partial = JobSlot(T0, T0 + timedelta(minutes=5), True, "", ())
    store.save_job_slots([partial])
    whole = slot(
        T0,
        JobTally("prod", JobPhase.FAILED, "OOMKilled", 1),
        JobTally("prod", JobPhase.SUCCEEDED, None, 3),
    )
    store.save_job_slots([whole])

    assert store.job_slots(T0, T0 + QUARTER) == [whole]


def test_nothing_listed_yet_reads_as_no_slots_and_no_end(store: Store):
    assert store.job_slots(T0, T0 + QUARTER) == []
    assert store.jobs_listed_until() is None
