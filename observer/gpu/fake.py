"""An in-memory GPU node whose state a test or the simulator sets directly: devices with
utilisation, memory, processes and health counters, plus the faults NVML shows (a call not
supported, a lost device, a driver that is not loaded, an Xid error). It counts the calls it
answers. GPM answers each GPU's `activity` (a GPU without one has no GPM) from the first call,
the fake having no counters to sample twice."""

from __future__ import annotations

import queue
from collections import Counter
from dataclasses import dataclass, field

from observer.clock import Clock
from observer.domain import (
    GpmActivity,
    GpmState,
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuSample,
    ReadError,
    ReadErrorKind,
    XidEvent,
    XidSource,
)
from observer.errors import DriverNotLoadedError, GpuLostError
from observer.gpu.backend import (
    COUNTER_CALLS,
    GPM_CALL,
    LEAN_CALLS,
    XID_EVENTS_CALL,
    DriverInfo,
)

GIB = 2**30


@dataclass
class FakeGpu:
    uuid: str
    memory_total_bytes: int = 80 * GIB
    memory_used_bytes: int = 600 * 2**20
    utilization_gpu_percent: int = 0
    processes: dict[int, int | None] = field(default_factory=dict)  # pid -> used bytes
    power_milliwatts: int = 70_000
    temperature_celsius: int = 35
    energy_millijoules: int = 0
    clock_event_reasons: int = 0
    ecc_volatile_uncorrected_errors: int = 0
    ecc_aggregate_uncorrected_errors: int = 0
    remapped_rows_pending: bool = False
    remapped_rows_failed: bool = False
    retired_pages_pending: bool = False
    pcie_replay_errors: int = 0
    nvlink_replay_errors: int = 0  # summed over the active links, as the backends report them
    nvlink_recovery_errors: int = 0
    nvlink_crc_errors: int = 0
    lost: bool = False
    unsupported: set[str] = field(default_factory=set)  # call names, XID_EVENTS_CALL too
    pci_bus_id: str | None = None
    activity: GpmActivity | None = None  # what GPM reports; None: a GPU without GPM


class FakeGpuBackend:
    def __init__(self, gpus: list[FakeGpu], clock: Clock) -> None:
        self.gpus = gpus
        self.driver_loaded = True
        self.calls: Counter[str] = Counter()
        self._clock = clock
        self._event_sources: list[FakeXidEvents] = []

    def open(self) -> DriverInfo:
        if not self.driver_loaded:
            raise DriverNotLoadedError("Driver Not Loaded")
        return DriverInfo("999.99-fake", len(self.gpus))

    def identify(self, index: int) -> GpuIdentity:
        gpu = self.gpus[index]
        if gpu.lost:
            raise GpuLostError(f"GPU {index} is lost")
        return GpuIdentity(index, gpu.uuid, "Fake GPU", gpu.memory_total_bytes, gpu.pci_bus_id)

    def close(self) -> None:
        return None

    def xid_events(self) -> FakeXidEvents:
        source = FakeXidEvents(self, self._clock)
        self._event_sources.append(source)
        return source

    def xid(self, index: int, code: int) -> None:
        """An Xid error on the device: every event source that registered it gets it."""
        for source in self._event_sources:
            source.deliver(index, code)

    def _answer(
        self, gpu: FakeGpu, call: str, skip: frozenset[str], errors: list[ReadError]
    ) -> bool:
        if call in skip:
            return False
        self.calls[call] += 1
        if not self.driver_loaded:
            errors.append(ReadError(call, ReadErrorKind.DRIVER_NOT_LOADED, "Driver Not Loaded"))
            return False
        if gpu.lost:
            errors.append(ReadError(call, ReadErrorKind.GPU_LOST, "GPU is lost"))
            return False
        if call in gpu.unsupported:
            errors.append(ReadError(call, ReadErrorKind.NOT_SUPPORTED, "Not Supported"))
            return False
        return True

    def _answers(
        self, gpu: FakeGpu, calls: tuple[str, ...], skip: frozenset[str], errors: list[ReadError]
    ) -> dict[str, bool]:
        if self.driver_loaded and not gpu.lost and not gpu.unsupported and not skip:
            self.calls.update(calls)  # a healthy GPU answers every call (the demo's ticks)
            return dict.fromkeys(calls, True)
        return {call: self._answer(gpu, call, skip, errors) for call in calls}

    def sample(self, index: int, skip: frozenset[str]) -> GpuSample:
        gpu = self.gpus[index]
        errors: list[ReadError] = []
        ok = self._answers(gpu, LEAN_CALLS, skip, errors)
        return GpuSample(
            at=self._clock.now(),
            index=index,
            utilization_gpu_percent=gpu.utilization_gpu_percent if ok["utilization"] else None,
            utilization_memory_percent=0 if ok["utilization"] else None,
            memory_used_bytes=gpu.memory_used_bytes if ok["memory"] else None,
            memory_total_bytes=gpu.memory_total_bytes if ok["memory"] else None,
            processes=(
                tuple(GpuProcess(pid, used) for pid, used in gpu.processes.items())
                if ok["processes"]
                else None
            ),
            power_milliwatts=gpu.power_milliwatts if ok["power"] else None,
            temperature_celsius=gpu.temperature_celsius if ok["temperature"] else None,
            sm_clock_mhz=1980 if ok["sm_clock"] else None,
            clock_event_reasons=gpu.clock_event_reasons if ok["clock_event_reasons"] else None,
            performance_state=0 if ok["performance_state"] else None,
            ecc_volatile_uncorrected_errors=(
                gpu.ecc_volatile_uncorrected_errors if ok["ecc_volatile_uncorrected"] else None
            ),
            errors=tuple(errors),
        )

    def counters(self, index: int, skip: frozenset[str]) -> GpuCounters:
        gpu = self.gpus[index]
        errors: list[ReadError] = []
        ok = self._answers(gpu, COUNTER_CALLS, skip, errors)
        return GpuCounters(
            at=self._clock.now(),
            index=index,
            energy_millijoules=gpu.energy_millijoules if ok["energy"] else None,
            pcie_tx_kilobytes_per_second=0 if ok["pcie_tx_throughput"] else None,
            pcie_rx_kilobytes_per_second=0 if ok["pcie_rx_throughput"] else None,
            remapped_rows_correctable=0 if ok["remapped_rows"] else None,
            remapped_rows_uncorrectable=0 if ok["remapped_rows"] else None,
            remapped_rows_pending=gpu.remapped_rows_pending if ok["remapped_rows"] else None,
            remapped_rows_failed=gpu.remapped_rows_failed if ok["remapped_rows"] else None,
            retired_pages_single_bit=0 if ok["retired_pages"] else None,
            retired_pages_double_bit=0 if ok["retired_pages"] else None,
            retired_pages_pending=(
                gpu.retired_pages_pending if ok["retired_pages_pending"] else None
            ),
            ecc_aggregate_uncorrected_errors=(
                gpu.ecc_aggregate_uncorrected_errors if ok["ecc_aggregate_uncorrected"] else None
            ),
            pcie_replay_errors=gpu.pcie_replay_errors if ok["pcie_replay"] else None,
            nvlink_replay_errors=gpu.nvlink_replay_errors if ok["nvlink_errors"] else None,
            nvlink_recovery_errors=gpu.nvlink_recovery_errors if ok["nvlink_errors"] else None,
            nvlink_crc_errors=gpu.nvlink_crc_errors if ok["nvlink_errors"] else None,
            errors=tuple(errors),
        )

    def activity(self, index: int) -> GpmActivity | GpmState | ReadError | None:
        gpu = self.gpus[index]
        self.calls[GPM_CALL] += 1
        if not self.driver_loaded:
            return ReadError(GPM_CALL, ReadErrorKind.DRIVER_NOT_LOADED, "Driver Not Loaded")
        if gpu.lost:
            return ReadError(GPM_CALL, ReadErrorKind.GPU_LOST, "GPU is lost")
        return GpmState.NOT_SUPPORTED if gpu.activity is None else gpu.activity


class FakeXidEvents:
    """The fake's XidEventSource: Xids the test raises with FakeGpuBackend.xid, for the
    devices registered (like NVML, only those raised after registering)."""

    def __init__(self, backend: FakeGpuBackend, clock: Clock) -> None:
        self._backend = backend
        self._clock = clock
        self._registered: set[int] = set()
        self._queue: queue.SimpleQueue[XidEvent] = queue.SimpleQueue()

    def open(self) -> int:
        return self._backend.open().device_count

    def register(self, index: int) -> ReadError | None:
        gpu = self._backend.gpus[index]
        if gpu.lost:
            return ReadError(XID_EVENTS_CALL, ReadErrorKind.GPU_LOST, "GPU is lost")
        if XID_EVENTS_CALL in gpu.unsupported:
            return ReadError(XID_EVENTS_CALL, ReadErrorKind.NOT_SUPPORTED, "Not Supported")
        self._registered.add(index)
        return None

    def deliver(self, index: int, code: int) -> None:
        if index in self._registered:
            pci = self._backend.gpus[index].pci_bus_id
            at = self._clock.now()
            self._queue.put(XidEvent(at, code, XidSource.NVML, pci, gpu_index=index))

    def wait(self, timeout_seconds: float) -> XidEvent | ReadError | None:
        try:
            return self._queue.get(timeout=timeout_seconds)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._registered.clear()
