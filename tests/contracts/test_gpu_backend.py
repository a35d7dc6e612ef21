"""What every GpuBackend promises, checked on the replay of the recorded H200 trace, on the
in-memory fake and on the real NVML adapter over the stand-in libnvidia-ml.so.1."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.clock import ManualClock, TraceTimeline
from observer.domain import GpuCounters, GpuProcess, GpuSample
from observer.gpu.backend import COUNTER_CALLS, LEAN_CALLS, DriverInfo, GpuBackend
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.gpu.nvml import NvmlGpuBackend
from observer.gpu.replay import ReplayGpuBackend, Trace
from tests.gpu.fake_nvml import (
    COUNTER_FIELDS_BY_CALL,
    SAMPLE_FIELDS_BY_CALL,
    FakeNvml,
    FakeNvmlGpu,
)

WALL_START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOTHING_SKIPPED: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Subject:
    backend: GpuBackend
    clock: ManualClock
    info: DriverInfo  # what open() reported
    busy_index: int  # a device running one compute process


def replay_subject(trace_dir: Path) -> Iterator[Subject]:
    trace = Trace.load(trace_dir)
    clock = ManualClock(WALL_START)
    timeline = TraceTimeline(trace.start, trace.end, WALL_START.timestamp(), loop=True)
    phases = {p["phase"]: p["t"] for p in json.loads((trace_dir / "phases.json").read_text())}
    busy = (phases["child1_ready"] + phases["child1_busy_done"]) / 2
    clock.set(timeline.to_wall(busy, clock.now()))
    backend = ReplayGpuBackend(trace, timeline, clock)
    yield Subject(backend, clock, backend.open(), busy_index=0)
    backend.close()


def fake_subject() -> Iterator[Subject]:
    clock = ManualClock(WALL_START)
    busy = FakeGpu(
        "GPU-fake-1",
        utilization_gpu_percent=100,
        memory_used_bytes=23 * GIB,
        processes={418: 21 * GIB},
    )
    backend = FakeGpuBackend([FakeGpu("GPU-fake-0"), busy], clock)
    yield Subject(backend, clock, backend.open(), busy_index=1)
    backend.close()


def nvml_subject(fake: FakeNvml) -> Iterator[Subject]:
    # Like the H200 of the trace: one idle device and one running a matmul; no retired pages.
    h200 = FakeNvmlGpu(unsupported=frozenset({"retired_pages"}))
    busy = FakeNvmlGpu(
        utilization_gpu_percent=100,
        utilization_memory_percent=23,
        memory_used_bytes=23_179_689_984,
        power_milliwatts=691_356,
        temperature_celsius=51,
        clock_event_reasons=4,
        energy_millijoules=6_383_683,
        pcie_tx_kilobytes_per_second=7378,
        processes=((418, 22_525_509_632),),
        unsupported=h200.unsupported,
    )
    fake.set([h200, busy])
    clock = ManualClock(WALL_START)
    backend = NvmlGpuBackend(clock, library_path=fake.library)
    yield Subject(backend, clock, backend.open(), busy_index=1)
    backend.close()


@pytest.fixture(params=["replay", "fake", pytest.param("nvml", marks=pytest.mark.fake_nvml)])
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    if request.param == "replay":
        yield from replay_subject(request.getfixturevalue("h200_trace"))
    elif request.param == "fake":
        yield from fake_subject()
    else:
        yield from nvml_subject(request.getfixturevalue("fake_nvml_state"))


def reads_by_call(
    reading: GpuSample | GpuCounters, fields_by_call: Mapping[str, tuple[str, ...]]
) -> dict[str, tuple[object, ...]]:
    return {
        call: tuple(getattr(reading, f) for f in fields) for call, fields in fields_by_call.items()
    }


def test_open_reports_the_driver_and_its_devices(subject: Subject) -> None:
    assert subject.info.driver_version
    assert subject.info.device_count >= 1


def test_every_device_has_a_gpu_uuid_and_memory(subject: Subject) -> None:
    for index in range(subject.info.device_count):
        identity = subject.backend.identify(index)

        assert identity.index == index
        assert identity.uuid.startswith("GPU-")
        assert identity.name
        assert identity.memory_total_bytes is not None
        assert identity.memory_total_bytes > 0


def test_a_sample_is_stamped_by_the_clock_and_holds_ints(subject: Subject) -> None:
    for index in range(subject.info.device_count):
        sample = subject.backend.sample(index, NOTHING_SKIPPED)

        assert sample.index == index
        assert sample.at == subject.clock.now()
        assert sample.at.tzinfo is not None
        failed = {e.call for e in sample.errors}
        for call, values in reads_by_call(sample, SAMPLE_FIELDS_BY_CALL).items():
            if call not in failed and call != "processes":
                assert all(type(v) is int for v in values), (call, values)
        assert sample.processes is not None
        assert all(type(p) is GpuProcess for p in sample.processes)


def test_a_busy_device_lists_its_process_and_the_memory_it_holds(subject: Subject) -> None:
    sample = subject.backend.sample(subject.busy_index, NOTHING_SKIPPED)

    assert sample.utilization_gpu_percent is not None
    assert sample.utilization_gpu_percent > 0
    assert sample.processes is not None
    assert len(sample.processes) == 1
    (process,) = sample.processes
    assert process.pid > 0
    assert process.used_memory_bytes is not None
    assert sample.memory_used_bytes is not None
    assert 4 * 2**30 < process.used_memory_bytes <= sample.memory_used_bytes


@pytest.mark.parametrize("tier", ["sample", "counters"])
def test_every_call_gives_a_value_or_a_read_error(subject: Subject, tier: str) -> None:
    calls, fields_by_call = (
        (LEAN_CALLS, SAMPLE_FIELDS_BY_CALL)
        if tier == "sample"
        else (COUNTER_CALLS, COUNTER_FIELDS_BY_CALL)
    )
    read = subject.backend.sample if tier == "sample" else subject.backend.counters

    for index in range(subject.info.device_count):
        reading = read(index, NOTHING_SKIPPED)

        failed = [e.call for e in reading.errors]
        assert len(failed) == len(set(failed)), reading.errors
        assert set(failed) <= set(calls), reading.errors
        for call, values in reads_by_call(reading, fields_by_call).items():
            if call in failed:
                assert values == (None,) * len(values), (call, values)
            else:
                assert None not in values, (call, values)


@pytest.mark.parametrize(
    ("tier", "skip"),
    [
        ("sample", frozenset({"processes", "power", "ecc_volatile_uncorrected"})),
        ("counters", frozenset({"energy", "retired_pages", "pcie_replay"})),
    ],
)
def test_skipped_calls_read_as_none_without_an_error(
    subject: Subject, tier: str, skip: frozenset[str]
) -> None:
    fields_by_call = SAMPLE_FIELDS_BY_CALL if tier == "sample" else COUNTER_FIELDS_BY_CALL
    read = subject.backend.sample if tier == "sample" else subject.backend.counters

    reading = read(subject.busy_index, skip)

    assert not {e.call for e in reading.errors} & skip
    for call in skip:
        assert all(getattr(reading, f) is None for f in fields_by_call[call]), call
