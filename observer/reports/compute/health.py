"""The GPUs' and nodes' health in a period, as the agents saw it, and the platform's reaction:
each GPU with a fault (its Xids, the conditions its agent kept, the hours it was throttled),
the incidents (one root cause on one GPU, its symptoms under it: gpu_incidents), the Xid
codes seen, per node with a fatal fault whether and when the scheduler took it out
of service and the jobs it placed there meanwhile, and the probes' attempts the platform
ended on a node and queued again. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from observer.detectors import gpu_health, gpu_in_service
from observer.detectors.scheduler_terms import in_service
from observer.domain import Finding, JsonValue, SchedulerNode
from observer.records import StoredNodeChange
from observer.reports.compute import gpu_incidents
from observer.reports.compute.data import Period, PeriodData
from observer.reports.compute.events import NODE_NAMES
from observer.reports.compute.notes import Note, named

# The agents' GPU conditions, in the order the section lists them: a new condition detector is
# one more entry here, with its words in the catalog (`health.cond.<detector>`); the verdict
# counts those short of a fatal fault or throttling as GPU errors (criteria.service.GPU_ERRORS).
CONDITIONS = (
    gpu_health.ECC_UNCORRECTED,
    gpu_health.ROW_REMAP_PENDING,
    gpu_health.ROW_REMAP_FAILED,
    gpu_health.RETIRED_PAGES_PENDING,
    gpu_health.PCIE_REPLAY_RATE,
    gpu_health.NVLINK_ERRORS,
    gpu_health.CLOCK_SLOWDOWN,
    gpu_in_service.GPU_LOST,
)


@dataclass(frozen=True, slots=True)
class XidCount:
    """One Xid code raised in the period, as NVIDIA's catalogue classes it (observer/gpu/xid.py,
    carried in the agent's evidence)."""

    code: int
    meaning: str | None
    xid_class: str | None
    fatal: bool
    count: int
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GpuCondition:
    """One condition detector's findings on one GPU: how many, how long they were open within
    the period, whether one was open at its end; `measured`, what their evidence measured:
    the uncorrected ECC count `before` the first rise and `after` the last (the counter that
    rose most), the highest PCIe `replays_per_minute`."""

    findings: int
    seconds: float
    open_at_end: bool
    measured: Mapping[str, JsonValue]


@dataclass(frozen=True, slots=True)
class GpuHealthRow:
    """A GPU with a fault in the period. `gpu`: its index on the node, else its UUID, else its
    PCI bus id; `xids`: Xid code -> times raised; `conditions`: by detector (CONDITIONS)."""

    node: str
    gpu: str
    gpu_uuid: str | None
    xids: Mapping[str, int]
    conditions: Mapping[str, GpuCondition]
    throttled_gpu_hours: float


@dataclass(frozen=True, slots=True)
class IncidentSymptom:
    """One finding of an incident: `xid`, its code for an Xid; `closed_at` None: still open."""

    detector: str
    xid: int | None
    opened_at: datetime
    closed_at: datetime | None


@dataclass(frozen=True, slots=True)
class GpuIncident:
    """One root cause on one GPU and the findings it showed as, in time order (the first is
    the cause as the observer saw it). `gpu`: as GpuHealthRow's, None when no finding named
    it; `fatal`: a symptom left the GPU unfit for new work (is_fatal)."""

    node: str
    gpu: str | None
    opened_at: datetime
    fatal: bool
    symptoms: tuple[IncidentSymptom, ...]


@dataclass(frozen=True, slots=True)
class PlacedJob:
    job_id: str
    tenant: str | None
    run_id: str | None
    started_at: datetime | None


@dataclass(frozen=True, slots=True)
class Reaction:
    """A node with a fatal GPU fault (a fatal Xid, a lost GPU, a failed row remap), and what the
    platform did. `fault_at`: its first in the period, or the one the controller judged it by;
    `fault`: the detector, `xid` its code for an Xid; `out_of_service_after_seconds`: until the
    scheduler was seen to drain, down or cordon the node (None: not in the period);
    `kept_in_service_since`: when the controller found it still in service past the grace
    (unhealthy_gpu_in_service; None: never); `jobs_placed`: started there after the fault."""

    node: str
    fault_at: datetime
    fault: str
    xid: int | None
    out_of_service_after_seconds: float | None
    kept_in_service_since: datetime | None
    jobs_placed: tuple[PlacedJob, ...]


@dataclass(frozen=True, slots=True)
class EndedAttempt:
    """An attempt of a probe run that the platform ended on its nodes and queued again (a
    node failure, a preemption), in the platform's words; the run may have passed later."""

    nodes: tuple[str, ...]
    ended_at: datetime
    state: str
    reason: str | None
    probe: str
    run_id: str


@dataclass(frozen=True, slots=True)
class GpuHealthFigures:
    """`observed`: the agents' GPU samples exist for the period; `nodes_not_sampled`: GPU nodes
    the scheduler knew that no agent sampled, whose health is not known."""

    observed: bool
    nodes_sampled: int
    nodes_not_sampled: tuple[str, ...]
    gpus: tuple[GpuHealthRow, ...]
    xids: tuple[XidCount, ...]
    throttled_gpu_hours: float
    reactions: tuple[Reaction, ...]
    ended_attempts: tuple[EndedAttempt, ...] = ()
    incidents: tuple[GpuIncident, ...] = ()

    @property
    def faulty(self) -> bool:
        return bool(self.gpus or self.reactions or self.ended_attempts)


def gpu_health_figures(data: PeriodData) -> GpuHealthFigures:
    period = data.period
    xids = [
        f
        for f in data.findings
        if f.detector == gpu_health.GPU_XID and period.start <= f.opened_at < period.end
    ]
    conditions = [f for f in data.findings if f.detector in CONDITIONS]
    kept = [f for f in data.findings if f.detector == gpu_in_service.UNHEALTHY_GPU_IN_SERVICE]
    rows = _rows(xids, conditions, period)
    known = {n.name for n in data.nodes_at_start if n.gpus_total > 0} | {
        c.node.name for c in data.node_changes if c.node.gpus_total > 0
    }
    return GpuHealthFigures(
        observed=data.gpu.overall.samples > 0,
        nodes_sampled=len(data.gpu.nodes),
        nodes_not_sampled=tuple(sorted(known - data.gpu.nodes)),
        gpus=rows,
        xids=_xid_counts(xids),
        throttled_gpu_hours=sum(r.throttled_gpu_hours for r in rows),
        reactions=_reactions(data, xids + conditions),
        ended_attempts=_ended_attempts(data),
        incidents=incidents([*xids, *conditions, *kept]),
    )


def _ended_attempts(data: PeriodData) -> tuple[EndedAttempt, ...]:
    period = data.period
    ended = [
        EndedAttempt(a.nodes, a.ended_at, a.state, a.reason, run.probe, run.run_id)
        for run in data.runs
        for a in run.attempts
        if a.ended_at is not None and period.start <= a.ended_at < period.end
    ]
    return tuple(sorted(ended, key=lambda e: (e.ended_at, e.run_id)))


def health_note(h: GpuHealthFigures) -> Note | None:
    """The sentence over the section: healthy only where the agents saw the GPUs, naming the
    nodes they did not; None when there are faults to list."""
    missing = named(h.nodes_not_sampled, NODE_NAMES)
    if not h.observed:
        return Note("note.health_not_observed")
    if h.faulty:
        return Note("note.health_not_sampled", {"nodes": missing}) if missing else None
    if missing:
        return Note("note.health_healthy_but", {"sampled": h.nodes_sampled, "nodes": missing})
    return Note("note.health_healthy", {"sampled": h.nodes_sampled})


def is_fatal(finding: Finding) -> bool:
    """A fault that leaves the GPU unfit for new work: an Xid NVIDIA's catalogue calls fatal,
    a lost GPU, a failed row remap."""
    if finding.detector == gpu_health.GPU_XID:
        return finding.evidence.get("fatal") is True
    return finding.detector in gpu_in_service.FATAL_CONDITIONS


# --- incidents -------------------------------------------------------------------------


def incidents(findings: Sequence[Finding]) -> tuple[GpuIncident, ...]:
    """The GPU health findings (Xids, CONDITIONS, unhealthy_gpu_in_service) grouped into
    incidents by their root cause, in time order."""
    found = []
    for ids in gpu_incidents.groups(findings):
        members = [findings[i] for i in ids]
        gpus = [g for f in members if (g := gpu_incidents.gpu_of(f)) is not None]
        found.append(
            GpuIncident(
                node=members[0].subject.get("node", ""),
                gpu=gpus[0] if gpus else members[0].subject.get("pci_bus_id"),
                opened_at=members[0].opened_at,
                fatal=any(is_fatal(f) for f in members),
                symptoms=tuple(
                    IncidentSymptom(
                        f.detector,
                        _code(f) if f.detector == gpu_health.GPU_XID else None,
                        f.opened_at,
                        f.closed_at,
                    )
                    for f in members
                ),
            )
        )
    return tuple(found)


# --- per GPU ---------------------------------------------------------------------------


def _gpu_key(finding: Finding) -> tuple[str, str]:
    """The node and the GPU's label: every GPU finding carries the GPU's index in its evidence,
    an Xid the agent could not tie to a GPU only its PCI bus id."""
    e, s = finding.evidence, finding.subject
    index = e.get("gpu_index", s.get("gpu"))
    label = index if index is not None else e.get("gpu_uuid") or s.get("gpu_uuid")
    return s.get("node", ""), str(label if label is not None else s.get("pci_bus_id", "?"))


def _rows(
    xids: Sequence[Finding], conditions: Sequence[Finding], period: Period
) -> tuple[GpuHealthRow, ...]:
    by_gpu: dict[tuple[str, str], list[Finding]] = {}
    for f in [*xids, *conditions]:
        by_gpu.setdefault(_gpu_key(f), []).append(f)
    rows = []
    for (node, gpu), found in sorted(by_gpu.items()):
        codes: dict[int, int] = {}
        for f in found:
            if f.detector == gpu_health.GPU_XID:
                code = _code(f)
                codes[code] = codes.get(code, 0) + 1
        held = {
            d: _condition(d, [f for f in found if f.detector == d], period)
            for d in CONDITIONS
            if any(f.detector == d for f in found)
        }
        slowdown = held.get(gpu_health.CLOCK_SLOWDOWN)
        uuids = sorted(
            {u for f in found if isinstance(u := f.evidence.get("gpu_uuid"), str)}
            | {f.subject["gpu_uuid"] for f in found if "gpu_uuid" in f.subject}
        )
        rows.append(
            GpuHealthRow(
                node=node,
                gpu=gpu,
                gpu_uuid=uuids[0] if uuids else None,
                xids={str(c): codes[c] for c in sorted(codes)},
                conditions=held,
                throttled_gpu_hours=slowdown.seconds / 3600 if slowdown else 0.0,
            )
        )
    return tuple(rows)


def _code(finding: Finding) -> int:
    code = finding.evidence.get("xid")
    return code if isinstance(code, int) else int(finding.subject.get("xid", "0"))


# The conditions whose evidence carries a rate, and its key: the day shows the highest.
_RATES = {
    gpu_health.PCIE_REPLAY_RATE: "replays_per_minute",
    gpu_health.NVLINK_ERRORS: "replay_and_crc_errors_per_minute",
}


def _condition(detector: str, found: Sequence[Finding], period: Period) -> GpuCondition:
    measured: dict[str, JsonValue] = {}
    if detector == gpu_health.ECC_UNCORRECTED:
        measured = _ecc_rise(found)
    elif detector in _RATES:
        key = _RATES[detector]
        rates = [r for f in found if isinstance(r := f.evidence.get(key), int | float)]
        measured = {key: max(rates)} if rates else {}
    return GpuCondition(
        findings=len(found),
        seconds=sum(period.clip(f.opened_at, f.closed_at) for f in found),
        open_at_end=any(f.closed_at is None or f.closed_at >= period.end for f in found),
        measured=measured,
    )


def _ecc_rise(found: Iterable[Finding]) -> dict[str, JsonValue]:
    spans: dict[str, tuple[int, int]] = {}
    for f in found:
        counters = f.evidence.get("counters")
        for name, rise in (counters if isinstance(counters, Mapping) else {}).items():
            before, after = rise.get("before"), rise.get("after")
            if not isinstance(before, int) or not isinstance(after, int):
                continue
            lo, hi = spans.get(name, (before, after))
            spans[name] = (min(lo, before), max(hi, after))
    if not spans:
        return {}
    before, after = max(spans.values(), key=lambda span: span[1] - span[0])
    return {"before": before, "after": after}


# --- Xid codes -------------------------------------------------------------------------


def _xid_counts(xids: Sequence[Finding]) -> tuple[XidCount, ...]:
    by_code: dict[int, list[Finding]] = {}
    for f in xids:
        by_code.setdefault(_code(f), []).append(f)
    counts = []
    for code, found in by_code.items():
        e = found[0].evidence
        meaning, xid_class = e.get("meaning"), e.get("xid_class")
        counts.append(
            XidCount(
                code=code,
                meaning=meaning if isinstance(meaning, str) else None,
                xid_class=xid_class if isinstance(xid_class, str) else None,
                fatal=any(is_fatal(f) for f in found),
                count=len(found),
                nodes=tuple(sorted({f.subject.get("node", "") for f in found})),
            )
        )
    return tuple(sorted(counts, key=lambda c: (not c.fatal, -c.count, c.code)))


# --- the platform's reaction -----------------------------------------------------------


def _reactions(data: PeriodData, faults: Sequence[Finding]) -> tuple[Reaction, ...]:
    first: dict[str, tuple[datetime, str, int | None]] = {}

    def seen(node: str, fault: tuple[datetime, str, int | None]) -> None:
        if node not in first or fault[0] < first[node][0]:
            first[node] = fault

    for f in faults:
        if is_fatal(f):
            xid = _code(f) if f.detector == gpu_health.GPU_XID else None
            seen(f.subject.get("node", ""), (f.opened_at, f.detector, xid))
    kept: dict[str, list[Finding]] = {}
    for f in sorted(data.findings, key=lambda f: f.opened_at):
        if f.detector == gpu_in_service.UNHEALTHY_GPU_IN_SERVICE:
            node = f.subject.get("node", "")
            kept.setdefault(node, []).append(f)
            if (judged := _judged_fault(f)) is not None:
                seen(node, judged)
    # One pass over the node log, which for a week of a large fleet is a million changes.
    changes: dict[str, list[StoredNodeChange]] = {node: [] for node in first}
    for change in data.node_changes:
        if change.node.name in changes:
            changes[change.node.name].append(change)
    at_start = {n.name: n for n in data.nodes_at_start if n.name in first}
    return tuple(
        Reaction(
            node=node,
            fault_at=at,
            fault=detector,
            xid=xid,
            out_of_service_after_seconds=_out_of_service_after(
                at_start.get(node), changes[node], at
            ),
            kept_in_service_since=kept[node][0].opened_at if node in kept else None,
            jobs_placed=_placed(kept.get(node, ())),
        )
        for node, (at, detector, xid) in sorted(first.items())
    )


def _judged_fault(kept: Finding) -> tuple[datetime, str, int | None] | None:
    """The fault an unhealthy_gpu_in_service finding was raised for (gpu_in_service.evaluate)."""
    fault = kept.evidence.get("fault")
    if not isinstance(fault, Mapping) or not isinstance(fault.get("at"), str):
        return None
    subject = fault.get("subject")
    xid = subject.get("xid") if isinstance(subject, Mapping) else None
    detector = str(fault.get("detector", gpu_health.GPU_XID))
    return datetime.fromisoformat(fault["at"]), detector, int(xid) if xid else None


def _out_of_service_after(
    state: SchedulerNode | None, changes: Sequence[StoredNodeChange], fault_at: datetime
) -> float | None:
    """Seconds from the fault until the scheduler was first seen with the node out of service
    (0: it already was); `state`: the node at the period's start, `changes`: its log."""
    for change in changes:
        if change.at > fault_at:
            if state is not None and not in_service(state):
                return 0.0
            if change.removed or not in_service(change.node):
                return (change.at - fault_at).total_seconds()
        state = None if change.removed else change.node
    if state is not None and not in_service(state):
        return 0.0
    return None


def _placed(kept: Sequence[Finding]) -> tuple[PlacedJob, ...]:
    jobs: dict[str, PlacedJob] = {}
    for f in kept:
        listed = f.evidence.get("jobs_placed_since")
        for job in listed if isinstance(listed, list) else ():
            started = job.get("started_at")
            placed = PlacedJob(
                str(job["job_id"]),
                job.get("tenant"),
                job.get("run_id"),
                datetime.fromisoformat(started) if isinstance(started, str) else None,
            )
            jobs.setdefault(placed.job_id, placed)
    return tuple(
        sorted(jobs.values(), key=lambda j: (j.started_at is None, j.started_at, j.job_id))
    )
