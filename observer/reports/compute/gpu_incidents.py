"""Which GPU findings share a root cause. One failure reaches the observer as several findings:
Xid 79, the GPU it leaves lost and the node the scheduler keeps in service on it; an
uncorrected ECC error and the row remap it needs. LEADS_TO says which symptom leads to which;
two findings are one incident when one leads to the other, they are on the same GPU (a node's
finding, or an Xid tied to no GPU, on any of the node's GPUs) and they overlap in time, or
when the controller's finding names the fault it was raised for. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from observer.detectors import gpu_unusable
from observer.detectors.gpu_health import (
    ECC_UNCORRECTED,
    GPU_XID,
    RETIRED_PAGES_PENDING,
    ROW_REMAP_FAILED,
    ROW_REMAP_PENDING,
)
from observer.detectors.gpu_in_service import GPU_LOST, UNHEALTHY_GPU_IN_SERVICE
from observer.domain import JsonValue
from observer.gpu.xid import XidClass

# An Xid is a symptom by what NVIDIA's catalogue says of it (carried in its evidence).
FATAL_XID = "gpu_xid:fatal"
MEMORY_XID = "gpu_xid:memory"

_REPAIRS = frozenset({ROW_REMAP_PENDING, ROW_REMAP_FAILED, RETIRED_PAGES_PENDING})
_REACTIONS = frozenset({UNHEALTHY_GPU_IN_SERVICE, gpu_unusable.DETECTOR})  # of the node

# A symptom, and the symptoms it leads to.
LEADS_TO: Mapping[str, frozenset[str]] = {
    # A GPU unfit for new work stays so until it is reset: the Xids that follow are its.
    FATAL_XID: frozenset(
        {FATAL_XID, MEMORY_XID, GPU_LOST, ECC_UNCORRECTED, *_REPAIRS, *_REACTIONS}
    ),
    MEMORY_XID: frozenset({ECC_UNCORRECTED, *_REPAIRS}),
    ECC_UNCORRECTED: frozenset({MEMORY_XID, *_REPAIRS}),
    ROW_REMAP_PENDING: frozenset({ROW_REMAP_FAILED}),
    GPU_LOST: _REACTIONS,
    ROW_REMAP_FAILED: _REACTIONS,
}
_LINKED = frozenset(LEADS_TO) | frozenset().union(*LEADS_TO.values())
# An event has no length: what it leads to is reported this soon after it (the agent's tick,
# the controller's look).
OVERLAP_SLACK = timedelta(minutes=10)


class Seen(Protocol):
    """A finding as a report holds it (domain.Finding, events.FindingItem)."""

    @property
    def detector(self) -> str: ...
    @property
    def subject(self) -> Mapping[str, str]: ...
    @property
    def evidence(self) -> Mapping[str, JsonValue]: ...
    @property
    def opened_at(self) -> datetime: ...
    @property
    def closed_at(self) -> datetime | None: ...


def symptom(finding: Seen) -> str:
    """What a finding is a symptom of: its detector, an Xid by its catalogue entry."""
    if finding.detector == GPU_XID:
        if finding.evidence.get("fatal") is True:
            return FATAL_XID
        if finding.evidence.get("xid_class") == XidClass.MEMORY.value:
            return MEMORY_XID
    return finding.detector


def gpu_of(finding: Seen) -> str | None:
    """The GPU a finding is on: its index, else its UUID; None for the node's own findings and
    an Xid the agent could not tie to a GPU."""
    index = finding.evidence.get("gpu_index", finding.subject.get("gpu"))
    if index is not None:
        return str(index)
    uuid = finding.evidence.get("gpu_uuid") or finding.subject.get("gpu_uuid")
    return str(uuid) if uuid else None


def groups(findings: Sequence[Seen]) -> list[list[int]]:
    """The findings (by index) partitioned into incidents, each in time order, in the order
    of their first finding."""
    parent = list(range(len(findings)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_node: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        if symptom(f) in _LINKED:
            by_node.setdefault(f.subject.get("node", ""), []).append(i)
    for ids in by_node.values():
        for n, a in enumerate(ids):
            for b in ids[n + 1 :]:
                if _linked(findings[a], findings[b]):
                    parent[root(b)] = root(a)
    members: dict[int, list[int]] = {}
    for i in sorted(range(len(findings)), key=lambda i: (findings[i].opened_at, i)):
        members.setdefault(root(i), []).append(i)
    return list(members.values())


def _linked(a: Seen, b: Seen) -> bool:
    kinds = symptom(a), symptom(b)
    if kinds[1] not in LEADS_TO.get(kinds[0], ()) and kinds[0] not in LEADS_TO.get(kinds[1], ()):
        return False
    gpus = gpu_of(a), gpu_of(b)
    if None not in gpus and gpus[0] != gpus[1]:
        return False
    return _names(a, b) or _names(b, a) or _overlap(a, b)


def _overlap(a: Seen, b: Seen) -> bool:
    def end(f: Seen) -> datetime:
        return (
            datetime.max.replace(tzinfo=f.opened_at.tzinfo) if f.closed_at is None else f.closed_at
        )

    return a.opened_at - OVERLAP_SLACK <= end(b) and b.opened_at - OVERLAP_SLACK <= end(a)


def _names(judged: Seen, fault: Seen) -> bool:
    """Whether the controller's finding was raised for this fault (gpu_in_service.evaluate)."""
    named = judged.evidence.get("fault")
    if not isinstance(named, Mapping) or not isinstance(at := named.get("at"), str):
        return False
    return named.get("detector") == fault.detector and datetime.fromisoformat(at) == fault.opened_at
