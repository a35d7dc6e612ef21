"""A report's GPU utilisation and GPM SM activity from samples counted in the database are
the ones it would get from reading every sample: overall, per pool, window, local hour,
tenant, kind of task and tenant within each window (windows that begin inside a UTC hour),
the nodes seen and the reads that failed (for SM activity: the GPUs without GPM, never
counted as 0), on SQLite and PostgreSQL alike, however the samples were stored (at once, a
few at a time, or before the counts existed); and the pools of nodes that left are read
without the period's whole change log."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from observer.domain import SchedulerNode, SchedulerSnapshot
from observer.probes.windows import Calendar, Window
from observer.records import GpuMeasure, StoredGpuSample
from observer.reports.compute.data import (
    Period,
    counts_are_exact,
    gpu_usage,
    gpu_usage_of_counts,
)
from observer.reports.inputs import window_task_counts
from observer.storage.database import upgrade
from observer.storage.store import Store
from observer.storage.tables import gpu_samples_table
from tests.storage.test_store import migrate

# Half an hour off UTC, so a local hour is not a UTC hour; a window across midnight.
KOLKATA = ZoneInfo("Asia/Kolkata")
CALENDAR = Calendar(
    KOLKATA,
    [
        Window("peak", frozenset(range(5)), time(9, 30), time(18)),
        Window("night", frozenset(range(7)), time(22), time(6)),
    ],
)
START = datetime(2026, 11, 30, 0, 0, tzinfo=KOLKATA)
POOLS = {"n0": "pool-a", "n1": "pool-a", "n2": "pool-b"}  # n3: a node in no pool
NO_GPM = "n3"  # a node whose GPUs predate GPM


def samples(rng: random.Random, days: int = 2) -> list[StoredGpuSample]:
    """Four nodes' two GPUs each, sampled every 200-400 s from START for `days`: some reads
    failed, some out of 0..100, each GPU held by a tenant's job or a probe or by none; GPM's
    SM activity on every node but NO_GPM, not read on some ticks."""
    taken = []
    for node in ("n0", "n1", "n2", "n3"):
        # Readings outside 0..100 count at the ends, as UtilizationHistogram.of counts them.
        at = START + timedelta(seconds=rng.uniform(0, 60))
        while at < START + timedelta(days=days):
            for gpu in range(2):
                tenant = rng.choice((None, "research", "prod"))
                gpm = None if rng.random() < 0.05 else node != NO_GPM
                taken.append(
                    StoredGpuSample(
                        node=node,
                        gpu_uuid=f"GPU-{node}-{gpu}",
                        gpu_index=gpu,
                        at=at,
                        utilization_gpu_percent=(
                            None if rng.random() < 0.05 else rng.choice((0, 0, 37, 99, 100, 101))
                        ),
                        tenant=tenant,
                        task=rng.choice((None, "job", "gpu-busy")) if tenant else None,
                        sm_active_percent=rng.choice((0, 3, 40, 97)) if gpm else None,
                        gpm_supported=gpm,
                    )
                )
            at += timedelta(seconds=rng.uniform(200, 400))
    return taken


def _store_at_once(url: str, samples: list[StoredGpuSample]) -> None:
    upgrade(url)
    with Store(url) as store:
        store.add_gpu_samples(samples)


def _store_a_few_at_a_time(url: str, samples: list[StoredGpuSample]) -> None:
    upgrade(url)
    with Store(url) as store:  # each minute's and hour's counts are added to several times
        for first in range(0, len(samples), 50):
            store.add_gpu_samples(samples[first : first + 50])


_LATER_COLUMNS = ("task", "sm_active_percent", "gpm_supported", "task_type")  # 0013, 0021, 0022


def _store_before_the_counts_existed(url: str, samples: list[StoredGpuSample]) -> None:
    migrate(url, "0004")
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(  # samples had no task (nor task type) then
            sa.insert(gpu_samples_table),
            [{k: v for k, v in asdict(s).items() if k not in _LATER_COLUMNS} for s in samples],
        )
    engine.dispose()
    upgrade(url)


@pytest.mark.parametrize(
    "store_samples",
    [_store_at_once, _store_a_few_at_a_time, _store_before_the_counts_existed],
    ids=["at_once", "a_few_at_a_time", "before_the_counts_existed"],
)
def test_counted_utilisation_equals_sample_by_sample(
    db_url: str, store_samples: Callable[[str, list[StoredGpuSample]], None]
):
    store_samples(db_url, samples(random.Random(3)))
    before_0013 = store_samples is _store_before_the_counts_existed
    with Store(db_url) as store:
        # A whole local day, and a stretch that starts and ends inside minutes.
        for since, until in (
            (START + timedelta(days=1), START + timedelta(days=2)),
            (
                START + timedelta(hours=9, minutes=29, seconds=31),
                START + timedelta(hours=22, minutes=30, seconds=17),
            ),
        ):
            counted, sm_counted = (
                gpu_usage_of_counts(
                    store.gpu_sample_counts(since, until, measure),
                    POOLS,
                    CALENDAR,
                    window_task_counts(store, CALENDAR, Period(since, until), measure),
                )
                for measure in GpuMeasure
            )
            read = gpu_usage(store.gpu_samples(None, since, until), POOLS, CALENDAR)
            assert counted == read
            read = gpu_usage(
                store.gpu_samples(None, since, until), POOLS, CALENDAR, GpuMeasure.SM_ACTIVE
            )
            assert sm_counted == read
            if before_0013:  # stored before GPM was: no SM activity, and no GPU said it had none
                assert sm_counted.overall.samples == sm_counted.unread_samples == 0
            else:
                assert sm_counted.overall.samples > 0
                assert sm_counted.unread_nodes == {NO_GPM}
                assert sm_counted.overall.samples < counted.overall.samples
            assert counted.overall.samples > 0
            assert counted.unread_samples > 0
            assert set(counted.by_window) == {"peak", "night"}
            assert set(counted.by_pool) == {"pool-a", "pool-b", "-"}
            assert set(counted.by_window_tenant) == {"peak", "night"}
            assert set(counted.by_window_tenant["peak"]) == {"research", "prod"}
            tasks = set(counted.by_task)
            assert tasks == ({""} if before_0013 else {"", "job", "gpu-busy"})


def test_counts_stand_for_samples_only_when_windows_change_on_whole_minutes():
    assert counts_are_exact(CALENDAR)
    odd = Calendar(ZoneInfo("UTC"), [Window("odd", frozenset(range(7)), time(9, 0, 30), time(10))])
    assert not counts_are_exact(odd)


def test_a_nodes_pool_in_a_period_is_the_one_of_its_first_change_there(db_url: str):
    upgrade(db_url)

    def snapshot(minutes: int, *nodes: tuple[str, str, int]) -> SchedulerSnapshot:
        at = START + timedelta(minutes=minutes)
        return SchedulerSnapshot(
            at, (), tuple(SchedulerNode(n, pool, 8, used, "mixed") for n, pool, used in nodes), ()
        )

    with Store(db_url) as store:
        store.save_scheduler_snapshot(snapshot(0, ("a", "p1", 1), ("b", "p1", 1)))
        store.save_scheduler_snapshot(snapshot(10, ("a", "p1", 2), ("b", "p2", 1)))
        store.save_scheduler_snapshot(snapshot(20, ("a", "p1", 3)))  # b left
        later = START + timedelta(minutes=5)
        assert store.first_pools(later, START + timedelta(hours=1)) == {"a": "p1", "b": "p2"}
        assert store.first_pools(START, later) == {"a": "p1", "b": "p1"}


def _tenant_hours(url: str, table: str) -> dict[tuple[str, str], int]:
    """(UTC hour, tenant) -> samples counted, over every task."""
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(sa.text(f"SELECT * FROM {table}")).mappings().all()
    engine.dispose()
    counted: dict[tuple[str, str], int] = {}
    for row in rows:
        hour = str(row["hour"])[:13]
        key = (hour, row["tenant"])
        counted[key] = counted.get(key, 0) + sum(row[f"p{p}"] for p in range(101))
    return counted


def test_migration_0013_keeps_the_tenant_counts_with_no_task_and_reverts_adding_tasks_up(
    db_url: str,
):
    old, new = samples(random.Random(5))[:400], samples(random.Random(6))[400:800]
    _store_before_the_counts_existed(db_url, old)  # counted by 0005, kept by 0013 as task ""
    migrate(db_url, "0012", down=True)
    before = _tenant_hours(db_url, "gpu_tenant_hours")
    assert before

    upgrade(db_url)
    with Store(db_url) as store:
        assert {task for _, task, _ in store.gpu_task_counts(START, START + timedelta(days=2))} == {
            ""
        }
        store.add_gpu_samples(new)
        assert {task for _, task, _ in store.gpu_task_counts(START, START + timedelta(days=2))} == {
            "",
            "job",
            "gpu-busy",
        }
    after = _tenant_hours(db_url, "gpu_task_hours")

    migrate(db_url, "0012", down=True)
    assert _tenant_hours(db_url, "gpu_tenant_hours") == after
    assert after != before
    engine = sa.create_engine(db_url)
    assert "task" not in {c["name"] for c in sa.inspect(engine).get_columns("gpu_samples")}
    engine.dispose()
    upgrade(db_url)
    with Store(db_url) as store:
        assert {task for _, task, _ in store.gpu_task_counts(START, START + timedelta(days=2))} == {
            ""
        }
