"""What every GpuBackend promises, checked on the replay of the recorded H200 trace, on the
in-memory fake and on the real NVML adapter over the stand-in libnvidia-ml.so.1: sampling,
Xid events through each backend's XidEventSource, and GPM's activity."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import astuple, dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.clock import ManualClock, TraceTimeline
from observer.domain import (
    GpmActivity,
    GpmState,
    GpuCounters,
    GpuProcess,
    GpuSample,
    ReadError,
    XidEvent,
    XidSource,
)
from observer.gpu.backend import (
    COUNTER_CALLS,
    GPM_CALL,
    LEAN_CALLS,
    XID_EVENTS_CALL,
    DriverInfo,
    GpuBackend,
)
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.gpu.nvml import NvmlGpuBackend
from observer.gpu.replay import ReplayGpuBackend, Trace
from tests.gpu.fake_nvml import (
    COUNTER_FIELDS_BY_CALL,
    SAMPLE_FIELDS_BY_CALL,
    FakeNvLink,
    FakeNvml,
    FakeNvmlGpu,
    FakeXid,
)

WALL_START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOTHING_SKIPPED: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Subject:
    backend: GpuBackend
    clock: ManualClock
    info: DriverInfo  # what open() reported
    busy_index: int  # a device running one compute process
    xid_79: Callable[[], None]  # makes an Xid 79 happen on the busy device, now
    nvlink_errors: tuple[int, int, int]  # the busy device's replay, recovery and CRC errors


# Links of a node whose NVLinks saw errors: the errors of a link that is down do not count.
NVLINKS = (
    {"state": 1, "replay": 6, "recovery": 1, "crc_flit": 2, "crc_data": 3},
    {"state": 0, "replay": 50, "recovery": 50, "crc_flit": 50, "crc_data": 50},
    {"state": 1, "replay": 1, "recovery": 0, "crc_flit": 0, "crc_data": 4},
)
NVLINK_ERRORS = (6 + 1, 1, 2 + 3 + 4)


def replay_subject(recorded: Path, trace_dir: Path) -> Iterator[Subject]:
    # The recorded trace plus one Xid 79 ten seconds into the busy phase, and the NVLink
    # counters the recording VM had none of.
    trace_dir.mkdir()
    for path in recorded.iterdir():
        if path.name != "samples.jsonl.gz":
            (trace_dir / path.name).symlink_to(path)
    with gzip.open(recorded / "samples.jsonl.gz", "rt") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    with gzip.open(trace_dir / "samples.jsonl.gz", "wt") as out:
        out.writelines(json.dumps({**r, "nvlink": {"ok": NVLINKS}}) + "\n" for r in records)
    phases = {p["phase"]: p["t"] for p in json.loads((recorded / "phases.json").read_text())}
    busy = (phases["child1_ready"] + phases["child1_busy_done"]) / 2
    (trace_dir / "xid_events.jsonl").write_text(json.dumps({"t": busy + 10, "gpu": 0, "code": 79}))
    trace = Trace.load(trace_dir)
    clock = ManualClock(WALL_START)
    timeline = TraceTimeline(trace.start, trace.end, WALL_START.timestamp(), loop=True)
    clock.set(timeline.to_wall(busy, clock.now()))
    backend = ReplayGpuBackend(trace, timeline, clock)
    yield Subject(
        backend,
        clock,
        backend.open(),
        busy_index=0,
        xid_79=lambda: clock.advance(20),
        nvlink_errors=NVLINK_ERRORS,
    )
    backend.close()


def fake_subject() -> Iterator[Subject]:
    clock = ManualClock(WALL_START)
    busy = FakeGpu(
        "GPU-fake-1",
        utilization_gpu_percent=100,
        memory_used_bytes=23 * GIB,
        processes={418: 21 * GIB},
        pci_bus_id="00000000:02:00.0",
        activity=GpmActivity(0.8, 0.4, 0.3, 0.5),
        nvlink_replay_errors=NVLINK_ERRORS[0],
        nvlink_recovery_errors=NVLINK_ERRORS[1],
        nvlink_crc_errors=NVLINK_ERRORS[2],
    )
    backend = FakeGpuBackend([FakeGpu("GPU-fake-0"), busy], clock)
    yield Subject(
        backend,
        clock,
        backend.open(),
        busy_index=1,
        xid_79=lambda: backend.xid(1, 79),
        nvlink_errors=NVLINK_ERRORS,
    )
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
        sm_active_percent=80,
        sm_occupancy_percent=40,
        tensor_active_percent=30,
        dram_active_percent=50,
        processes=((418, 22_525_509_632),),
        nvlinks=tuple(
            FakeNvLink(
                bool(link["state"]),
                link["replay"],
                link["recovery"],
                link["crc_flit"],
                link["crc_data"],
            )
            for link in NVLINKS
        ),
        unsupported=h200.unsupported,
    )
    fake.set([h200, busy])
    clock = ManualClock(WALL_START)
    backend = NvmlGpuBackend(clock, library_path=fake.library)
    yield Subject(
        backend,
        clock,
        backend.open(),
        busy_index=1,
        xid_79=lambda: fake.set([h200, busy], xids=[FakeXid(id=1, gpu=1, code=79)]),
        nvlink_errors=NVLINK_ERRORS,
    )
    backend.close()


@pytest.fixture(params=["replay", "fake", pytest.param("nvml", marks=pytest.mark.fake_nvml)])
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    if request.param == "replay":
        tmp_path = request.getfixturevalue("tmp_path")
        yield from replay_subject(request.getfixturevalue("h200_trace"), tmp_path / "trace")
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
            # Processes and MIG instances are tuples of records, not ints.
            if call not in failed and call not in ("processes", "mig"):
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
            elif call == "mig":
                pass  # None is an answer here: MIG mode off (none of these GPUs is in it)
            else:
                assert None not in values, (call, values)


def test_nvlink_errors_are_the_sums_over_the_active_links(subject: Subject) -> None:
    counters = subject.backend.counters(subject.busy_index, NOTHING_SKIPPED)

    assert "nvlink_errors" not in {e.call for e in counters.errors}
    assert (
        counters.nvlink_replay_errors,
        counters.nvlink_recovery_errors,
        counters.nvlink_crc_errors,
    ) == subject.nvlink_errors


@pytest.mark.parametrize(
    ("tier", "skip"),
    [
        ("sample", frozenset({"processes", "power", "ecc_volatile_uncorrected"})),
        ("counters", frozenset({"energy", "retired_pages", "pcie_replay", "nvlink_errors"})),
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


def test_activity_is_ratios_of_the_interval_or_not_supported_never_made_up(
    subject: Subject,
) -> None:
    for index in range(subject.info.device_count):
        for _ in range(2):
            answer = subject.backend.activity(index)
            subject.clock.advance(1)

            assert (
                answer is None
                or answer is GpmState.NOT_SUPPORTED
                or (type(answer) is GpmActivity and all(0 <= r <= 1 for r in astuple(answer)))
                or (type(answer) is ReadError and answer.call == GPM_CALL)
            ), answer


def test_every_device_registers_for_xid_events_or_says_why_not(subject: Subject) -> None:
    events = subject.backend.xid_events()

    assert events.open() == subject.info.device_count
    for index in range(subject.info.device_count):
        answer = events.register(index)
        assert answer is None or (type(answer) is ReadError and answer.call == XID_EVENTS_CALL)
    events.close()


def test_a_wait_with_no_xid_ends_at_its_timeout_with_nothing(subject: Subject) -> None:
    events = subject.backend.xid_events()
    events.open()
    assert events.register(subject.busy_index) is None

    started = time.monotonic()
    assert events.wait(0.05) is None
    assert time.monotonic() - started < 1
    events.close()


def test_an_xid_on_a_registered_device_is_returned_once_naming_the_device(
    subject: Subject,
) -> None:
    events = subject.backend.xid_events()
    events.open()
    assert events.register(subject.busy_index) is None

    subject.xid_79()
    got = events.wait(1.0)

    identity = subject.backend.identify(subject.busy_index)
    assert got == XidEvent(
        at=subject.clock.now(),
        code=79,
        source=XidSource.NVML,
        pci_bus_id=identity.pci_bus_id,
        gpu_index=subject.busy_index,
    )
    assert events.wait(0.05) is None
    events.close()
