"""Each probe run's own GPUs reduced in the database in one statement for every run of a
period: the samples on its nodes between its start and end that name its tenant and probe,
their mean and highest utilisation and the most memory one of them used; other tenants'
samples, other probes', other nodes' and those outside its span are not its own. On SQLite
and PostgreSQL alike."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from observer.records import RunSpan, StoredGpuSample
from observer.storage.store import Store

START = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
GIB = 1 << 30


def fleet(rng: random.Random) -> list[StoredGpuSample]:
    """Three nodes' two GPUs every 5 minutes for six hours, held by research's gpu-busy probe,
    its short probe, prod's gpu-busy or nobody; some reads of utilisation failed."""
    holders = [("research", "gpu-busy"), ("research", "short"), ("prod", "gpu-busy"), (None, None)]
    taken = []
    for step in range(6 * 12):
        at = START + timedelta(minutes=5 * step)
        for node in ("n0", "n1", "n2"):
            for gpu in range(2):
                tenant, task = rng.choice(holders)
                taken.append(
                    StoredGpuSample(
                        node=node,
                        gpu_uuid=f"GPU-{node}-{gpu}",
                        gpu_index=gpu,
                        at=at,
                        utilization_gpu_percent=None if rng.random() < 0.1 else rng.randint(0, 100),
                        memory_used_bytes=rng.randint(0, 80) * GIB,
                        tenant=tenant,
                        task=task,
                    )
                )
    return taken


def expected(samples: list[StoredGpuSample], span: RunSpan) -> tuple[object, ...] | None:
    mine = [
        s
        for s in samples
        if s.node in span.nodes
        and span.start <= s.at < span.end
        and (s.tenant, s.task) == (span.tenant, span.task)
    ]
    if not mine:
        return None
    read = [s.utilization_gpu_percent for s in mine if s.utilization_gpu_percent is not None]
    return (
        len(mine),
        len({s.gpu_uuid for s in mine}),
        sum(read) / len(read),
        max(read),
        max(s.memory_used_bytes or 0 for s in mine),
    )


def test_each_run_gets_the_figures_of_its_own_samples_in_one_read(store: Store) -> None:
    samples = fleet(random.Random(7))
    store.add_gpu_samples(samples)
    spans = [
        RunSpan("a", "research", "gpu-busy", ("n0",), START, START + timedelta(hours=2)),
        RunSpan(
            "b",
            "research",
            "gpu-busy",
            ("n1", "n2"),
            START + timedelta(minutes=37),
            START + timedelta(hours=5),
        ),
        RunSpan(
            "c", "prod", "gpu-busy", ("n0",), START + timedelta(hours=1), START + timedelta(hours=3)
        ),
        RunSpan(
            "d",
            "research",
            "short",
            ("n2",),
            START + timedelta(hours=4),
            START + timedelta(hours=9),
        ),
        # Ran where no sample was taken: no figures.
        RunSpan("e", "research", "gpu-busy", ("n9",), START, START + timedelta(hours=1)),
    ]

    figures = store.run_gpu_figures(spans)

    assert set(figures) == {"a", "b", "c", "d"}
    for span in spans:
        want = expected(samples, span)
        got = figures.get(span.run_id)
        if want is None:
            assert got is None
            continue
        assert got is not None
        count, gpus, mean, top, memory = want
        assert (got.samples, got.gpus, got.utilization_max_percent, got.memory_peak_bytes) == (
            count,
            gpus,
            top,
            memory,
        )
        assert got.utilization_avg_percent == pytest.approx(mean)


def test_no_span_reads_nothing(store: Store) -> None:
    assert store.run_gpu_figures([]) == {}
