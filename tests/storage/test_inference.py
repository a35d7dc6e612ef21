"""The inference service's looks and phases: stored and read back by period in order, a phase
saved twice one row, the same on SQLite and PostgreSQL; migration 0010 adds their tables to a
0009 database and takes them away."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from observer.records import InferencePhase, InferenceSample, PhaseKind
from observer.storage.database import upgrade
from observer.storage.store import Store
from tests.storage.test_store import migrate

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TABLES = {"inference_samples", "inference_phases"}


def look(seconds: float, latencies: tuple[float, ...] = (21.5, 23.25)) -> InferenceSample:
    at = T0 + timedelta(seconds=seconds)
    return InferenceSample(at, "observer-inference", 2, len(latencies), 1, 3, 1, latencies)


def phase(kind: PhaseKind, started: float, ready: float) -> InferencePhase:
    return InferencePhase(
        service="observer-inference",
        kind=kind,
        started_at=T0 + timedelta(seconds=started),
        ready_at=T0 + timedelta(seconds=ready),
        replicas_from=1,
        replicas_to=3,
        pending_seconds=40.0,
        pending_reason="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        unavailable_seconds=0.0,
    )


def test_looks_come_back_by_period_with_their_latencies(store: Store):
    store.add_inference_samples([look(10), look(0, ())])
    store.add_inference_samples([look(5, (19.0,))])
    store.add_inference_samples([])

    assert store.inference_samples(T0, T0 + timedelta(seconds=10)) == [
        look(0, ()),
        look(5, (19.0,)),
    ]
    assert store.inference_samples(T0 + timedelta(seconds=10), T0 + timedelta(1)) == [look(10)]


def test_a_phase_saved_again_is_one_row_with_its_last_values(store: Store):
    start, scale_out = phase(PhaseKind.START, 0, 3), phase(PhaseKind.SCALE_OUT, 13, 60)
    store.save_inference_phases([scale_out, start])
    store.save_inference_phases([replace(scale_out, pending_seconds=41.0)])

    assert store.inference_phases(T0, T0 + timedelta(1)) == [
        start,
        replace(scale_out, pending_seconds=41.0),
    ]
    assert store.inference_phases(T0 + timedelta(seconds=4), T0 + timedelta(1)) == [
        replace(scale_out, pending_seconds=41.0)
    ]


def test_migration_0010_adds_the_tables_to_a_0009_database_and_reverts_cleanly(
    db_url: str, inspect_engine: sa.Engine
):
    migrate(db_url, "0009")
    assert not TABLES & set(sa.inspect(inspect_engine).get_table_names())

    upgrade(db_url)
    with Store(db_url) as store:
        store.add_inference_samples([look(0)])
        assert store.inference_samples(T0, T0 + timedelta(1)) == [look(0)]
    migrate(db_url, "0009", down=True)
    assert not TABLES & set(sa.inspect(inspect_engine).get_table_names())
