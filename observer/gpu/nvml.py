"""The real GpuBackend, over the NVIDIA driver's libnvidia-ml.so.1 through pynvml: with its
MIG read (`nvml_mig.py`), the only module that imports pynvml.

pynvml errors stop here. A failed call on one device becomes a ReadError in the sample (the
field stays None); a failed nvmlInit raises DriverNotLoadedError, LibraryNotFoundError or
GpuError; identify() on a lost device raises GpuLostError. GPM keeps two sample buffers per
device (the previous call's and the one taken next), freed when the device is lost and on
close().
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pynvml

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
from observer.errors import DriverNotLoadedError, GpuError, GpuLostError, LibraryNotFoundError
from observer.gpu.backend import (
    GPM_CALL,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    XID_EVENTS_CALL,
    DriverInfo,
    read_error_kind,
)
from observer.gpu.nvml_mig import read_mig, used_bytes, with_mig_processes

T = TypeVar("T")
Handle = pynvml.c_nvmlDevice_t  # opaque device handle (a ctypes pointer); never leaves this module
_Failure = tuple[ReadErrorKind, str]
# After one of these no later call on the device can succeed, so none is made.
_FINAL_KINDS = frozenset({ReadErrorKind.GPU_LOST, ReadErrorKind.DRIVER_NOT_LOADED})

_NVML_ERROR_NOT_SUPPORTED = 3
_NVML_ERROR_TIMEOUT = 10
# GPM answers NOT_SUPPORTED on a device without it; a driver older than GPM lacks the symbols.
_NO_GPM = frozenset({_NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
# GpmActivity's fields, in this order.
_GPM_METRIC_IDS = (
    pynvml.NVML_GPM_METRIC_SM_UTIL,
    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
    pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
    pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
)
_PCIE_REPLAY_FIELD_ID = 94  # NVML_FI_DEV_PCIE_REPLAY_COUNTER
_PAST_THE_LAST_LINK = frozenset({pynvml.NVML_ERROR_INVALID_ARGUMENT, _NVML_ERROR_NOT_SUPPORTED})
# nvmlValue_t member to read for each nvmlValueType_t, in enum order.
_FIELD_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

# NVML 12.x renamed "throttle reasons" to "clock event reasons"; older pynvml lack the new name.
_get_clock_event_reasons: Callable[[Handle], int] = (
    getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
)


# One function per call name of backend.LEAN_CALLS / COUNTER_CALLS: the NVML call(s) and the
# conversion into plain ints. Module-level, so a sample builds no closures.
def _utilization(handle: Handle) -> tuple[int, int]:
    rates = pynvml.nvmlDeviceGetUtilizationRates(handle)
    return int(rates.gpu), int(rates.memory)


def _memory(handle: Handle) -> tuple[int, int]:
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return int(memory.used), int(memory.total)


def _processes(handle: Handle) -> tuple[GpuProcess, ...]:
    return tuple(
        GpuProcess(int(p.pid), used_bytes(p.usedGpuMemory))
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    )


def _power(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetPowerUsage(handle))


def _temperature(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))


def _sm_clock(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))


def _clock_event_reasons(handle: Handle) -> int:
    return int(_get_clock_event_reasons(handle))


def _performance_state(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetPerformanceState(handle))


def _ecc_volatile_uncorrected(handle: Handle) -> int:
    return int(
        pynvml.nvmlDeviceGetTotalEccErrors(
            handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
        )
    )


def _energy(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))


def _pcie_tx(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_TX_BYTES))


def _pcie_rx(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_RX_BYTES))


def _remapped_rows(handle: Handle) -> tuple[int, int, bool, bool]:
    correctable, uncorrectable, pending, failed = pynvml.nvmlDeviceGetRemappedRows(handle)
    return int(correctable), int(uncorrectable), bool(pending), bool(failed)


def _retired_pages(handle: Handle) -> tuple[int, int]:
    single_bit = pynvml.nvmlDeviceGetRetiredPages(
        handle, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
    )
    double_bit = pynvml.nvmlDeviceGetRetiredPages(
        handle, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    )
    return len(single_bit), len(double_bit)


def _retired_pages_pending(handle: Handle) -> bool:
    return pynvml.nvmlDeviceGetRetiredPagesPendingStatus(handle) == pynvml.NVML_FEATURE_ENABLED


def _ecc_aggregate_uncorrected(handle: Handle) -> int:
    return int(
        pynvml.nvmlDeviceGetTotalEccErrors(
            handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC
        )
    )


def _pcie_replay(handle: Handle) -> int:
    (value,) = pynvml.nvmlDeviceGetFieldValues(handle, [_PCIE_REPLAY_FIELD_ID])
    if value.nvmlReturn != pynvml.NVML_SUCCESS:
        # A field fails on its own while the call succeeds: report it like a failed call.
        raise pynvml.NVMLError(value.nvmlReturn)
    return int(getattr(value.value, _FIELD_VALUE_MEMBERS[value.valueType]))


def _nvlink_errors(handle: Handle) -> tuple[int, int, int]:
    """Replay, recovery and CRC (flit + data) errors, summed over the active links."""
    replay = recovery = crc = 0
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(handle, link)
        except pynvml.NVMLError as exc:
            # Links are numbered from 0 and the header's maximum exceeds most devices' count:
            # the first link past the last answers INVALID_ARGUMENT (or NOT_SUPPORTED); on
            # link 0 NOT_SUPPORTED means the device has no NVLink.
            if link == 0 or exc.value not in _PAST_THE_LAST_LINK:
                raise
            break
        if state != pynvml.NVML_FEATURE_ENABLED:
            continue
        replay += _nvlink_counter(handle, link, pynvml.NVML_NVLINK_ERROR_DL_REPLAY)
        recovery += _nvlink_counter(handle, link, pynvml.NVML_NVLINK_ERROR_DL_RECOVERY)
        crc += _nvlink_counter(handle, link, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT)
        crc += _nvlink_counter(handle, link, pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA)
    return replay, recovery, crc


def _nvlink_counter(handle: Handle, link: int, counter: int) -> int:
    return int(pynvml.nvmlDeviceGetNvLinkErrorCounter(handle, link, counter))


def _memory_total(handle: Handle) -> int:
    return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)


def _pci_bus_id(handle: Handle) -> str:
    return str(pynvml.nvmlDeviceGetPciInfo(handle).busId)


def _gpm_supported(handle: Handle) -> bool:
    try:
        return bool(pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
    except pynvml.NVMLError as exc:
        if exc.value in _NO_GPM:
            return False
        raise


class _GpmSamples:
    """One device's two GPM sample buffers: the last one taken and the one taken next, with
    the request nvmlGpmMetricsGet fills (made once: it holds room for every metric id)."""

    __slots__ = ("_last", "_next", "_request", "_taken")

    def __init__(self) -> None:
        self._last = pynvml.nvmlGpmSampleAlloc()
        try:
            self._next = pynvml.nvmlGpmSampleAlloc()
        except pynvml.NVMLError:
            pynvml.nvmlGpmSampleFree(self._last)
            raise
        self._taken = False
        self._request = pynvml.c_nvmlGpmMetricsGet_t()
        self._request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        self._request.numMetrics = len(_GPM_METRIC_IDS)
        for metric, metric_id in zip(self._request.metrics, _GPM_METRIC_IDS, strict=False):
            metric.metricId = metric_id

    def activity(self, handle: Handle) -> GpmActivity | None:
        """What the device did since the last sample; None when this is the first."""
        pynvml.nvmlGpmSampleGet(handle, self._next)
        earlier, self._last, self._next = self._last, self._next, self._last
        if not self._taken:
            self._taken = True
            return None
        self._request.sample1 = earlier
        self._request.sample2 = self._last
        metrics = pynvml.nvmlGpmMetricsGet(self._request).metrics
        percents = []
        for metric in metrics[: len(_GPM_METRIC_IDS)]:
            if metric.nvmlReturn != pynvml.NVML_SUCCESS:
                raise pynvml.NVMLError(metric.nvmlReturn)
            percents.append(metric.value)
        sm_active, sm_occupancy, tensor_active, dram_active = (p / 100 for p in percents)
        return GpmActivity(sm_active, sm_occupancy, tensor_active, dram_active)

    def free(self) -> None:
        # A buffer NVML will not free is memory lost, not a reading: nothing to report.
        for sample in (self._last, self._next):
            with contextlib.suppress(pynvml.NVMLError):
                pynvml.nvmlGpmSampleFree(sample)


def _load_library(path: Path | None) -> ctypes.CDLL | None:
    if path is None:
        return None
    try:
        return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise LibraryNotFoundError(f"cannot load {path}: {exc}") from exc


def _open_error(exc: pynvml.NVMLError) -> GpuError:
    if exc.value == NVML_ERROR_DRIVER_NOT_LOADED:
        return DriverNotLoadedError(f"NVML: {exc}")
    if exc.value == NVML_ERROR_LIBRARY_NOT_FOUND:
        return LibraryNotFoundError(f"NVML: {exc} (libnvidia-ml.so.1)")
    return GpuError(f"NVML could not be opened: {exc}")


def _unless_not_supported(read: Callable[[Handle], T], handle: Handle) -> T | None:
    try:
        return read(handle)
    except pynvml.NVMLError as exc:
        if exc.value == _NVML_ERROR_NOT_SUPPORTED:
            return None
        raise


class _Reads:
    """Makes the named calls on one device, skipping those in `skip`, and keeps one ReadError
    per failed call. Once the device is lost or the driver gone (or the handle could not be had)
    the calls left are not made: each fails the same way, so a sample's errors do not depend on
    which call first noticed."""

    __slots__ = ("_failure", "_handle", "_skip", "errors", "gpu_lost")

    def __init__(
        self, handle: Handle, skip: frozenset[str], failure: _Failure | None = None
    ) -> None:
        self._handle = handle
        self._skip = skip
        self._failure = failure
        self.errors: list[ReadError] = []
        self.gpu_lost = failure is not None and failure[0] is ReadErrorKind.GPU_LOST

    def __call__(self, call: str, read: Callable[[Handle], T]) -> T | None:
        if call in self._skip:
            return None
        if self._failure is not None:
            self.errors.append(ReadError(call, *self._failure))
            return None
        try:
            return read(self._handle)
        except pynvml.NVMLError as exc:
            kind, message = read_error_kind(exc.value), str(exc)
            self.errors.append(ReadError(call, kind, message))
            if kind in _FINAL_KINDS:
                self._failure = (kind, message)
                self.gpu_lost = kind is ReadErrorKind.GPU_LOST
            return None


class NvmlGpuBackend:
    """GpuBackend over NVML. `library_path` names a libnvidia-ml.so.1 outside the loader's
    search path (a non-standard driver location, or the stand-in library in tests); it is
    loaded before pynvml looks the library up by its soname, so pynvml binds to it. A process
    binds to one NVML library: whichever is loaded first."""

    def __init__(self, clock: Clock, library_path: Path | None = None) -> None:
        self._clock = clock
        self._library_path = library_path
        self._library: ctypes.CDLL | None = None
        self._initialised = False
        self._handles: dict[int, Handle] = {}
        self._gpm: dict[int, _GpmSamples | None] = {}  # None: the device has no GPM

    def open(self) -> DriverInfo:
        if self._library is None:
            self._library = _load_library(self._library_path)
        try:
            if not self._initialised:
                pynvml.nvmlInit()
                self._initialised = True
            return DriverInfo(
                driver_version=str(pynvml.nvmlSystemGetDriverVersion()),
                device_count=int(pynvml.nvmlDeviceGetCount()),
            )
        except pynvml.NVMLError as exc:
            raise _open_error(exc) from exc

    def close(self) -> None:
        self._handles.clear()
        for samples in self._gpm.values():
            if samples is not None:
                samples.free()
        self._gpm.clear()
        if not self._initialised:
            return
        self._initialised = False
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as exc:
            raise GpuError(f"NVML shutdown failed: {exc}") from exc

    def identify(self, index: int) -> GpuIdentity:
        try:
            handle = self._handle(index)
            uuid = str(pynvml.nvmlDeviceGetUUID(handle))
            name = str(pynvml.nvmlDeviceGetName(handle))
            memory_total = _unless_not_supported(_memory_total, handle)
            pci_bus_id = _unless_not_supported(_pci_bus_id, handle)
        except pynvml.NVMLError as exc:
            if exc.value == NVML_ERROR_GPU_IS_LOST:
                self._forget(index)
                raise GpuLostError(f"GPU {index}: {exc}") from exc
            if exc.value == NVML_ERROR_DRIVER_NOT_LOADED:
                raise DriverNotLoadedError(f"GPU {index}: {exc}") from exc
            raise GpuError(f"GPU {index}: identity could not be read: {exc}") from exc
        return GpuIdentity(index, uuid, name, memory_total, pci_bus_id)

    def sample(self, index: int, skip: frozenset[str]) -> GpuSample:
        at = self._clock.now()
        read = self._reads(index, skip)
        utilization = read("utilization", _utilization)
        memory = read("memory", _memory)
        processes = read("processes", _processes)
        power = read("power", _power)
        temperature = read("temperature", _temperature)
        sm_clock = read("sm_clock", _sm_clock)
        reasons = read("clock_event_reasons", _clock_event_reasons)
        pstate = read("performance_state", _performance_state)
        ecc = read("ecc_volatile_uncorrected", _ecc_volatile_uncorrected)
        mig = read("mig", read_mig)
        if read.gpu_lost:
            self._forget(index)
        if mig is not None and processes is not None:
            processes = with_mig_processes(processes, mig)
        return GpuSample(
            at=at,
            index=index,
            utilization_gpu_percent=utilization[0] if utilization is not None else None,
            utilization_memory_percent=utilization[1] if utilization is not None else None,
            memory_used_bytes=memory[0] if memory is not None else None,
            memory_total_bytes=memory[1] if memory is not None else None,
            processes=processes,
            power_milliwatts=power,
            temperature_celsius=temperature,
            sm_clock_mhz=sm_clock,
            clock_event_reasons=reasons,
            performance_state=pstate,
            ecc_volatile_uncorrected_errors=ecc,
            mig_instances=mig.instances if mig is not None else None,
            errors=tuple(read.errors),
        )

    def counters(self, index: int, skip: frozenset[str]) -> GpuCounters:
        at = self._clock.now()
        read = self._reads(index, skip)
        energy = read("energy", _energy)
        tx = read("pcie_tx_throughput", _pcie_tx)
        rx = read("pcie_rx_throughput", _pcie_rx)
        remapped = read("remapped_rows", _remapped_rows)
        retired = read("retired_pages", _retired_pages)
        retired_pending = read("retired_pages_pending", _retired_pages_pending)
        ecc_aggregate = read("ecc_aggregate_uncorrected", _ecc_aggregate_uncorrected)
        replay = read("pcie_replay", _pcie_replay)
        nvlink = read("nvlink_errors", _nvlink_errors)
        if read.gpu_lost:
            self._forget(index)
        return GpuCounters(
            at=at,
            index=index,
            energy_millijoules=energy,
            pcie_tx_kilobytes_per_second=tx,
            pcie_rx_kilobytes_per_second=rx,
            remapped_rows_correctable=remapped[0] if remapped is not None else None,
            remapped_rows_uncorrectable=remapped[1] if remapped is not None else None,
            remapped_rows_pending=remapped[2] if remapped is not None else None,
            remapped_rows_failed=remapped[3] if remapped is not None else None,
            retired_pages_single_bit=retired[0] if retired is not None else None,
            retired_pages_double_bit=retired[1] if retired is not None else None,
            retired_pages_pending=retired_pending,
            ecc_aggregate_uncorrected_errors=ecc_aggregate,
            pcie_replay_errors=replay,
            nvlink_replay_errors=nvlink[0] if nvlink is not None else None,
            nvlink_recovery_errors=nvlink[1] if nvlink is not None else None,
            nvlink_crc_errors=nvlink[2] if nvlink is not None else None,
            errors=tuple(read.errors),
        )

    def activity(self, index: int) -> GpmActivity | GpmState | ReadError | None:
        if index in self._gpm and self._gpm[index] is None:
            return GpmState.NOT_SUPPORTED
        try:
            handle = self._handle(index)
            samples = self._gpm.get(index)
            if samples is None:
                if not _gpm_supported(handle):
                    self._gpm[index] = None
                    return GpmState.NOT_SUPPORTED
                samples = self._gpm[index] = _GpmSamples()
            return samples.activity(handle)
        except pynvml.NVMLError as exc:
            if exc.value in _NO_GPM:  # said supported, but a sample cannot be had
                self._free_gpm(index)
                self._gpm[index] = None
                return GpmState.NOT_SUPPORTED
            kind = read_error_kind(exc.value)
            if kind is ReadErrorKind.GPU_LOST:
                self._forget(index)
            return ReadError(GPM_CALL, kind, str(exc))

    def xid_events(self) -> NvmlXidEvents:
        return NvmlXidEvents(self._clock, self._library_path)

    def _forget(self, index: int) -> None:
        """Drops a lost device's handle and GPM samples: a device that comes back answers a
        new handle, and its counters restart."""
        self._handles.pop(index, None)
        self._free_gpm(index)

    def _free_gpm(self, index: int) -> None:
        samples = self._gpm.pop(index, None)
        if samples is not None:
            samples.free()

    def _handle(self, index: int) -> Handle:
        handle = self._handles.get(index)
        if handle is None:
            handle = self._handles[index] = pynvml.nvmlDeviceGetHandleByIndex(index)
        return handle

    def _reads(self, index: int, skip: frozenset[str]) -> _Reads:
        try:
            return _Reads(self._handle(index), skip)
        except pynvml.NVMLError as exc:
            # No handle, no call can be made: every call of the sample fails with this error
            # (and the NULL handle standing in is never passed to NVML).
            return _Reads(Handle(), skip, (read_error_kind(exc.value), str(exc)))


class NvmlXidEvents:
    """XidEventSource over one NVML event set. It takes its own reference to NVML (nvmlInit
    counts references), so the sampler re-initialising after a driver outage does not free
    the set under a wait."""

    def __init__(self, clock: Clock, library_path: Path | None = None) -> None:
        self._clock = clock
        self._library_path = library_path
        self._library: ctypes.CDLL | None = None
        self._set = pynvml.c_nvmlEventSet_t()  # NULL until open
        self._devices: dict[int, tuple[int, str | None]] = {}  # handle -> index, PCI bus id

    def open(self) -> int:
        if self._library is None:
            self._library = _load_library(self._library_path)
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise _open_error(exc) from exc
        try:
            count = int(pynvml.nvmlDeviceGetCount())
            self._set = pynvml.nvmlEventSetCreate()
        except pynvml.NVMLError as exc:
            pynvml.nvmlShutdown()
            raise _open_error(exc) from exc
        return count

    def register(self, index: int) -> ReadError | None:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            supported = int(pynvml.nvmlDeviceGetSupportedEventTypes(handle))
            if not supported & pynvml.nvmlEventTypeXidCriticalError:
                return ReadError(
                    XID_EVENTS_CALL, ReadErrorKind.NOT_SUPPORTED, "Xid events not supported"
                )
            pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, self._set)
            pci_bus_id = _unless_not_supported(_pci_bus_id, handle)
        except pynvml.NVMLError as exc:
            return ReadError(XID_EVENTS_CALL, read_error_kind(exc.value), str(exc))
        self._devices[_address(handle)] = (index, pci_bus_id)
        return None

    def wait(self, timeout_seconds: float) -> XidEvent | ReadError | None:
        try:
            data = pynvml.nvmlEventSetWait_v2(self._set, max(1, int(timeout_seconds * 1000)))
        except pynvml.NVMLError as exc:
            if exc.value == _NVML_ERROR_TIMEOUT:
                return None
            return ReadError(XID_EVENTS_CALL, read_error_kind(exc.value), str(exc))
        if not int(data.eventType) & pynvml.nvmlEventTypeXidCriticalError:
            return None
        index, pci_bus_id = self._devices.get(_address(data.device), (None, None))
        return XidEvent(
            at=self._clock.now(),
            code=int(data.eventData),
            source=XidSource.NVML,
            pci_bus_id=pci_bus_id,
            gpu_index=index,
        )

    def close(self) -> None:
        self._devices.clear()
        if not self._set:
            return
        try:
            pynvml.nvmlEventSetFree(self._set)
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as exc:
            raise GpuError(f"NVML event set could not be freed: {exc}") from exc
        finally:
            self._set = pynvml.c_nvmlEventSet_t()


def _address(handle: Handle) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0
