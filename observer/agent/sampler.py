"""Two-tier sampling of every GPU on the node.

The lean tier (about 30 µs of NVML per GPU on an H200) runs every tick; the expensive tier
(energy 3 ms, PCIe throughput 21 ms per GPU) runs every `counters_interval_seconds`. A call
that answers NOT_SUPPORTED is remembered per GPU and not made again; a lost GPU is retried
every tick; a driver that is not loaded leaves the node in a clear blind state until NVML
initialises again. GPM's activity is read with the lean tier, once per tick of every GPU that
answered its sample: the figures cover the time since the previous tick."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from observer.clock import Clock
from observer.domain import (
    DriverState,
    DriverStatus,
    GpmActivity,
    GpmState,
    GpuCounters,
    GpuIdentity,
    GpuReading,
    GpuSample,
    ReadError,
    ReadErrorKind,
)
from observer.errors import DriverNotLoadedError, GpuError, GpuLostError, LibraryNotFoundError
from observer.gpu.backend import GpuBackend
from observer.logging_setup import get_logger
from observer.metrics import AgentMetrics

_R = TypeVar("_R", GpuSample, GpuCounters)
_log = get_logger("observer.agent.sampler")


@dataclass
class _GpuState:
    identity: GpuIdentity | None = None
    unsupported: set[str] = field(default_factory=set)
    skip: frozenset[str] = frozenset()
    counters: GpuCounters | None = None
    baseline_memory_bytes: int | None = None
    mig_uuids: tuple[str, ...] = ()  # its MIG instances' UUIDs at the last sample that read them


@dataclass(frozen=True, slots=True)
class NodeReading:
    driver: DriverStatus
    gpus: tuple[GpuReading, ...]


class Sampler:
    def __init__(
        self,
        backend: GpuBackend,
        clock: Clock,
        metrics: AgentMetrics,
        counters_interval_seconds: float,
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._metrics = metrics
        self._counters_interval = counters_interval_seconds
        self._driver = DriverStatus(DriverState.ERROR, message="not initialised yet")
        self._device_count = 0
        self._gpus: list[_GpuState] = []
        self._next_counters_at: float | None = None
        self._lean_timer = metrics.sample_duration_seconds.labels(tier="lean")
        self._counters_timer = metrics.sample_duration_seconds.labels(tier="counters")

    def tick(self) -> NodeReading:
        if self._driver.state is not DriverState.OK:
            self._open()
        if self._driver.state is not DriverState.OK:
            return NodeReading(self._driver, ())
        started = self._clock.monotonic()
        try:
            reads = [self._read(index, state) for index, state in enumerate(self._gpus)]
            if any(s is not None and _driver_gone(s) for s, _ in reads):
                raise DriverNotLoadedError("the driver was unloaded under the agent")
        except DriverNotLoadedError as exc:
            self._driver_gone(str(exc))
            return NodeReading(self._driver, ())
        lean_done = self._clock.monotonic()
        self._lean_timer.observe(lean_done - started)
        if self._next_counters_at is None or lean_done >= self._next_counters_at:
            for index, state in enumerate(self._gpus):
                if state.identity is not None:
                    state.counters = self._record(
                        index, state, self._backend.counters(index, state.skip)
                    )
            self._next_counters_at = lean_done + self._counters_interval
            self._counters_timer.observe(self._clock.monotonic() - lean_done)
        return NodeReading(
            self._driver,
            tuple(
                GpuReading(
                    index,
                    state.identity,
                    sample,
                    state.counters,
                    state.baseline_memory_bytes,
                    activity,
                )
                for index, (state, (sample, activity)) in enumerate(
                    zip(self._gpus, reads, strict=True)
                )
            ),
        )

    def uuids_by_index(self) -> dict[int, str]:
        """The NVML index -> UUID of every GPU identified so far (from any thread: the list
        and each identity are replaced whole)."""
        return {i: s.identity.uuid for i, s in enumerate(self._gpus) if s.identity is not None}

    def mig_parents(self) -> dict[str, str]:
        """MIG instance UUID -> its GPU's UUID, for every GPU in MIG mode at its last sample
        (from any thread, as uuids_by_index): the names the kubelet gives MIG devices."""
        return {
            mig: state.identity.uuid
            for state in self._gpus
            if state.identity is not None
            for mig in state.mig_uuids
        }

    def close(self) -> None:
        if self._driver.state is DriverState.OK:
            self._close_backend()
        self._driver = DriverStatus(DriverState.ERROR, message="closed")

    def _driver_gone(self, message: str) -> None:
        """The driver went away under a running agent: NVML must be initialised again."""
        self._close_backend()
        self._driver = DriverStatus(DriverState.NOT_LOADED, message=message)
        self._metrics.nvml_init_errors_total.labels(state=self._driver.state.value).inc()

    def _close_backend(self) -> None:
        try:
            self._backend.close()
        except GpuError as exc:  # a failed shutdown must not stop the next initialisation
            self._metrics.nvml_init_errors_total.labels(state="shutdown_failed").inc()
            _log.warning("NVML shutdown failed", error=str(exc))

    def _open(self) -> None:
        try:
            info = self._backend.open()
        except DriverNotLoadedError as exc:
            self._driver = DriverStatus(DriverState.NOT_LOADED, message=str(exc))
        except LibraryNotFoundError as exc:
            self._driver = DriverStatus(DriverState.LIBRARY_MISSING, message=str(exc))
        except GpuError as exc:
            self._driver = DriverStatus(DriverState.ERROR, message=str(exc))
        else:
            self._driver = DriverStatus(DriverState.OK, driver_version=info.driver_version)
            if info.device_count != self._device_count:
                self._gpus = [_GpuState() for _ in range(info.device_count)]
                self._device_count = info.device_count
            return
        self._metrics.nvml_init_errors_total.labels(state=self._driver.state.value).inc()

    def _read(
        self, index: int, state: _GpuState
    ) -> tuple[GpuSample | None, GpmActivity | GpmState | None]:
        sample = self._sample(index, state)
        if sample is None or sample.lost or _driver_gone(sample):
            return sample, None
        activity = self._backend.activity(index)
        if isinstance(activity, ReadError):
            self._count(index, activity)
            return sample, None
        return sample, activity

    def _sample(self, index: int, state: _GpuState) -> GpuSample | None:
        if state.identity is None:
            try:
                state.identity = self._backend.identify(index)
            except DriverNotLoadedError:
                raise
            except GpuError as exc:
                kind = (
                    ReadErrorKind.GPU_LOST
                    if isinstance(exc, GpuLostError)
                    else ReadErrorKind.UNKNOWN
                )
                self._count(index, ReadError("identify", kind, str(exc)))
                return None
        sample = self._record(index, state, self._backend.sample(index, state.skip))
        if sample.mig_instances is not None:
            state.mig_uuids = tuple(m.uuid for m in sample.mig_instances)
        elif not any(e.call == "mig" for e in sample.errors):
            state.mig_uuids = ()  # MIG mode off (or not supported)
        if sample.lost:
            state.identity = None  # re-open the handle next tick: a reset GPU may come back
        elif (
            sample.processes == ()
            and sample.memory_used_bytes is not None
            and (
                state.baseline_memory_bytes is None
                or sample.memory_used_bytes < state.baseline_memory_bytes
            )
        ):
            state.baseline_memory_bytes = sample.memory_used_bytes
        return sample

    def _record(self, index: int, state: _GpuState, reading: _R) -> _R:
        for error in reading.errors:
            self._count(index, error)
            if error.kind is ReadErrorKind.NOT_SUPPORTED:
                state.unsupported.add(error.call)
                state.skip = frozenset(state.unsupported)
        return reading

    def _count(self, index: int, error: ReadError) -> None:
        self._metrics.gpu_read_errors_total.labels(
            gpu=str(index), call=error.call, error=error.kind.value
        ).inc()


def _driver_gone(sample: GpuSample) -> bool:
    return any(e.kind is ReadErrorKind.DRIVER_NOT_LOADED for e in sample.errors)
