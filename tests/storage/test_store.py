"""The store keeps findings and GPU samples as domain types, the same on SQLite and
PostgreSQL; its schema comes from the migrations only."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from observer.domain import Finding, FindingKind, Severity
from observer.errors import StoreError
from observer.records import StoredDelivery, StoredGpuSample
from observer.storage import store as store_module
from observer.storage.database import create_engine, store_url, upgrade
from observer.storage.store import Store
from observer.storage.tables import findings_table, metadata

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
BEIJING = timezone(timedelta(hours=8))
GIB = 1024**3


def leak(node: str, opened_at: datetime, closed_at: datetime | None = None) -> Finding:
    """A condition from the leak detector on one GPU of `node`."""
    return Finding(
        detector="gpu_memory_leak",
        kind=FindingKind.CONDITION,
        subject={"node": node, "gpu": "GPU-0"},
        severity=Severity.WARNING,
        summary=f"memory held on {node} after its job ended",
        opened_at=opened_at,
        closed_at=closed_at,
        evidence={"memory_used_bytes": 3 * GIB},
    )


def sample(node: str, at: datetime) -> StoredGpuSample:
    """A sample of GPU 0 of `node` in which every read failed."""
    return StoredGpuSample(node=node, gpu_uuid="GPU-0", gpu_index=0, at=at)


def migrate(url: str, revision: str, *, down: bool = False) -> None:
    """Move the database at `url` to one revision, as `observer db upgrade` never does."""
    config = Config()
    config.set_main_option(
        "script_location", str(Path(store_module.__file__).with_name("migrations"))
    )
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)
    engine.dispose()


# --- the schema -------------------------------------------------------------------------


def test_upgrade_creates_the_tables_and_running_it_again_changes_nothing(
    db_url: str, inspect_engine: sa.Engine
) -> None:
    upgrade(db_url)
    upgrade(db_url)

    assert set(sa.inspect(inspect_engine).get_table_names()) == {
        "alembic_version",
        "findings",
        "gpu_samples",
        "gpu_minutes",
        "gpu_node_hours",
        "gpu_task_hours",
        "gpu_sm_minutes",
        "gpu_sm_node_hours",
        "gpu_sm_task_hours",
        "gpu_usage_hours",
        "gpu_memory_hours",
        "probe_runs",
        "queue_samples",
        "report_deliveries",
        "node_states",
        "alerts",
        "interventions",
        "job_listings",
        "job_estimates",
        "job_pending",
        "job_tallies",
        "controller_runs",
        "probe_skips",
        "inference_samples",
        "inference_phases",
        "store_sizes",
        "job_waits",
        "schema_upgrades",
    }
    with Store(db_url) as store:
        assert store.findings() == []


def test_migration_0002_upgrades_a_0001_database_with_data_and_reverts_cleanly(
    db_url: str, inspect_engine: sa.Engine
) -> None:
    kept = leak("node-a", opened_at=T0)
    migrate(db_url, "0001")
    with inspect_engine.begin() as connection:
        connection.execute(
            sa.insert(findings_table),
            {
                "key": kept.key,
                "detector": kept.detector,
                "kind": "condition",
                "severity": "warning",
                "subject": dict(kept.subject),
                "summary": kept.summary,
                "opened_at": T0,
                "evidence": dict(kept.evidence),
                "node": "node-a",
            },
        )

    upgrade(db_url)

    with Store(db_url) as store:
        assert store.findings() == [kept]
        assert store.runs() == []
    migrate(db_url, "0001", down=True)
    assert set(sa.inspect(inspect_engine).get_table_names()) == {
        "alembic_version",
        "findings",
        "gpu_samples",
    }


def test_the_migrations_build_exactly_the_tables_the_code_declares(
    db_url: str, inspect_engine: sa.Engine
) -> None:
    upgrade(db_url)

    with inspect_engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)

    assert differences == []


def test_a_database_that_was_never_migrated_is_refused_with_the_fix(db_url: str) -> None:
    with pytest.raises(StoreError, match=r"revision none.*run `observer db upgrade`"):
        Store(db_url)


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "observer.db"
    upgrade(store_url(path, None))

    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection.close()


# SQLite's numbers for PRAGMA synchronous: 2 is FULL (every commit flushed), 1 is NORMAL.
@pytest.mark.parametrize(("durable", "synchronous"), [(True, 2), (False, 1)])
def test_only_a_database_that_need_not_survive_the_machine_skips_flushing_commits(
    tmp_path: Path, durable: bool, synchronous: int
) -> None:
    url = store_url(tmp_path / "observer.db", None)
    upgrade(url)
    engine = create_engine(url, durable=durable)

    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == synchronous
    engine.dispose()


# --- findings ---------------------------------------------------------------------------


def test_a_finding_comes_back_equal_with_nested_evidence_and_times_in_utc(store: Store) -> None:
    saved = replace(
        leak(
            "node-a",
            opened_at=datetime(2025, 3, 1, 16, 0, 0, 123456, tzinfo=BEIJING),
            closed_at=datetime(2025, 3, 1, 17, 30, tzinfo=BEIJING),
        ),
        evidence={
            "memory_used_bytes": 100 * GIB,
            "processes": [{"pid": 4242, "owner": {"kind": "pod", "id": "team-a/train-7"}}],
            "ratio": 0.25,
            "note": "显存未释放",
            "confirmed": True,
            "job": None,
        },
    )

    store.save_findings([saved])
    [loaded] = store.findings()

    assert loaded == saved
    assert loaded.opened_at.tzinfo is UTC
    assert loaded.opened_at == datetime(2025, 3, 1, 8, 0, 0, 123456, tzinfo=UTC)
    assert loaded.closed_at is not None
    assert loaded.closed_at.tzinfo is UTC


def test_saving_a_condition_again_closes_it_instead_of_adding_a_second(store: Store) -> None:
    store.save_findings([leak("node-a", opened_at=T0)])

    closed = replace(
        leak(
            "node-a",
            opened_at=T0.astimezone(BEIJING),  # the same instant, written differently
            closed_at=T0 + timedelta(hours=2),
        ),
        severity=Severity.CRITICAL,
        summary="memory held for two hours",
        evidence={"memory_used_bytes": 5 * GIB, "samples": 240},
    )
    store.save_findings([closed])

    assert store.findings() == [closed]


def test_one_batch_may_carry_several_versions_of_a_finding_and_the_last_wins(
    store: Store,
) -> None:
    opened = leak("node-a", opened_at=T0)
    closed = leak("node-a", opened_at=T0, closed_at=T0 + timedelta(minutes=5))

    store.save_findings([opened, closed])

    assert store.findings() == [closed]


def test_the_same_subject_opening_again_later_is_a_new_finding(store: Store) -> None:
    first = leak("node-a", opened_at=T0, closed_at=T0 + timedelta(hours=1))
    second = leak("node-a", opened_at=T0 + timedelta(hours=3))

    store.save_findings([second, first])

    assert store.findings() == [first, second]


def test_open_only_leaves_out_closed_findings(store: Store) -> None:
    closed = leak("node-a", opened_at=T0, closed_at=T0 + timedelta(hours=1))
    still_open = leak("node-b", opened_at=T0 + timedelta(minutes=10))
    store.save_findings([closed, still_open])

    assert store.findings(open_only=True) == [still_open]


def test_since_keeps_findings_active_in_the_period(store: Store) -> None:
    since = T0 + timedelta(days=1)
    ended_before = leak("node-a", opened_at=T0, closed_at=since - timedelta(seconds=1))
    ended_at_since = leak("node-b", opened_at=T0, closed_at=since)
    ended_after = leak("node-c", opened_at=T0, closed_at=since + timedelta(hours=1))
    open_from_before = leak("node-d", opened_at=T0 + timedelta(minutes=1))
    opened_after = leak("node-e", opened_at=since + timedelta(hours=2))
    store.save_findings([ended_before, ended_at_since, ended_after, open_from_before, opened_after])

    assert store.findings(since=since) == [
        ended_at_since,
        ended_after,
        open_from_before,
        opened_after,
    ]
    assert store.findings(since=since.astimezone(BEIJING), open_only=True) == [
        open_from_before,
        opened_after,
    ]


def test_findings_can_be_read_for_one_detector(store: Store) -> None:
    leaked = leak("node-a", opened_at=T0)
    lag = Finding(
        detector="monitoring_lag",
        kind=FindingKind.EVENT,
        subject={"target": "prometheus/agent"},
        severity=Severity.INFO,
        summary="scrape 45 s late",
        opened_at=T0 + timedelta(minutes=1),
        closed_at=T0 + timedelta(minutes=1),
    )
    store.save_findings([leaked, lag])

    assert store.findings(detector="monitoring_lag") == [lag]
    assert store.findings() == [leaked, lag]


def test_naive_datetimes_are_refused_as_a_programming_error(store: Store) -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        store.save_findings([leak("node-a", opened_at=datetime(2025, 3, 1, 8))])

    assert store.findings() == []


# --- GPU samples -------------------------------------------------------------------------


def test_byte_counts_beyond_32_bits_come_back_whole(store: Store) -> None:
    saved = replace(
        sample("node-a", at=T0.astimezone(BEIJING)),
        utilization_gpu_percent=97,
        memory_used_bytes=100 * GIB,
        memory_total_bytes=141 * GIB,
        power_milliwatts=700_000,
        process_count=2,
        tenant="research",
    )

    assert store.add_gpu_samples([saved]) == 1
    [loaded] = store.gpu_samples("node-a", T0, T0 + timedelta(seconds=1))

    assert loaded == saved
    assert loaded.memory_used_bytes == 107_374_182_400
    assert loaded.at.tzinfo is UTC


def test_unread_fields_come_back_as_none(store: Store) -> None:
    blind = sample("node-a", at=T0)

    store.add_gpu_samples([blind])

    assert store.gpu_samples(None, T0, T0 + timedelta(seconds=1)) == [blind]


def test_samples_are_read_for_a_half_open_period_and_one_node_or_all(store: Store) -> None:
    minute = timedelta(minutes=1)
    a0, a1, a2 = (sample("node-a", at=T0 + i * minute) for i in range(3))
    b1 = replace(sample("node-b", at=T0 + minute), gpu_uuid="GPU-7", gpu_index=7)
    assert store.add_gpu_samples(iter([a2, b1, a1, a0])) == 4

    assert store.gpu_samples("node-a", T0, T0 + 2 * minute) == [a0, a1]
    assert store.gpu_samples(None, T0 + minute, T0 + 3 * minute) == [a1, a2, b1]
    assert store.gpu_samples("node-c", T0, T0 + 3 * minute) == []


def test_adding_no_samples_adds_nothing(store: Store) -> None:
    assert store.add_gpu_samples([]) == 0
    assert store.gpu_samples(None, T0 - timedelta(days=1), T0 + timedelta(days=1)) == []


def test_deliveries_are_kept_in_the_order_they_happened_and_read_per_report(
    store: Store,
) -> None:
    sent = StoredDelivery(T0, "daily-2025-03-01", "feishu", "delivered", 1)
    failed = StoredDelivery(
        T0 + timedelta(seconds=5), "daily-2025-03-01", "slack", "failed", 3, "HTTP 500"
    )
    verdict = StoredDelivery(T0.astimezone(BEIJING), "verdict", "directory", "delivered", 1)
    store.add_deliveries([failed, sent])
    store.add_deliveries([verdict])
    store.add_deliveries([])

    assert store.deliveries("daily-2025-03-01") == [sent, failed]
    assert store.deliveries() == [sent, verdict, failed]
    assert store.deliveries()[1].at.tzinfo is UTC


# --- which database, and when it cannot be used ------------------------------------------


def test_the_configured_url_wins_over_the_embedded_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "observer.db"
    url = "postgresql+psycopg://observer@db:5432/soak"

    assert store_url(path, url) == url
    assert store_url(path, None) == f"sqlite:///{path}"
    assert store_url(path, "") == f"sqlite:///{path}"


def test_an_unreachable_postgresql_is_a_store_error_naming_it_without_the_password() -> None:
    url = "postgresql+psycopg://postgres:s3cret@127.0.0.1:1/x"

    with pytest.raises(
        StoreError, match=r"opening .*127\.0\.0\.1:1/x failed: .*refused"
    ) as opening:
        Store(url)
    with pytest.raises(StoreError, match=r"migrating .*127\.0\.0\.1:1/x") as migrating:
        upgrade(url)

    assert "s3cret" not in str(opening.value)
    assert "s3cret" not in str(migrating.value)


def test_sqlite_in_a_missing_directory_is_a_store_error_naming_the_directory(
    tmp_path: Path,
) -> None:
    url = store_url(tmp_path / "missing" / "observer.db", None)

    with pytest.raises(StoreError, match=r"directory .*missing does not exist"):
        Store(url)
    with pytest.raises(StoreError, match=r"directory .*missing does not exist"):
        upgrade(url)


def test_only_sqlite_and_postgresql_are_supported() -> None:
    with pytest.raises(StoreError, match="unsupported database mysql://"):
        Store("mysql://observer@db/soak")
    with pytest.raises(StoreError, match=r"opening the configured database failed: .*parse"):
        Store("not a url")
