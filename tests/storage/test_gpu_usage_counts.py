"""Who used what, counted in the database, is what counting every attributed sample gives:
per node, tenant and task type the samples, their utilisation summed and those idle at 0 %,
and per tenant the samples at each whole GiB of memory used; on SQLite and PostgreSQL
alike, for a period that begins and ends inside an hour, however the samples were stored;
and what migration 0022 adds, and takes away going back."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from observer.records import StoredGpuSample
from observer.storage.database import upgrade
from observer.storage.gpu_samples import GIB
from observer.storage.store import Store
from observer.storage.tables import gpu_samples_table
from tests.storage.test_store import migrate

START = datetime(2026, 11, 30, tzinfo=UTC)


def _samples(rng: random.Random) -> list[StoredGpuSample]:
    """Three nodes' two GPUs every 300 s for a day; some held by no known tenant, some
    unread, some with no memory reading, of several task types."""
    taken = []
    for node in ("n0", "n1", "n2"):
        at = START + timedelta(seconds=rng.uniform(0, 60))
        while at < START + timedelta(days=1):
            for gpu in range(2):
                tenant = rng.choice((None, "research", "prod"))
                taken.append(
                    StoredGpuSample(
                        node=node,
                        gpu_uuid=f"GPU-{node}-{gpu}",
                        gpu_index=gpu,
                        at=at,
                        utilization_gpu_percent=rng.choice((None, 0, 0, 12, 99, 100, 101)),
                        memory_used_bytes=rng.choice((None, 0, 5 * GIB + 7, 70 * GIB)),
                        tenant=tenant,
                        task="job" if tenant else None,
                        task_type=rng.choice((None, "training", "probe")) if tenant else None,
                    )
                )
            at += timedelta(seconds=300)
    return taken


def _expected(
    samples: list[StoredGpuSample], since: datetime, until: datetime
) -> tuple[dict[tuple[str, str, str], tuple[int, int, int]], Counter[tuple[str, int]]]:
    usage: dict[tuple[str, str, str], list[int]] = {}
    memory: Counter[tuple[str, int]] = Counter()
    for s in samples:
        if s.tenant is None or not since <= s.at < until:
            continue
        tally = usage.setdefault((s.node, s.tenant, s.task_type or ""), [0, 0, 0])
        tally[0] += 1
        if s.utilization_gpu_percent is not None:
            tally[1] += min(max(s.utilization_gpu_percent, 0), 100)
            tally[2] += s.utilization_gpu_percent == 0
        if s.memory_used_bytes is not None:
            memory[s.tenant, s.memory_used_bytes // GIB] += 1
    return {k: (a, b, c) for k, (a, b, c) in usage.items()}, memory


def _summed(store: Store, since: datetime, until: datetime):
    counted = store.gpu_usage_counts(since, until)
    usage: dict[tuple[str, str, str], tuple[int, int, int]] = {}
    for node, tenant, task_type, n, busy, idle in counted.usage:
        a, b, c = usage.get((node, tenant, task_type), (0, 0, 0))
        usage[node, tenant, task_type] = (a + n, b + busy, c + idle)
    memory: Counter[tuple[str, int]] = Counter()
    for tenant, gib, n in counted.memory:
        memory[tenant, gib] += n
    return usage, memory


def test_usage_counted_in_the_database_equals_counting_each_sample(db_url: str):
    taken = _samples(random.Random(7))
    upgrade(db_url)
    with Store(db_url) as store:
        for first in range(0, len(taken), 40):  # each hour's counts added to several times
            store.add_gpu_samples(taken[first : first + 40])
        for since, until in (
            (START, START + timedelta(days=1)),
            (START + timedelta(hours=3, minutes=7), START + timedelta(hours=17, seconds=31)),
            (START + timedelta(hours=5, minutes=1), START + timedelta(hours=5, minutes=50)),
        ):
            usage, memory = _summed(store, since, until)
            expected_usage, expected_memory = _expected(taken, since, until)
            assert usage == expected_usage
            assert memory == expected_memory
            assert {k for _, _, k in usage} == {"", "training", "probe"}
            assert {g for _, g in memory} == {0, 5, 70}


def test_migration_0022_adds_the_task_type_and_its_counts_and_going_back_drops_them(db_url: str):
    taken = _samples(random.Random(8))[:200]
    migrate(db_url, "0021")
    engine = sa.create_engine(db_url)
    with engine.begin() as connection:  # samples stored before: no task type, no usage counts
        connection.execute(
            sa.insert(gpu_samples_table),
            [{k: v for k, v in asdict(s).items() if k != "task_type"} for s in taken],
        )
    upgrade(db_url)
    with Store(db_url) as store:
        assert store.gpu_usage_counts(START, START + timedelta(days=1)).usage == ()
        # The hour a period ends inside of is counted from the samples, their type not known.
        edge = _summed(store, START + timedelta(minutes=30), START + timedelta(minutes=50))[0]
        assert {k for _, _, k in edge} == {""}
        store.add_gpu_samples(_samples(random.Random(9))[:50])
        assert store.gpu_usage_counts(START, START + timedelta(days=1)).usage != ()

    migrate(db_url, "0021", down=True)
    inspector = sa.inspect(engine)
    assert "task_type" not in {c["name"] for c in inspector.get_columns("gpu_samples")}
    assert not {"gpu_usage_hours", "gpu_memory_hours"} & set(inspector.get_table_names())
    engine.dispose()
