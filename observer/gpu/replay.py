"""Replays a recorded NVML trace (the format of tests/fixtures/nvml/h200-trace) as a GpuBackend.

Each call answers with the device's last recorded reading at or before the clock's position on
the trace's timeline; errors the real NVML gave are replayed as the same ReadErrors. Xid
events: a device registers when its recorded supported event types include Xid critical
errors; an optional `xid_events.jsonl` (`{"t": unix s, "gpu": index, "code": n}` a line) holds
the Xids to replay, each returned once when the timeline passes it (a trace without the file
recorded none). A sample record's optional `nvlink` holds the device's links as
`{"ok": [{"state": 1, "replay": n, "recovery": n, "crc_flit": n, "crc_data": n}, ...]}` (state
as nvmlDeviceGetNvLinkState answered, the counters as nvmlDeviceGetNvLinkErrorCounter did) or
the error NVML gave; a trace without it recorded no NVLink counters. The format records no
GPM: `activity` is always None.
"""

from __future__ import annotations

import bisect
import gzip
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from observer.clock import Clock, TraceTimeline
from observer.domain import (
    GpuCounters,
    GpuIdentity,
    GpuProcess,
    GpuSample,
    ReadError,
    XidEvent,
    XidSource,
)
from observer.errors import TraceError
from observer.gpu.backend import XID_EVENTS_CALL, DriverInfo, read_error_kind

_NOT_RECORDED = "not recorded in this trace"
_PCIE_REPLAY_FIELD_ID = 94  # NVML_FI_DEV_PCIE_REPLAY_COUNTER
_XID_EVENT_TYPE = 0x8  # nvmlEventTypeXidCriticalError
_NVLINK_ACTIVE = 1  # NVML_FEATURE_ENABLED

Answer = tuple[Any, ReadError | None]


@dataclass(frozen=True, slots=True)
class TraceRecord:
    t: float
    answers: dict[str, Answer]


@dataclass(frozen=True, slots=True)
class Trace:
    driver_version: str
    identities: tuple[GpuIdentity, ...]
    static_answers: tuple[dict[str, Answer], ...]
    records: tuple[tuple[TraceRecord, ...], ...]  # per device, sorted by t
    start: float
    end: float
    xids: tuple[tuple[float, int, int], ...] = ()  # (t, gpu index, code), sorted by t

    @classmethod
    def load(cls, trace_dir: Path) -> Trace:
        xid_file = trace_dir / "xid_events.jsonl"
        try:
            static = json.loads((trace_dir / "static.json").read_text())
            with gzip.open(trace_dir / "samples.jsonl.gz", "rt") as lines:
                raw = [json.loads(line) for line in lines if line.strip()]
            xids = (
                [json.loads(line) for line in xid_file.read_text().splitlines() if line.strip()]
                if xid_file.exists()
                else []
            )
        except (OSError, ValueError) as exc:
            raise TraceError(f"cannot read NVML trace in {trace_dir}: {exc}") from exc
        try:
            return cls._parse(static, raw, xids)
        except (KeyError, TypeError, IndexError) as exc:
            raise TraceError(f"malformed NVML trace in {trace_dir}: missing {exc}") from exc

    @classmethod
    def _parse(
        cls, static: dict[str, Any], raw: list[dict[str, Any]], xids: list[dict[str, Any]]
    ) -> Trace:
        identities = []
        static_answers = []
        for index, dev in enumerate(static["devices"]):
            memory, _ = _answer("memory", dev["nvmlDeviceGetMemoryInfo"])
            pci, _ = _answer("pci", dev["nvmlDeviceGetPciInfo_v3"])
            identities.append(
                GpuIdentity(
                    index=index,
                    uuid=dev["nvmlDeviceGetUUID"]["ok"],
                    name=dev["nvmlDeviceGetName"]["ok"],
                    memory_total_bytes=memory["total"] if memory else None,
                    pci_bus_id=pci["busId"] if pci else None,
                )
            )
            static_answers.append(
                {
                    "remapped_rows": _answer("remapped_rows", dev["nvmlDeviceGetRemappedRows"]),
                    "retired_pages": _retired_pages_answer(dev["nvmlDeviceGetRetiredPages_v2"]),
                    "retired_pages_pending": _not_recorded("retired_pages_pending"),
                    "ecc_aggregate_uncorrected": _not_recorded("ecc_aggregate_uncorrected"),
                    XID_EVENTS_CALL: _xid_support(dev.get("nvmlDeviceGetSupportedEventTypes")),
                }
            )
        per_device: list[list[TraceRecord]] = [[] for _ in identities]
        for rec in raw:
            answers = {
                "utilization": _answer("utilization", rec["util"]),
                "memory": _answer("memory", rec["mem"]),
                "processes": _answer("processes", rec["procs"]),
                "power": _answer("power", rec["power_mw"]),
                "temperature": _answer("temperature", rec["temp_c"]),
                "sm_clock": _answer("sm_clock", rec["sm_clock"]),
                "clock_event_reasons": _answer("clock_event_reasons", rec["throttle"]),
                "performance_state": _answer("performance_state", rec["pstate"]),
                "ecc_volatile_uncorrected": _answer("ecc_volatile_uncorrected", rec["ecc_dbe_vol"]),
                "energy": _answer("energy", rec["energy_mj"]),
                "pcie_tx_throughput": _answer("pcie_tx_throughput", rec["pcie_tx_kbs"]),
                "pcie_rx_throughput": _answer(
                    "pcie_rx_throughput", {"error": _NOT_RECORDED, "code": 3}
                ),
                "pcie_replay": _field_answer(rec.get("fields"), _PCIE_REPLAY_FIELD_ID),
                "nvlink_errors": _nvlink_answer(rec.get("nvlink")),
            }
            per_device[rec["gpu"]].append(TraceRecord(float(rec["t"]), answers))
        for records in per_device:
            records.sort(key=lambda r: r.t)
        times = [r.t for records in per_device for r in records]
        if not times:
            raise TraceError("the trace holds no samples")
        return cls(
            driver_version=static["driver"]["ok"],
            identities=tuple(identities),
            static_answers=tuple(static_answers),
            records=tuple(tuple(r) for r in per_device),
            start=min(times),
            end=max(times),
            xids=tuple(sorted((float(x["t"]), int(x["gpu"]), int(x["code"])) for x in xids)),
        )

    def tick_times(self) -> list[float]:
        """The instants at which the recorder sampled the first device: one agent tick each."""
        return [r.t for r in self.records[0]]


def _answer(call: str, recorded: dict[str, Any]) -> Answer:
    if "ok" in recorded:
        return recorded["ok"], None
    code = int(recorded.get("code", -1))
    return None, ReadError(call, read_error_kind(code), str(recorded.get("error", "")))


def _not_recorded(call: str) -> Answer:
    return _answer(call, {"error": _NOT_RECORDED, "code": 3})


def _xid_support(recorded: dict[str, Any] | None) -> Answer:
    if recorded is None:
        return _not_recorded(XID_EVENTS_CALL)
    types, error = _answer(XID_EVENTS_CALL, recorded)
    if error is None and not int(types) & _XID_EVENT_TYPE:
        return _answer(XID_EVENTS_CALL, {"error": "Xid events not supported", "code": 3})
    return types, error


def _retired_pages_answer(recorded: dict[str, Any]) -> Answer:
    # The recorder kept one cause's page list without saying which cause: only its errors
    # can be replayed faithfully.
    if "ok" in recorded:
        return _answer("retired_pages", {"error": "not recorded per cause", "code": 3})
    return _answer("retired_pages", recorded)


def _field_answer(fields: dict[str, Any] | None, field_id: int) -> Answer:
    if fields is None:
        return _answer("pcie_replay", {"error": _NOT_RECORDED, "code": 3})
    if "ok" not in fields:
        return _answer("pcie_replay", fields)
    for value in fields["ok"]:
        if value["fieldId"] == field_id:
            if value["nvmlReturn"] != 0:
                return _answer(
                    "pcie_replay", {"error": "field read failed", "code": value["nvmlReturn"]}
                )
            return int(value["value"]["ullVal"]), None
    return _answer("pcie_replay", {"error": _NOT_RECORDED, "code": 3})


def _nvlink_answer(recorded: dict[str, Any] | None) -> Answer:
    if recorded is None:
        return _not_recorded("nvlink_errors")
    links, error = _answer("nvlink_errors", recorded)
    if error is not None:
        return None, error
    active = [link for link in links if link["state"] == _NVLINK_ACTIVE]
    sums = (
        sum(link["replay"] for link in active),
        sum(link["recovery"] for link in active),
        sum(link["crc_flit"] + link["crc_data"] for link in active),
    )
    return sums, None


class _Reader:
    """Reads recorded answers, honouring the skip set and collecting errors."""

    def __init__(self, answers: dict[str, Answer], skip: frozenset[str]) -> None:
        self._answers = answers
        self._skip = skip
        self.errors: list[ReadError] = []

    def __call__(self, call: str) -> Any:
        if call in self._skip:
            return None
        got, error = self._answers[call]
        if error is not None:
            self.errors.append(error)
        return got


class ReplayGpuBackend:
    def __init__(self, trace: Trace, timeline: TraceTimeline, clock: Clock) -> None:
        self._trace = trace
        self._timeline = timeline
        self._clock = clock
        self._times = [[r.t for r in records] for records in trace.records]

    def open(self) -> DriverInfo:
        return DriverInfo(self._trace.driver_version, len(self._trace.identities))

    def identify(self, index: int) -> GpuIdentity:
        return self._trace.identities[index]

    def close(self) -> None:
        return None

    def activity(self, index: int) -> None:
        return None

    def xid_events(self) -> ReplayXidEvents:
        return ReplayXidEvents(self._trace, self._timeline, self._clock)

    def _record(self, index: int) -> TraceRecord:
        # datetime keeps microseconds: allow for the rounding of the recorded instants.
        at = self._timeline.to_trace(self._clock.now()) + 1e-6
        pos = bisect.bisect_right(self._times[index], at) - 1
        return self._trace.records[index][max(pos, 0)]

    def sample(self, index: int, skip: frozenset[str]) -> GpuSample:
        read = _Reader(self._record(index).answers, skip)
        util = read("utilization")
        memory = read("memory")
        procs = read("processes")
        power, temperature, sm_clock = read("power"), read("temperature"), read("sm_clock")
        reasons, pstate = read("clock_event_reasons"), read("performance_state")
        ecc = read("ecc_volatile_uncorrected")
        return GpuSample(
            at=self._clock.now(),
            index=index,
            utilization_gpu_percent=util["gpu"] if util else None,
            utilization_memory_percent=util["memory"] if util else None,
            memory_used_bytes=memory["used"] if memory else None,
            memory_total_bytes=memory["total"] if memory else None,
            processes=(
                tuple(GpuProcess(p["pid"], p["usedGpuMemory"]) for p in procs)
                if procs is not None
                else None
            ),
            power_milliwatts=power,
            temperature_celsius=temperature,
            sm_clock_mhz=sm_clock,
            clock_event_reasons=reasons,
            performance_state=pstate,
            ecc_volatile_uncorrected_errors=ecc,
            errors=tuple(read.errors),
        )

    def counters(self, index: int, skip: frozenset[str]) -> GpuCounters:
        read = _Reader({**self._record(index).answers, **self._trace.static_answers[index]}, skip)
        energy, tx, rx = read("energy"), read("pcie_tx_throughput"), read("pcie_rx_throughput")
        remapped, retired = read("remapped_rows"), read("retired_pages")
        retired_pending = read("retired_pages_pending")
        ecc_aggregate = read("ecc_aggregate_uncorrected")
        replay = read("pcie_replay")
        nvlink = read("nvlink_errors")
        return GpuCounters(
            at=self._clock.now(),
            index=index,
            energy_millijoules=energy,
            pcie_tx_kilobytes_per_second=tx,
            pcie_rx_kilobytes_per_second=rx,
            remapped_rows_correctable=remapped[0] if remapped else None,
            remapped_rows_uncorrectable=remapped[1] if remapped else None,
            remapped_rows_pending=bool(remapped[2]) if remapped else None,
            remapped_rows_failed=bool(remapped[3]) if remapped else None,
            retired_pages_single_bit=retired[0] if retired else None,
            retired_pages_double_bit=retired[1] if retired else None,
            retired_pages_pending=bool(retired_pending) if retired_pending is not None else None,
            ecc_aggregate_uncorrected_errors=ecc_aggregate,
            pcie_replay_errors=replay,
            nvlink_replay_errors=nvlink[0] if nvlink else None,
            nvlink_recovery_errors=nvlink[1] if nvlink else None,
            nvlink_crc_errors=nvlink[2] if nvlink else None,
            errors=tuple(read.errors),
        )


class ReplayXidEvents:
    """The trace's Xids, each returned once when the timeline has passed it (again on each
    loop of a looping timeline)."""

    def __init__(self, trace: Trace, timeline: TraceTimeline, clock: Clock) -> None:
        self._trace = trace
        self._timeline = timeline
        self._clock = clock
        self._registered: set[int] = set()
        self._done = -1.0  # trace time up to which Xids were returned

    def open(self) -> int:
        return len(self._trace.identities)

    def register(self, index: int) -> ReadError | None:
        _, error = self._trace.static_answers[index][XID_EVENTS_CALL]
        if error is None:
            self._registered.add(index)
        return error

    def wait(self, timeout_seconds: float) -> XidEvent | ReadError | None:
        event = self._due()
        if event is None:
            time.sleep(timeout_seconds)
            event = self._due()
        return event

    def close(self) -> None:
        self._registered.clear()

    def _due(self) -> XidEvent | None:
        now = self._timeline.to_trace(self._clock.now()) + 1e-6
        if now < self._done:  # the timeline looped: its Xids happen again
            self._done = -1.0
        for t, gpu, code in self._trace.xids:
            if self._done < t <= now and gpu in self._registered:
                self._done = t
                pci = self._trace.identities[gpu].pci_bus_id
                return XidEvent(self._clock.now(), code, XidSource.NVML, pci, gpu_index=gpu)
        return None
