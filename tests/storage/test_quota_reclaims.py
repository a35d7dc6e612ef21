"""What migration 0012 keeps, the same on SQLite and PostgreSQL: the over-quota run a
quota-reclaim probe run follows, and the queue waits of every tenant's listed jobs per slot,
replaced whole when a slot is listed again. It upgrades a 0009 database with data in it and
reverts cleanly."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from observer.domain import Expectation, RunState
from observer.records import JobSlot, JobWait
from observer.storage.database import upgrade
from observer.storage.store import Store
from tests.storage.test_probe_runs import submitted
from tests.storage.test_store import migrate

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _slot(*waits: JobWait) -> JobSlot:
    return JobSlot(T0, T0 + timedelta(minutes=15), True, "", (), waits)


def test_a_reclaim_run_names_its_over_quota_run(store: Store):
    over = replace(submitted("over", T0), probe="quota", expectation=Expectation.BLOCKED)
    reclaim = replace(
        submitted("reclaim", T0 + timedelta(seconds=5)),
        probe="quota-reclaim",
        reclaims_run_id=over.run_id,
    )
    store.save_runs([over, reclaim])
    assert store.run(reclaim.run_id) == reclaim
    assert (store.run(over.run_id) or over).reclaims_run_id is None


def test_job_waits_come_back_with_their_slot_and_a_new_listing_replaces_them(store: Store):
    store.save_job_slots([_slot(JobWait("prod", 5, 2), JobWait("research", 0, 3))])
    store.save_job_slots([_slot(JobWait("research", 12, 1), JobWait("research", 400, 2))])

    [slot] = store.job_slots(T0, T0 + timedelta(hours=1))
    assert slot.waits == (JobWait("research", 12, 1), JobWait("research", 400, 2))


def test_migration_0012_upgrades_a_0011_database_and_reverts_cleanly(
    db_url: str, inspect_engine: sa.Engine
):
    migrate(db_url, "0011")
    before = submitted("kept", T0)
    engine = sa.create_engine(db_url)
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO probe_runs (run_id, probe, tenant, expectation, gpus, nodes, state, "
                "pending_reasons, node_names) VALUES (:id, 'short', 'research', 'succeed', 1, 1, "
                "'done', '{}', '[]')"
            ),
            {"id": before.run_id},
        )
    engine.dispose()
    upgrade(db_url)
    with Store(db_url) as store:
        kept = store.run(before.run_id)
        assert kept is not None and kept.reclaims_run_id is None and kept.state is RunState.DONE
        store.save_job_slots([_slot(JobWait("prod", 5, 2))])
        assert store.job_slots(T0, T0 + timedelta(hours=1))[0].waits == (JobWait("prod", 5, 2),)
    migrate(db_url, "0011", down=True)
    inspector = sa.inspect(inspect_engine)
    assert "job_waits" not in inspector.get_table_names()
    assert "reclaims_run_id" not in {c["name"] for c in inspector.get_columns("probe_runs")}
