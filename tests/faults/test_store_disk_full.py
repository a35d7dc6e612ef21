"""The store's disk full (a small tmpfs): a write that cannot be kept starts the store's
outage, reads that still answer do not end it (the store cannot keep what the observer
sees), and the first write that succeeds once there is room again does."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from observer.errors import StoreError
from observer.records import StoredGpuSample
from observer.storage.store import Store
from tests.faults.test_reports_disk_full import small_tmpfs
from tests.support.databases import migrated_sqlite

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _samples(count: int, start: int = 0) -> list[StoredGpuSample]:
    return [
        StoredGpuSample(
            node="n0",
            gpu_uuid=f"GPU-{i % 8}",
            gpu_index=i % 8,
            at=T0 + timedelta(seconds=start + i),
            utilization_gpu_percent=50,
        )
        for i in range(count)
    ]


def test_a_full_disk_is_the_stores_outage_until_a_write_is_kept_again(tmp_path: Path):
    with small_tmpfs(tmp_path / "store", "4m") as disk:
        store = Store(migrated_sqlite(disk / "observer.db"))
        store.add_gpu_samples(_samples(100))
        filler = disk / "filler"
        # dd stops when the disk is full: its failure is the point.
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True, check=False
        )

        with pytest.raises(StoreError, match="full"):
            for batch in range(1, 200):  # until the WAL and the file need room
                store.add_gpu_samples(_samples(2_000, start=batch * 2_000))
        failed = store.outage
        read = store.gpu_samples("n0", T0, T0 + timedelta(seconds=100))
        after_read = store.outage
        filler.unlink()
        store.add_gpu_samples(_samples(10, start=10**6))
        after_write = store.outage
        store.close()

    assert failed is not None and "full" in failed.error
    assert len(read) == 100  # reads still answer...
    assert after_read == failed  # ...and do not end the outage
    assert after_write is None
