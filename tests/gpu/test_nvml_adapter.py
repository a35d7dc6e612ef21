"""The real NVML adapter, driven through pynvml over the stand-in libnvidia-ml.so.1."""

from __future__ import annotations

import ctypes.util
import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from observer.agent.sampler import Sampler
from observer.agent.xids import XidWatch
from observer.clock import ManualClock
from observer.domain import (
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuSample,
    ReadError,
    ReadErrorKind,
    XidEvent,
    XidSource,
)
from observer.errors import DriverNotLoadedError, GpuError, GpuLostError, LibraryNotFoundError
from observer.gpu.backend import COUNTER_CALLS, LEAN_CALLS, DriverInfo
from observer.gpu.nvml import NvmlGpuBackend
from observer.metrics import AgentMetrics
from tests.gpu.fake_nvml import (
    COUNTER_FIELDS_BY_CALL,
    SAMPLE_FIELDS_BY_CALL,
    FakeNvLink,
    FakeNvml,
    FakeNvmlGpu,
    FakeXid,
)

pytestmark = pytest.mark.fake_nvml

GiB = 2**30
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOTHING_SKIPPED: frozenset[str] = frozenset()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def backend(clock: ManualClock, fake_nvml_state: FakeNvml) -> Iterator[NvmlGpuBackend]:
    backend = NvmlGpuBackend(clock, library_path=fake_nvml_state.library)
    yield backend
    backend.close()


def training_gpu(index: int) -> FakeNvmlGpu:
    """GPU `index` of a busy node: one training process holding more than 4 GiB."""
    return FakeNvmlGpu(
        utilization_gpu_percent=90 + index,
        utilization_memory_percent=20 + index,
        memory_used_bytes=(6 + index) * GiB,
        power_milliwatts=650_000 + index,
        temperature_celsius=60 + index,
        sm_clock_mhz=1980 - index,
        clock_event_reasons=4,
        performance_state=index % 2,
        ecc_volatile_uncorrected_errors=index,
        processes=((4000 + index, (5 + index) * GiB),),
    )


def expected_sample(index: int, gpu: FakeNvmlGpu) -> GpuSample:
    return GpuSample(
        at=NOW,
        index=index,
        utilization_gpu_percent=gpu.utilization_gpu_percent,
        utilization_memory_percent=gpu.utilization_memory_percent,
        memory_used_bytes=gpu.memory_used_bytes,
        memory_total_bytes=gpu.memory_total_bytes,
        processes=tuple(GpuProcess(pid, used) for pid, used in gpu.processes),
        power_milliwatts=gpu.power_milliwatts,
        temperature_celsius=gpu.temperature_celsius,
        sm_clock_mhz=gpu.sm_clock_mhz,
        clock_event_reasons=gpu.clock_event_reasons,
        performance_state=gpu.performance_state,
        ecc_volatile_uncorrected_errors=gpu.ecc_volatile_uncorrected_errors,
    )


def expected_identity(index: int) -> GpuIdentity:
    return GpuIdentity(
        index=index,
        uuid=f"GPU-00000000-0000-0000-0000-{index:012d}",
        name="NVIDIA H200 (fake)",
        memory_total_bytes=150_754_820_096,
        pci_bus_id=f"00000000:{index + 1:02X}:00.0",
    )


def test_an_eight_gpu_node_is_identified_and_sampled(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    gpus = [training_gpu(i) for i in range(8)]
    fake_nvml_state.set(gpus)

    assert backend.open() == DriverInfo(driver_version="999.99-fake", device_count=8)
    assert [backend.identify(i) for i in range(8)] == [expected_identity(i) for i in range(8)]
    assert [backend.sample(i, NOTHING_SKIPPED) for i in range(8)] == [
        expected_sample(i, gpu) for i, gpu in enumerate(gpus)
    ]


def test_process_memory_beyond_4_gib_is_read_in_full(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(processes=((418, 70 * GiB + 1), (419, 4 * GiB)))])
    backend.open()

    assert backend.sample(0, NOTHING_SKIPPED).processes == (
        GpuProcess(418, 75_161_927_681),
        GpuProcess(419, 4_294_967_296),
    )


def test_process_memory_nvml_cannot_attribute_reads_as_none(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(processes=((418, None), (419, GiB)))])
    backend.open()

    assert backend.sample(0, NOTHING_SKIPPED).processes == (
        GpuProcess(418, None),
        GpuProcess(419, GiB),
    )


def test_counters_read_the_expensive_tier(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set(
        [
            FakeNvmlGpu(),
            FakeNvmlGpu(
                energy_millijoules=9_876_543_210,
                pcie_tx_kilobytes_per_second=7487,
                pcie_rx_kilobytes_per_second=1234,
                remapped_rows_correctable=3,
                remapped_rows_uncorrectable=1,
                remapped_rows_pending=True,
                remapped_rows_failed=False,
                retired_pages_single_bit=2,
                retired_pages_double_bit=5,
                retired_pages_pending=True,
                ecc_aggregate_uncorrected_errors=9,
                pcie_replay_errors=17,
                nvlinks=(
                    FakeNvLink(replay=3, recovery=1, crc_flit=2, crc_data=5),
                    FakeNvLink(active=False, replay=40, recovery=40, crc_flit=40, crc_data=40),
                    FakeNvLink(replay=4),
                ),
            ),
        ]
    )
    backend.open()

    assert backend.counters(1, NOTHING_SKIPPED) == GpuCounters(
        at=NOW,
        index=1,
        energy_millijoules=9_876_543_210,
        pcie_tx_kilobytes_per_second=7487,
        pcie_rx_kilobytes_per_second=1234,
        remapped_rows_correctable=3,
        remapped_rows_uncorrectable=1,
        remapped_rows_pending=True,
        remapped_rows_failed=False,
        retired_pages_single_bit=2,
        retired_pages_double_bit=5,
        retired_pages_pending=True,
        ecc_aggregate_uncorrected_errors=9,
        pcie_replay_errors=17,
        nvlink_replay_errors=3 + 4,  # the active links' only
        nvlink_recovery_errors=1,
        nvlink_crc_errors=2 + 5,  # flit and data CRC errors together
    )


def test_a_gpu_without_nvlink_is_asked_once_and_its_other_counters_are_read(
    clock: ManualClock, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(nvlinks=(), pcie_replay_errors=5)])
    sampler = Sampler(
        NvmlGpuBackend(clock, library_path=fake_nvml_state.library),
        clock,
        AgentMetrics(CollectorRegistry()),
        counters_interval_seconds=10,
    )

    readings = []
    for _ in range(3):
        (gpu,) = sampler.tick().gpus
        readings.append(gpu.counters)
        clock.advance(11)
    sampler.close()

    first, *later = readings
    assert first is not None
    assert first.errors == (
        ReadError("nvlink_errors", ReadErrorKind.NOT_SUPPORTED, "Not Supported"),
    )
    for counters in readings:
        assert counters is not None
        assert counters.nvlink_replay_errors is None
        assert counters.nvlink_recovery_errors is None
        assert counters.nvlink_crc_errors is None
        assert counters.pcie_replay_errors == 5
    assert [c.errors for c in later if c is not None] == [(), ()]
    assert fake_nvml_state.calls()["nvmlDeviceGetNvLinkState"] == 1
    assert fake_nvml_state.calls()["nvmlDeviceGetNvLinkErrorCounter"] == 0


def read_tier(backend: NvmlGpuBackend, call: str) -> GpuSample | GpuCounters:
    if call in LEAN_CALLS:
        return backend.sample(0, NOTHING_SKIPPED)
    return backend.counters(0, NOTHING_SKIPPED)


@pytest.mark.parametrize("call", LEAN_CALLS + COUNTER_CALLS)
def test_an_unsupported_call_is_a_read_error_and_the_rest_are_read(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml, call: str
) -> None:
    fake_nvml_state.set([training_gpu(0)])
    backend.open()
    supported = read_tier(backend, call)
    assert supported.errors == ()
    fields = {**SAMPLE_FIELDS_BY_CALL, **COUNTER_FIELDS_BY_CALL}[call]

    fake_nvml_state.set([dataclasses.replace(training_gpu(0), unsupported=frozenset({call}))])

    unread: dict[str, Any] = dict.fromkeys(fields)
    assert read_tier(backend, call) == dataclasses.replace(
        supported,
        **unread,
        errors=(ReadError(call, ReadErrorKind.NOT_SUPPORTED, "Not Supported"),),
    )


def test_skipped_calls_are_not_made(backend: NvmlGpuBackend, fake_nvml_state: FakeNvml) -> None:
    fake_nvml_state.set([training_gpu(0)])
    backend.open()

    sample = backend.sample(0, frozenset({"processes", "ecc_volatile_uncorrected"}))
    counters = backend.counters(
        0, frozenset({"retired_pages", "pcie_tx_throughput", "ecc_aggregate_uncorrected"})
    )

    assert sample == dataclasses.replace(
        expected_sample(0, training_gpu(0)), processes=None, ecc_volatile_uncorrected_errors=None
    )
    assert counters.retired_pages_single_bit is None
    assert counters.pcie_tx_kilobytes_per_second is None
    assert counters.pcie_rx_kilobytes_per_second == training_gpu(0).pcie_rx_kilobytes_per_second
    assert counters.errors == ()
    calls = fake_nvml_state.calls()
    assert calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 0
    assert calls["nvmlDeviceGetTotalEccErrors"] == 0
    assert calls["nvmlDeviceGetRetiredPages"] == 0
    assert calls["nvmlDeviceGetPcieThroughput"] == 1  # RX only


def lost_while_read(backend: NvmlGpuBackend, fake_nvml_state: FakeNvml) -> list[FakeNvmlGpu]:
    """Opens a two-GPU node and returns its healthy state; the caller marks GPU 1 lost."""
    healthy = [FakeNvmlGpu(), training_gpu(1)]
    fake_nvml_state.set(healthy)
    backend.open()
    return healthy


@pytest.mark.parametrize("tier", ["sample", "counters"])
def test_a_gpu_lost_mid_run_reads_as_lost_and_is_read_again_when_it_returns(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml, tier: str
) -> None:
    read = backend.sample if tier == "sample" else backend.counters
    calls = LEAN_CALLS if tier == "sample" else COUNTER_CALLS
    healthy = lost_while_read(backend, fake_nvml_state)
    before = [read(0, NOTHING_SKIPPED), read(1, NOTHING_SKIPPED)]
    assert before[1].errors == ()

    fake_nvml_state.set([healthy[0], dataclasses.replace(healthy[1], lost=True)])

    assert read(1, NOTHING_SKIPPED) == type(before[1])(
        at=NOW,
        index=1,
        errors=tuple(ReadError(c, ReadErrorKind.GPU_LOST, "GPU is lost") for c in calls),
    )
    assert read(0, NOTHING_SKIPPED) == before[0]

    # Back on the bus: handles taken before the loss stay dead, so this needs a fresh one.
    fake_nvml_state.set(healthy)

    assert read(1, NOTHING_SKIPPED) == before[1]


def test_a_lost_gpu_cannot_be_identified_until_it_returns(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    healthy = lost_while_read(backend, fake_nvml_state)
    assert backend.identify(1) == expected_identity(1)

    fake_nvml_state.set([healthy[0], dataclasses.replace(healthy[1], lost=True)])

    with pytest.raises(GpuLostError, match="GPU 1"):
        backend.identify(1)

    fake_nvml_state.set(healthy)

    assert backend.identify(1) == expected_identity(1)
    assert backend.sample(1, NOTHING_SKIPPED) == expected_sample(1, healthy[1])


def test_identity_without_memory_information_has_no_memory_total(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(unsupported=frozenset({"memory"}))])
    backend.open()

    assert backend.identify(0) == dataclasses.replace(expected_identity(0), memory_total_bytes=None)


def test_identifying_a_device_that_is_not_there_fails(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu()])
    backend.open()

    with pytest.raises(GpuError, match="GPU 3"):
        backend.identify(3)


def test_open_fails_while_the_driver_is_not_loaded_and_succeeds_once_it_is(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu()], driver_not_loaded=True)

    with pytest.raises(DriverNotLoadedError):
        backend.open()

    fake_nvml_state.set([FakeNvmlGpu(), FakeNvmlGpu()])
    assert backend.open() == DriverInfo(driver_version="999.99-fake", device_count=2)


def test_a_driver_gone_mid_run_fails_every_read_until_nvml_is_opened_again(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    gpus = [training_gpu(0)]
    fake_nvml_state.set(gpus)
    backend.open()
    backend.identify(0)

    fake_nvml_state.set(gpus, driver_not_loaded=True)

    assert backend.sample(0, NOTHING_SKIPPED).errors == tuple(
        ReadError(c, ReadErrorKind.DRIVER_NOT_LOADED, "Driver Not Loaded") for c in LEAN_CALLS
    )
    with pytest.raises(DriverNotLoadedError):
        backend.identify(0)
    backend.close()
    with pytest.raises(DriverNotLoadedError):
        backend.open()

    fake_nvml_state.set(gpus)

    assert backend.open() == DriverInfo(driver_version="999.99-fake", device_count=1)
    assert backend.sample(0, NOTHING_SKIPPED) == expected_sample(0, gpus[0])


def test_a_library_path_that_does_not_exist_is_library_not_found(
    clock: ManualClock, tmp_path: Path
) -> None:
    backend = NvmlGpuBackend(clock, library_path=tmp_path / "libnvidia-ml.so.1")

    with pytest.raises(LibraryNotFoundError, match=r"libnvidia-ml\.so\.1"):
        backend.open()


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None,
    reason="this machine has a real libnvidia-ml",
)
def test_without_any_nvml_library_open_is_library_not_found() -> None:
    # In a fresh process: this one has bound pynvml to the stand-in library for good.
    script = (
        "from observer.clock import SystemClock\n"
        "from observer.gpu.nvml import NvmlGpuBackend\n"
        "try:\n"
        "    NvmlGpuBackend(SystemClock()).open()\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_NVML", "LD_"))}

    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )

    assert result.stdout.strip() == "LibraryNotFoundError", result.stderr


def test_xid_events_decode_nvmls_event_data_into_the_device_and_code(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml, clock: ManualClock
) -> None:
    gpus = [FakeNvmlGpu(), FakeNvmlGpu(), FakeNvmlGpu()]
    fake_nvml_state.set(gpus)
    events = backend.xid_events()
    assert events.open() == 3
    assert [events.register(i) for i in (0, 2)] == [None, None]

    fake_nvml_state.set(gpus, xids=[FakeXid(id=1, gpu=1, code=13), FakeXid(id=2, gpu=2, code=119)])

    # GPU 1 was not registered: its Xid is not this set's.
    assert events.wait(1.0) == XidEvent(
        NOW, 119, XidSource.NVML, pci_bus_id="00000000:03:00.0", gpu_index=2
    )
    assert events.wait(0.01) is None
    events.close()


def test_a_gpu_without_xid_events_is_asked_once_and_the_others_still_report(
    fake_nvml_state: FakeNvml, clock: ManualClock
) -> None:
    gpus = [FakeNvmlGpu(unsupported=frozenset({"xid_events"})), FakeNvmlGpu()]
    fake_nvml_state.set(gpus)
    metrics = AgentMetrics(CollectorRegistry())
    source = NvmlGpuBackend(clock, library_path=fake_nvml_state.library).xid_events()
    watch = XidWatch(source, None, 0.01, threading.Event(), metrics.xid_source_up)

    for _ in range(5):
        watch.step()
    fake_nvml_state.set(gpus, xids=[FakeXid(id=1, gpu=1, code=79)])
    watch.step()

    assert [(e.gpu_index, e.code) for e in watch.take()] == [(1, 79)]
    assert fake_nvml_state.calls()["nvmlDeviceGetSupportedEventTypes"] == 2  # once per GPU
    assert fake_nvml_state.calls()["nvmlDeviceRegisterEvents"] == 1
