"""What the agent asks of a GPU library, in domain types.

Per-call failures are data: `sample` and `counters` return every read that worked and one
ReadError per read that failed (a device whose handle cannot be had fails every call the
same way). Only `open` (driver not loaded, library missing) and `identify` (device lost)
raise. `activity` answers what GPM measured since its previous call for the device, a GPU
without GPM as GpmState.NOT_SUPPORTED and a failed read as a ReadError. Xid events come
through a separate `XidEventSource`, owned by the agent's event thread, so that waiting for
an event never holds up sampling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from observer.domain import (
    GpmActivity,
    GpmState,
    GpuCounters,
    GpuIdentity,
    GpuSample,
    ReadError,
    ReadErrorKind,
    XidEvent,
)

LEAN_CALLS = (
    "utilization",
    "memory",
    "processes",
    "power",
    "temperature",
    "sm_clock",
    "clock_event_reasons",
    "performance_state",
    "ecc_volatile_uncorrected",
    "mig",
)
COUNTER_CALLS = (
    "energy",
    "pcie_tx_throughput",
    "pcie_rx_throughput",
    "remapped_rows",
    "retired_pages",
    "retired_pages_pending",
    "ecc_aggregate_uncorrected",
    "pcie_replay",
    "nvlink_errors",
)
# The call name of registering a device for Xid events (in ReadErrors of XidEventSource).
XID_EVENTS_CALL = "xid_events"
# The call name of GPM (in `activity`'s ReadErrors; the stand-in's `unsupported` takes it).
GPM_CALL = "gpm"

# NVML return codes (nvml.h) that the sampler treats differently; everything else is UNKNOWN.
_KIND_BY_NVML_CODE = {
    3: ReadErrorKind.NOT_SUPPORTED,
    4: ReadErrorKind.NO_PERMISSION,
    6: ReadErrorKind.NOT_FOUND,
    9: ReadErrorKind.DRIVER_NOT_LOADED,
    10: ReadErrorKind.TIMEOUT,
    15: ReadErrorKind.GPU_LOST,
}
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15


def read_error_kind(nvml_code: int) -> ReadErrorKind:
    return _KIND_BY_NVML_CODE.get(nvml_code, ReadErrorKind.UNKNOWN)


@dataclass(frozen=True, slots=True)
class DriverInfo:
    driver_version: str
    device_count: int


class GpuBackend(Protocol):
    def open(self) -> DriverInfo:
        """Initialise the library. Raises DriverNotLoadedError, LibraryNotFoundError or
        GpuError; may be called again after close() or after a failure."""
        ...

    def identify(self, index: int) -> GpuIdentity:
        """Static identity of one device. Raises GpuLostError when its handle is gone."""
        ...

    def sample(self, index: int, skip: frozenset[str]) -> GpuSample:
        """The lean tier. Calls named in `skip` (known unsupported) are not made."""
        ...

    def counters(self, index: int, skip: frozenset[str]) -> GpuCounters:
        """The expensive tier, on a slower cadence."""
        ...

    def activity(self, index: int) -> GpmActivity | GpmState | ReadError | None:
        """What the device did since the previous call for it. NOT_SUPPORTED for a GPU
        without GPM (asked once); None when there is no earlier sample to compare with (the
        first call, or the first after the device was lost) or the backend records none."""
        ...

    def xid_events(self) -> XidEventSource:
        """A new event source over the same library, for one thread to own."""
        ...

    def close(self) -> None: ...


class XidEventSource(Protocol):
    """Xid critical errors as the library reports them. Failures are data, as for sampling:
    only `open` raises (as GpuBackend.open does)."""

    def open(self) -> int:
        """Initialise (a reference of its own to the library); return the device count."""
        ...

    def register(self, index: int) -> ReadError | None:
        """Listen for the device's Xid errors; the ReadError when that cannot be done
        (NOT_SUPPORTED: it never can, so the caller does not ask again)."""
        ...

    def wait(self, timeout_seconds: float) -> XidEvent | ReadError | None:
        """The next Xid of a registered device; None when none came within the timeout.
        Called only once a device is registered."""
        ...

    def close(self) -> None: ...
