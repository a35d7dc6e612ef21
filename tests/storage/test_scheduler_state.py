"""The store keeps the scheduler's queues on every snapshot but its nodes as a change log:
a week of a 1,000-node cluster sampled every 30 s stays small, and any instant's node
states can still be read back."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from observer.domain import JobPhase, JobStatus, QueueState, SchedulerNode, SchedulerSnapshot
from observer.records import StoredNodeChange, StoredQueueSample
from observer.storage.database import upgrade
from observer.storage.store import Store
from observer.storage.tables import queue_samples_table
from tests.storage.test_store import migrate

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
TICK = timedelta(seconds=30)
BEIJING = timezone(timedelta(hours=8))

QUEUES = (
    QueueState(
        tenant="team-a",
        queue="gpu",
        pending_jobs=3,
        pending_gpus=24,
        running_jobs=5,
        running_gpus=40,
        longest_wait_seconds=912.5,
        pending_reasons={"Resources": 2, "QOSMaxGRESPerUser": 1},
        nominal_gpus=32,
        borrowing_limit_gpus=8,
        running_gpus_by_priority={"high": 32, "normal": 8},
        running_gpus_by_user={"bob": 32, "carol": 8},
    ),
    QueueState(
        tenant="team-b",
        queue=None,
        pending_jobs=0,
        pending_gpus=0,
        running_jobs=1,
        running_gpus=8,
        longest_wait_seconds=0.0,
    ),
)


def node(name: str, *, allocated: int = 0, state: str = "idle") -> SchedulerNode:
    return SchedulerNode(
        name=name, pool="h200", gpus_total=8, gpus_allocated=allocated, state=state
    )


def snapshot(
    at: datetime, nodes: tuple[SchedulerNode, ...], queues: tuple[QueueState, ...] = QUEUES
) -> SchedulerSnapshot:
    job = JobStatus(
        job_id="17", run_id=None, tenant="team-a", queue="gpu", phase=JobPhase.RUNNING, gpus=8
    )
    return SchedulerSnapshot(at=at, queues=queues, nodes=nodes, jobs=(job,))


def count(engine: sa.Engine, table: str) -> int:
    with engine.connect() as connection:
        return int(connection.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


NODES = (node("gpu-001", allocated=8, state="allocated"), node("gpu-002"))


# --- queues ------------------------------------------------------------------------------


def test_every_snapshot_stores_its_queues_and_they_come_back_equal(store: Store) -> None:
    for i in range(3):
        store.save_scheduler_snapshot(snapshot(T0 + i * TICK, NODES))

    samples = store.queue_samples(T0, T0 + 3 * TICK)

    assert samples == [StoredQueueSample(T0 + i * TICK, q) for i in range(3) for q in QUEUES]
    assert samples[0].at.tzinfo is UTC


def test_queue_samples_are_read_for_a_half_open_period_and_one_tenant_or_all(
    store: Store,
) -> None:
    for i in range(4):
        store.save_scheduler_snapshot(snapshot(T0 + i * TICK, NODES))
    team_b = QUEUES[1]

    assert store.queue_samples(T0 + TICK, T0 + 3 * TICK, tenant="team-b") == [
        StoredQueueSample(T0 + TICK, team_b),
        StoredQueueSample(T0 + 2 * TICK, team_b),
    ]
    assert len(store.queue_samples((T0 + TICK).astimezone(BEIJING), T0 + 3 * TICK)) == 4
    assert store.queue_samples(T0, T0 + TICK, tenant="team-c") == []


# --- nodes: a change log -------------------------------------------------------------------


def test_the_same_snapshot_saved_three_times_stores_queues_three_times_and_nodes_once(
    store: Store, inspect_engine: sa.Engine
) -> None:
    for _ in range(3):
        store.save_scheduler_snapshot(snapshot(T0, NODES))

    assert count(inspect_engine, "queue_samples") == 3 * len(QUEUES)
    assert count(inspect_engine, "node_states") == len(NODES)


def test_a_thousand_unchanged_nodes_cost_no_rows_after_the_first_snapshot(
    store: Store, inspect_engine: sa.Engine
) -> None:
    cluster = tuple(node(f"gpu-{i:04}", allocated=i % 9) for i in range(1000))
    store.save_scheduler_snapshot(snapshot(T0, cluster))

    for i in range(1, 10):
        store.save_scheduler_snapshot(snapshot(T0 + i * TICK, cluster))

    assert count(inspect_engine, "node_states") == 1000


def test_a_node_whose_allocation_changes_adds_exactly_one_row(
    store: Store, inspect_engine: sa.Engine
) -> None:
    busy, idle = NODES
    store.save_scheduler_snapshot(snapshot(T0, (busy, idle)))
    taken = replace(idle, gpus_allocated=4, state="mixed")

    store.save_scheduler_snapshot(snapshot(T0 + TICK, (busy, taken)))
    store.save_scheduler_snapshot(snapshot(T0 + 2 * TICK, (busy, taken)))

    assert count(inspect_engine, "node_states") == 3
    assert store.node_changes(T0 + TICK, T0 + 3 * TICK) == [StoredNodeChange(T0 + TICK, taken)]


@pytest.mark.parametrize(
    "changed",
    [
        replace(NODES[1], pool="a100"),
        replace(NODES[1], gpus_total=4),
        replace(NODES[1], state="drained"),
        replace(NODES[1], reason="maintenance"),
    ],
    ids=["pool", "gpus_total", "state", "reason"],
)
def test_any_field_of_a_node_that_changes_is_recorded(store: Store, changed: SchedulerNode) -> None:
    store.save_scheduler_snapshot(snapshot(T0, NODES))

    store.save_scheduler_snapshot(snapshot(T0 + TICK, (NODES[0], changed)))

    assert store.node_changes(T0 + TICK, T0 + 2 * TICK) == [StoredNodeChange(T0 + TICK, changed)]


def test_node_states_are_the_states_as_of_the_instant_asked(store: Store) -> None:
    busy, idle = NODES
    drained = replace(idle, state="drained", reason="Kill task failed")
    store.save_scheduler_snapshot(snapshot(T0, (busy, idle)))
    store.save_scheduler_snapshot(snapshot(T0 + TICK, (busy, idle)))
    store.save_scheduler_snapshot(snapshot(T0 + 2 * TICK, (busy, drained)))

    assert store.node_states(T0 - timedelta(seconds=1)) == []
    assert store.node_states(T0) == [busy, idle]
    assert store.node_states(T0 + 2 * TICK - timedelta(microseconds=1)) == [busy, idle]
    assert store.node_states((T0 + 2 * TICK).astimezone(BEIJING)) == [busy, drained]
    assert store.node_states(T0 + timedelta(days=7)) == [busy, drained]


def test_a_node_that_leaves_the_snapshots_is_recorded_once_and_is_gone_after(
    store: Store, inspect_engine: sa.Engine
) -> None:
    busy, idle = NODES
    store.save_scheduler_snapshot(snapshot(T0, (busy, idle)))
    store.save_scheduler_snapshot(snapshot(T0 + TICK, (busy,)))
    store.save_scheduler_snapshot(snapshot(T0 + 2 * TICK, (busy,)))

    assert store.node_states(T0) == [busy, idle]
    assert store.node_states(T0 + TICK) == [busy]
    assert store.node_changes(T0 + TICK, T0 + 3 * TICK) == [
        StoredNodeChange(T0 + TICK, idle, removed=True)
    ]

    store.save_scheduler_snapshot(snapshot(T0 + 3 * TICK, (busy, idle)))

    assert store.node_states(T0 + 3 * TICK) == [busy, idle]
    assert count(inspect_engine, "node_states") == 4


def test_node_changes_are_read_for_a_half_open_period_and_one_node_or_all(
    store: Store,
) -> None:
    a, b = node("gpu-a"), node("gpu-b")
    for i in range(4):
        a, b = replace(a, gpus_allocated=i), replace(b, gpus_allocated=i)
        store.save_scheduler_snapshot(snapshot(T0 + i * TICK, (a, b)))

    assert store.node_changes(T0 + TICK, T0 + 3 * TICK, node="gpu-b") == [
        StoredNodeChange(T0 + TICK, replace(b, gpus_allocated=1)),
        StoredNodeChange(T0 + 2 * TICK, replace(b, gpus_allocated=2)),
    ]
    assert [(c.at, c.node.name) for c in store.node_changes(T0 + 3 * TICK, T0 + 4 * TICK)] == [
        (T0 + 3 * TICK, "gpu-a"),
        (T0 + 3 * TICK, "gpu-b"),
    ]
    assert store.node_changes(T0, T0 + 4 * TICK, node="gpu-c") == []


def test_a_restarted_controller_continues_the_log_instead_of_rewriting_every_node(
    db_url: str, store: Store, inspect_engine: sa.Engine
) -> None:
    busy, idle = NODES
    gone = node("gpu-003")
    store.save_scheduler_snapshot(snapshot(T0, (busy, idle, gone)))
    store.save_scheduler_snapshot(snapshot(T0 + TICK, (busy, idle)))
    store.close()

    freed = replace(busy, gpus_allocated=0, state="idle")
    with Store(db_url) as restarted:
        restarted.save_scheduler_snapshot(snapshot(T0 + 2 * TICK, (freed, idle)))
        restarted.save_scheduler_snapshot(snapshot(T0 + 3 * TICK, (freed, idle)))

        assert restarted.node_changes(T0 + 2 * TICK, T0 + 4 * TICK) == [
            StoredNodeChange(T0 + 2 * TICK, freed)
        ]
        assert restarted.node_states(T0 + 2 * TICK) == [freed, idle]
    assert count(inspect_engine, "node_states") == 5


def test_jobs_in_the_snapshot_are_not_stored_and_an_empty_snapshot_stores_nothing(
    store: Store, inspect_engine: sa.Engine
) -> None:
    store.save_scheduler_snapshot(snapshot(T0, nodes=(), queues=()))

    assert count(inspect_engine, "queue_samples") == 0
    assert count(inspect_engine, "node_states") == 0
    assert store.node_states(T0) == []


def test_a_snapshot_with_a_naive_time_is_refused_and_stores_nothing(
    store: Store, inspect_engine: sa.Engine
) -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        store.save_scheduler_snapshot(snapshot(datetime(2025, 3, 1, 8), NODES))

    store.save_scheduler_snapshot(snapshot(T0, NODES))

    assert count(inspect_engine, "queue_samples") == len(QUEUES)
    assert store.node_states(T0) == list(NODES)


def test_migration_0011_keeps_old_queue_samples_without_a_guarantee_and_reverts_cleanly(
    db_url: str, inspect_engine: sa.Engine
) -> None:
    migrate(db_url, "0010")
    with inspect_engine.begin() as connection:
        # A row of the columns 0010 had (QUEUES[1]), written with the table's own types.
        connection.execute(
            sa.insert(queue_samples_table).values(
                at=T0,
                tenant="team-b",
                queue=None,
                pending_jobs=0,
                pending_gpus=0,
                running_jobs=1,
                running_gpus=8,
                longest_wait_seconds=0.0,
                pending_reasons={},
            )
        )

    upgrade(db_url)
    with Store(db_url) as store:
        store.save_scheduler_snapshot(snapshot(T0 + TICK, NODES, QUEUES[:1]))
        assert store.queue_samples(T0, T0 + 2 * TICK) == [
            StoredQueueSample(T0, QUEUES[1]),
            StoredQueueSample(T0 + TICK, QUEUES[0]),
        ]
    migrate(db_url, "0010", down=True)
    columns = {c["name"] for c in sa.inspect(inspect_engine).get_columns("queue_samples")}
    assert not columns & {"nominal_gpus", "borrowing_limit_gpus"}
