"""The store's disk full (a small tmpfs): a write that cannot be kept starts the store's
outage, reads that still answer do not end it (the store cannot keep what the observer
sees), and the first write that succeeds once there is room again does."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from observer.errors import StoreError
from observer.storage.store import Store
from tests.faults.test_reports_disk_full import small_tmpfs
from tests.storage.test_room import T0, samples
from tests.support.databases import migrated_sqlite


def test_a_full_disk_is_the_stores_outage_until_a_write_is_kept_again(tmp_path: Path):
    with small_tmpfs(tmp_path / "store", "4m") as disk:
        store = Store(migrated_sqlite(disk / "observer.db"))
        store.add_gpu_samples(samples(minutes=10))
        filler = disk / "filler"
        # dd stops when the disk is full: its failure is the point.
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True, check=False
        )

        with pytest.raises(StoreError, match="full"):
            for batch in range(1, 200):  # until the WAL and the file need room
                store.add_gpu_samples(samples(minutes=250, start_minute=batch * 250))
        failed = store.outage
        read = store.gpu_samples("n0", T0, T0 + timedelta(minutes=10))
        after_read = store.outage
        filler.unlink()
        store.add_gpu_samples(samples(minutes=1, start_minute=10**6))
        after_write = store.outage
        store.close()

    assert failed is not None and "full" in failed.error
    assert len(read) == 80  # reads still answer...
    assert after_read == failed  # ...and do not end the outage
    assert after_write is None
