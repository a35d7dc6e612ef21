"""What keeps one controller's cycle cheap over a large fleet: each GPU's sample is kept once
per sample interval however often the agents are read, and the open-findings gauges follow
what opened and closed, read from the store once, not on every cycle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.observe import FleetObserver
from observer.domain import (
    DriverState,
    DriverStatus,
    Finding,
    FindingKind,
    GpuIdentity,
    GpuReading,
    GpuSample,
    NodeSnapshot,
    Severity,
)
from observer.fleet.local import LocalFleet
from observer.metrics import ControllerMetrics, FindingMetrics
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _store(tmp_path: Path) -> Store:
    url = migrated_sqlite(tmp_path / "observer.db")
    return Store(url)


def _finding(detector: str, opened_at: datetime, closed_at: datetime | None = None) -> Finding:
    return Finding(
        detector=detector,
        kind=FindingKind.CONDITION,
        subject={"node": "n1"},
        severity=Severity.WARNING,
        summary=detector,
        opened_at=opened_at,
        closed_at=closed_at,
    )


def _open(metrics: FindingMetrics, detector: str) -> float:
    value: float = metrics.open.labels(detector, "warning")._value.get()
    return value


def test_each_gpu_is_stored_once_per_sample_interval_while_read_every_cycle(tmp_path: Path):
    clock = ManualClock(START)

    def agent() -> NodeSnapshot:
        gpus = tuple(
            GpuReading(
                i,
                GpuIdentity(i, f"GPU-{i}", "NVIDIA H200", None, None),
                GpuSample(at=clock.now(), index=i, utilization_gpu_percent=50),
                None,
                None,
            )
            for i in range(2)
        )
        return NodeSnapshot("n1", clock.now(), DriverStatus(DriverState.OK), gpus, (), ())

    store = _store(tmp_path)
    observer = FleetObserver(
        LocalFleet({"n1": agent}),
        store,
        clock,
        ControllerMetrics(CollectorRegistry()),
        60,
        sample_interval_seconds=300,
    )
    for _ in range(41):  # every 15 s for ten minutes, both ends included
        observer.observe()
        clock.advance(15)

    stored = store.gpu_samples("n1", START, clock.now())
    assert [(s.gpu_uuid, s.at - START) for s in stored] == [
        (uuid, timedelta(seconds=offset)) for uuid in ("GPU-0", "GPU-1") for offset in (0, 300, 600)
    ]


def test_open_findings_gauges_follow_what_changed_after_one_read_of_the_store(
    tmp_path: Path,
):
    store = _store(tmp_path)
    left_open = _finding("allocated_idle", START)  # by a controller that restarted
    store.save_findings([left_open])
    reads: list[int] = []

    def read_open() -> list[Finding]:
        reads.append(1)
        return store.findings(open_only=True)

    metrics = FindingMetrics(CollectorRegistry())
    opened = _finding("orphan_process", START + timedelta(minutes=1))
    store.save_findings([opened])
    metrics.record([opened], read_open)
    assert (_open(metrics, "allocated_idle"), _open(metrics, "orphan_process")) == (1, 1)

    closed = _finding("allocated_idle", START, closed_at=START + timedelta(minutes=2))
    store.save_findings([closed])
    metrics.record([closed], read_open)
    metrics.record([], read_open)
    assert (_open(metrics, "allocated_idle"), _open(metrics, "orphan_process")) == (0, 1)
    assert len(reads) == 1
