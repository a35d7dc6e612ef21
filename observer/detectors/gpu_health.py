"""GPU health conditions from the counters the agent samples, one tick of one agent.

Rules (each a condition on one GPU, subject node + gpu_uuid):
- gpu_ecc_uncorrected: the uncorrected ECC count (volatile or aggregate) rose; open until
  `ecc_window_seconds` pass without another rise; critical;
- gpu_row_remap_pending: a row remap waits for a GPU reset (the memory is still faulty);
- gpu_row_remap_failed: a row could not be remapped (the GPU needs service); critical;
- gpu_retired_pages_pending: a page retirement waits for a reset (pre-Ampere GPUs);
- gpu_clock_slowdown: hardware slowdown, thermal or power-brake clock events while a process
  runs on the GPU, for `slowdown_hold_seconds`;
- gpu_pcie_replay_rate: PCIe replays per minute between the last two counter reads above
  `pcie_replay_max_per_minute`;
- gpu_nvlink_errors: between the last two counter reads an NVLink recovery error (critical),
  or NVLink replay and CRC errors per minute above `nvlink_errors_max_per_minute`;
- xid_source_unavailable (subject node): some GPU's Xid errors would reach no source, neither
  NVML's events nor the kernel log (the evidence says why each misses them); a node without
  it is not known to have had no Xid.
A counter that could not be read this tick neither opens nor closes its condition (`covers`).
The rules that compare readings over time keep what they need in `HealthHistory`, a value
the caller passes from one evaluation to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from observer.domain import (
    AttributedProcess,
    GpuCounters,
    GpuReading,
    Severity,
    Subject,
    Symptom,
    XidSourcesState,
)
from observer.settings.detectors import GpuHealthSettings

GPU_XID = "gpu_xid"  # the agent's Xid event finding (agent/xids.py)
ECC_UNCORRECTED = "gpu_ecc_uncorrected"
ROW_REMAP_PENDING = "gpu_row_remap_pending"
ROW_REMAP_FAILED = "gpu_row_remap_failed"
RETIRED_PAGES_PENDING = "gpu_retired_pages_pending"
CLOCK_SLOWDOWN = "gpu_clock_slowdown"
PCIE_REPLAY_RATE = "gpu_pcie_replay_rate"
NVLINK_ERRORS = "gpu_nvlink_errors"
XID_SOURCE_UNAVAILABLE = "xid_source_unavailable"
DETECTORS = frozenset(
    {
        XID_SOURCE_UNAVAILABLE,
        ECC_UNCORRECTED,
        ROW_REMAP_PENDING,
        ROW_REMAP_FAILED,
        RETIRED_PAGES_PENDING,
        CLOCK_SLOWDOWN,
        PCIE_REPLAY_RATE,
        NVLINK_ERRORS,
    }
)

# NVML clock event reasons (nvml.h nvmlClocksEventReason*) that mean the GPU was slowed by
# something other than the work's own demand or an administrator's setting.
SLOWDOWN_REASONS = {
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


@dataclass(frozen=True, slots=True)
class CountRise:
    """An uncorrected ECC count seen rising: the value before the first rise of this
    episode, the latest value, when it first and last rose."""

    before: int
    after: int
    first_at: datetime
    last_at: datetime


@dataclass(frozen=True, slots=True)
class GpuHistory:
    ecc_counts: Mapping[str, int] = field(default_factory=dict)  # counter -> last value
    ecc_rises: Mapping[str, CountRise] = field(default_factory=dict)
    replay_reading: tuple[datetime, int] | None = None  # the last counters read: at, count
    replay_per_minute: float | None = None  # between the last two counters reads
    replay_delta: tuple[int, int, datetime, datetime] | None = None  # before, after, from, to
    nvlink_reading: tuple[datetime, Mapping[str, int]] | None = None  # at, count by counter
    # The counts before and after, from, to: between the last two counters reads.
    nvlink_delta: tuple[Mapping[str, int], Mapping[str, int], datetime, datetime] | None = None


HealthHistory = Mapping[str, GpuHistory]  # by GPU uuid


@dataclass(frozen=True, slots=True)
class HealthView:
    node: str
    at: datetime
    gpus: Sequence[GpuReading]
    processes: Sequence[AttributedProcess]
    xid_sources: XidSourcesState | None = None  # None: not known yet, or no source asked


def evaluate(
    view: HealthView, history: HealthHistory, rules: GpuHealthSettings
) -> tuple[list[Symptom], HealthHistory]:
    """The symptoms of this tick and the history the next evaluation needs."""
    symptoms: list[Symptom] = list(_xid_sources(view))
    updated: dict[str, GpuHistory] = dict(history)
    for gpu in view.gpus:
        if gpu.identity is None:
            continue
        uuid = gpu.identity.uuid
        past = _advance(history.get(uuid, GpuHistory()), gpu, view.at, rules.ecc_window_seconds)
        updated[uuid] = past
        subject = {"node": view.node, "gpu_uuid": uuid}
        base = {"gpu_index": gpu.index, "gpu_uuid": uuid, "pci_bus_id": gpu.identity.pci_bus_id}
        symptoms += _ecc(view, gpu, past, subject, base, rules)
        symptoms += _memory_repair(view.node, gpu, subject, base)
        symptoms += _slowdown(view, gpu, subject, base, rules)
        symptoms += _replay(view.node, gpu, past, subject, base, rules)
        symptoms += _nvlink(view.node, gpu, past, subject, base, rules)
    return symptoms, updated


def covers(view: HealthView, detector: str, subject: Subject) -> bool:
    """Whether this tick read the counter a condition is about."""
    if detector == XID_SOURCE_UNAVAILABLE:
        return view.xid_sources is not None
    gpu = next(
        (g for g in view.gpus if g.identity and g.identity.uuid == subject.get("gpu_uuid")), None
    )
    if gpu is None:
        return False
    sample, counters = gpu.sample, gpu.counters
    if detector == ECC_UNCORRECTED:
        return bool(_ecc_counts(gpu))
    if detector == CLOCK_SLOWDOWN:
        return (
            sample is not None
            and sample.clock_event_reasons is not None
            and sample.processes is not None
        )
    read = _COUNTERS_READ.get(detector)
    return counters is not None and read is not None and read(counters)


def _xid_sources(view: HealthView) -> Iterator[Symptom]:
    sources = view.xid_sources
    if sources is None or not sources.blind:
        return
    yield Symptom(
        detector=XID_SOURCE_UNAVAILABLE,
        subject={"node": view.node},
        severity=Severity.WARNING,
        summary=f"Xid errors unobserved on {view.node}: NVML's events {sources.nvml}; "
        f"kernel log {sources.kernel_log}",
        rule="a GPU's Xid errors reach neither NVML's events nor the kernel log",
        evidence={"nvml": sources.nvml, "kernel_log": sources.kernel_log},
    )


# Whether the counters tier read what a condition of these detectors is about.
_COUNTERS_READ: Mapping[str, Callable[[GpuCounters], bool]] = {
    ROW_REMAP_PENDING: lambda c: c.remapped_rows_pending is not None,
    ROW_REMAP_FAILED: lambda c: c.remapped_rows_pending is not None,
    RETIRED_PAGES_PENDING: lambda c: c.retired_pages_pending is not None,
    PCIE_REPLAY_RATE: lambda c: c.pcie_replay_errors is not None,
    NVLINK_ERRORS: lambda c: _nvlink_counts(c) is not None,
}


def _ecc_counts(gpu: GpuReading) -> dict[str, int]:
    counts = {}
    if gpu.sample is not None and gpu.sample.ecc_volatile_uncorrected_errors is not None:
        counts["volatile"] = gpu.sample.ecc_volatile_uncorrected_errors
    if gpu.counters is not None and gpu.counters.ecc_aggregate_uncorrected_errors is not None:
        counts["aggregate"] = gpu.counters.ecc_aggregate_uncorrected_errors
    return counts


def _nvlink_counts(counters: GpuCounters) -> dict[str, int] | None:
    replay, recovery, crc = (
        counters.nvlink_replay_errors,
        counters.nvlink_recovery_errors,
        counters.nvlink_crc_errors,
    )
    if replay is None or recovery is None or crc is None:
        return None
    return {"replay": replay, "recovery": recovery, "crc": crc}


def _advance(
    past: GpuHistory, gpu: GpuReading, at: datetime, ecc_window_seconds: float
) -> GpuHistory:
    history = _advance_ecc(past, gpu, at, ecc_window_seconds)
    if gpu.counters is None:
        return history
    return _advance_nvlink(_advance_replay(history, gpu.counters), gpu.counters)


def _advance_ecc(
    past: GpuHistory, gpu: GpuReading, at: datetime, ecc_window_seconds: float
) -> GpuHistory:
    counts = _ecc_counts(gpu)
    if counts.items() <= past.ecc_counts.items():
        return past
    rises = dict(past.ecc_rises)
    for counter, value in counts.items():
        before = past.ecc_counts.get(counter)
        # The first reading is the baseline; a drop (the driver reloaded) a new one.
        if before is not None and value > before:
            rise = rises.get(counter)
            ongoing = rise is not None and (at - rise.last_at).total_seconds() < ecc_window_seconds
            rises[counter] = (
                replace(rise, after=value, last_at=at)
                if rise is not None and ongoing
                else CountRise(before, value, at, at)
            )
    return replace(past, ecc_counts={**past.ecc_counts, **counts}, ecc_rises=rises)


def _advance_replay(history: GpuHistory, counters: GpuCounters) -> GpuHistory:
    if counters.pcie_replay_errors is None:
        return history
    reading = (counters.at, counters.pcie_replay_errors)
    previous = history.replay_reading
    if previous == reading:  # the same counters read as last tick's
        return history
    if previous is None or previous[0] == reading[0]:
        return replace(history, replay_reading=reading)
    seconds = (reading[0] - previous[0]).total_seconds()
    replays = max(reading[1] - previous[1], 0)  # a reset counter is no replay
    return replace(
        history,
        replay_reading=reading,
        replay_per_minute=replays * 60 / seconds if seconds > 0 else None,
        replay_delta=(previous[1], reading[1], previous[0], reading[0]),
    )


def _advance_nvlink(history: GpuHistory, counters: GpuCounters) -> GpuHistory:
    counts = _nvlink_counts(counters)
    previous = history.nvlink_reading
    if counts is None or (previous is not None and previous[0] == counters.at):
        return history  # unread, or the same counters read as last tick's
    return replace(
        history,
        nvlink_reading=(counters.at, counts),
        nvlink_delta=None if previous is None else (previous[1], counts, previous[0], counters.at),
    )


def _ecc(
    view: HealthView,
    gpu: GpuReading,
    past: GpuHistory,
    subject: Subject,
    base: dict[str, object],
    rules: GpuHealthSettings,
) -> Iterator[Symptom]:
    # A rise stays a symptom for the window even while its counter cannot be read: it was
    # seen, and only the window's end (seen through a counter that answers) closes it.
    recent = {
        counter: rise
        for counter, rise in past.ecc_rises.items()
        if (view.at - rise.last_at).total_seconds() < rules.ecc_window_seconds
    }
    if not recent:
        return
    since = min(rise.first_at for rise in recent.values())
    added = max(rise.after - rise.before for rise in recent.values())
    yield Symptom(
        detector=ECC_UNCORRECTED,
        subject=subject,
        severity=Severity.CRITICAL,
        # No instant in the summary: a person reads it beside the finding's local times.
        summary=f"GPU {gpu.index} on {view.node}: {added} new uncorrected ECC error(s)",
        rule=f"the volatile or aggregate uncorrected ECC count rose, within the last "
        f"{rules.ecc_window_seconds:g} s",
        evidence={
            **base,
            "new_errors": added,
            "counters": {
                counter: {
                    "before": rise.before,
                    "after": rise.after,
                    "first_increase_at": rise.first_at.isoformat(),
                    "last_increase_at": rise.last_at.isoformat(),
                }
                for counter, rise in sorted(recent.items())
            },
        },
        since=since,
    )


def _remapped_rows(counters: GpuCounters) -> dict[str, object]:
    return {
        "remapped_rows_correctable": counters.remapped_rows_correctable,
        "remapped_rows_uncorrectable": counters.remapped_rows_uncorrectable,
        "counters_read_at": counters.at.isoformat(),
    }


def _retired_pages(counters: GpuCounters) -> dict[str, object]:
    return {
        "retired_pages_single_bit": counters.retired_pages_single_bit,
        "retired_pages_double_bit": counters.retired_pages_double_bit,
        "counters_read_at": counters.at.isoformat(),
    }


@dataclass(frozen=True, slots=True)
class _RepairStatus:
    """A memory repair NVML reports waiting or failed: the counters' flag that raises it, and
    what its symptom says (the summary after "GPU <index> on <node>")."""

    detector: str
    raised: Callable[[GpuCounters], bool | None]
    severity: Severity
    summary: str
    rule: str
    evidence: Callable[[GpuCounters], dict[str, object]]


_MEMORY_REPAIRS = (
    _RepairStatus(
        ROW_REMAP_PENDING,
        lambda c: c.remapped_rows_pending,
        Severity.WARNING,
        "has a row remap pending: it needs a reset before the faulty memory row is replaced",
        "NVML remapped rows: pending",
        _remapped_rows,
    ),
    _RepairStatus(
        ROW_REMAP_FAILED,
        lambda c: c.remapped_rows_failed,
        Severity.CRITICAL,
        "failed to remap a memory row: it needs service",
        "NVML remapped rows: failure",
        _remapped_rows,
    ),
    _RepairStatus(
        RETIRED_PAGES_PENDING,
        lambda c: c.retired_pages_pending,
        Severity.WARNING,
        "has a page retirement pending: it needs a reset",
        "NVML retired pages pending status: enabled",
        _retired_pages,
    ),
)


def _memory_repair(
    node: str, gpu: GpuReading, subject: Subject, base: dict[str, object]
) -> Iterator[Symptom]:
    counters = gpu.counters
    if counters is None:
        return
    for status in _MEMORY_REPAIRS:
        if status.raised(counters):
            yield Symptom(
                detector=status.detector,
                subject=subject,
                severity=status.severity,
                summary=f"GPU {gpu.index} on {node} {status.summary}",
                rule=status.rule,
                evidence={**base, **status.evidence(counters)},
            )


def _slowdown(
    view: HealthView,
    gpu: GpuReading,
    subject: Subject,
    base: dict[str, object],
    rules: GpuHealthSettings,
) -> Iterator[Symptom]:
    sample = gpu.sample
    if sample is None or not sample.processes or sample.clock_event_reasons is None:
        return
    reasons = [name for bit, name in SLOWDOWN_REASONS.items() if sample.clock_event_reasons & bit]
    if not reasons:
        return
    owners = sorted(
        {p.owner_state.name or p.owner.label for p in view.processes if p.gpu_index == gpu.index}
    )
    yield Symptom(
        detector=CLOCK_SLOWDOWN,
        subject=subject,
        severity=Severity.WARNING,
        summary=f"GPU {gpu.index} on {view.node} is slowed ({', '.join(reasons)}) while "
        f"{', '.join(owners) or 'a process'} runs on it",
        rule=f"hardware slowdown, thermal or power-brake clock events with a process on the "
        f"GPU, for {rules.slowdown_hold_seconds:g} s",
        evidence={
            **base,
            "reasons": reasons,
            "clock_event_reasons": sample.clock_event_reasons,
            "sm_clock_mhz": sample.sm_clock_mhz,
            "temperature_celsius": sample.temperature_celsius,
            "power_milliwatts": sample.power_milliwatts,
            "owners": owners,
            "pids": [p.pid for p in sample.processes],
        },
        hold_seconds=rules.slowdown_hold_seconds,
    )


def _replay(
    node: str,
    gpu: GpuReading,
    past: GpuHistory,
    subject: Subject,
    base: dict[str, object],
    rules: GpuHealthSettings,
) -> Iterator[Symptom]:
    rate, delta = past.replay_per_minute, past.replay_delta
    if rate is None or delta is None or rate <= rules.pcie_replay_max_per_minute:
        return
    before, after, start, end = delta
    yield Symptom(
        detector=PCIE_REPLAY_RATE,
        subject=subject,
        severity=Severity.WARNING,
        summary=f"GPU {gpu.index} on {node}: {rate:.1f} PCIe replays per minute",
        rule=f"PCIe replays per minute between two counter reads > "
        f"{rules.pcie_replay_max_per_minute:g}",
        evidence={
            **base,
            "replays_per_minute": round(rate, 3),
            "pcie_replay_errors_before": before,
            "pcie_replay_errors_after": after,
            "from": start.isoformat(),
            "to": end.isoformat(),
        },
    )


def _nvlink(
    node: str,
    gpu: GpuReading,
    past: GpuHistory,
    subject: Subject,
    base: dict[str, object],
    rules: GpuHealthSettings,
) -> Iterator[Symptom]:
    if past.nvlink_delta is None:
        return
    before, after, start, end = past.nvlink_delta
    seconds = (end - start).total_seconds()
    if seconds <= 0 or after == before:  # no error between the reads: the healthy case
        return
    # A count that fell (the driver reloaded, a link went down) is no error.
    added = {counter: max(after[counter] - before[counter], 0) for counter in after}
    per_minute = (added["replay"] + added["crc"]) * 60 / seconds
    recoveries = added["recovery"]
    fast = per_minute > rules.nvlink_errors_max_per_minute
    if not recoveries and not fast:
        return
    seen = [f"{recoveries} NVLink recovery error(s)"] if recoveries else []
    seen += [f"{per_minute:.1f} NVLink replay and CRC errors per minute"] if fast else []
    yield Symptom(
        detector=NVLINK_ERRORS,
        subject=subject,
        # A recovery retrains the link, pausing its traffic (the step before a link goes
        # down; DCGM's health check fails on the first); replays and CRC errors are retries
        # the link got through.
        severity=Severity.CRITICAL if recoveries else Severity.WARNING,
        summary=f"GPU {gpu.index} on {node}: {', '.join(seen)}",
        rule=f"an NVLink recovery error, or NVLink replay and CRC errors per minute between "
        f"two counter reads > {rules.nvlink_errors_max_per_minute:g}",
        evidence={
            **base,
            "replay_and_crc_errors_per_minute": round(per_minute, 3),
            "recovery_errors": recoveries,
            "replay_and_crc_errors_per_minute_max": rules.nvlink_errors_max_per_minute,
            "nvlink_errors": {
                counter: {"before": before[counter], "after": after[counter]} for counter in after
            },
            "from": start.isoformat(),
            "to": end.isoformat(),
        },
    )
