"""The replay of a recorded NVML trace, where traces differ in what they recorded."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from observer.clock import ManualClock, TraceTimeline
from observer.domain import ReadErrorKind
from observer.gpu.replay import ReplayGpuBackend, Trace

WALL_START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_a_trace_recorded_without_nvlink_reads_no_nvlink_counters(h200_trace: Path) -> None:
    trace = Trace.load(h200_trace)
    clock = ManualClock(WALL_START)
    timeline = TraceTimeline(trace.start, trace.end, WALL_START.timestamp(), loop=True)
    backend = ReplayGpuBackend(trace, timeline, clock)

    counters = backend.counters(0, frozenset())

    assert counters.nvlink_replay_errors is None
    assert counters.nvlink_recovery_errors is None
    assert counters.nvlink_crc_errors is None
    assert [e.kind for e in counters.errors if e.call == "nvlink_errors"] == [
        ReadErrorKind.NOT_SUPPORTED
    ]
    assert counters.energy_millijoules is not None  # what it did record still reads
