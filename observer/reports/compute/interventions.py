"""Manual interventions seen in the platform's own state, and their audit against the ones
people recorded. Pure.

Detected from the node change log: a node drained (Slurm) with a reason the platform does not
set by itself, a node resumed (Slurm never undrains by itself), a node cordoned or uncordoned
(Kubernetes' SchedulingDisabled), a node's taints changed other than by the platform's own
controllers. From probe runs: a run cancelled by anyone but the controller (scancel by an
admin, a Job or pod deleted). Quota changes are not derived here: the controller reads them
from the platform's own records and stores them detected. Only what the observer stores is
seen: pods of other tenants' jobs and node changes between two snapshots that undo each other
are not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from datetime import timedelta

from observer.domain import Outcome, ProbeRun, SchedulerNode
from observer.probes.outcome import CONTROLLER_SHUTDOWN
from observer.records import InterventionSource, StoredIntervention, StoredNodeChange

# Reasons slurmctld and slurmd set when they drain a node themselves (and common node health
# check wording); any other reason was typed by an operator.
_AUTOMATIC_DRAIN_REASONS = (
    "kill task failed",
    "not responding",
    "node unexpectedly rebooted",
    "batch job complete failure",
    "prolog error",
    "epilog error",
    "low realmemory",
    "low tmpdisk",
    "low socket",
    "gres/",
    "nhc",
    "duplicate jobid",
)
# Taints Kubernetes and its autoscalers put on nodes by themselves (unreachable, not ready,
# pressure, cordon's own mirror, scale-down).
_PLATFORM_TAINTS = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
)
_TAINT = re.compile(r"taint (\S+):(NoSchedule|NoExecute|PreferNoSchedule)")
_CORDONED = "SchedulingDisabled"


def detect(
    nodes_at_start: Sequence[SchedulerNode],
    changes: Sequence[StoredNodeChange],
    runs: Iterable[ProbeRun],
) -> list[StoredIntervention]:
    """Interventions seen in a period, in time order; `nodes_at_start` as they were at its
    start, `changes` the node log within it, `runs` those submitted in it."""
    found: list[StoredIntervention] = []
    previous = {node.name: node for node in nodes_at_start}
    for change in changes:
        before = previous.pop(change.node.name, None)
        if change.removed:
            continue
        previous[change.node.name] = change.node
        if before is not None:
            found += _node_interventions(before, change)
    found += [_cancelled(run) for run in runs if _cancelled_by_someone(run)]
    return sorted(found, key=lambda i: (i.at, sorted(i.subject.items())))


def _node_interventions(
    before: SchedulerNode, change: StoredNodeChange
) -> list[StoredIntervention]:
    after = change.node
    # Most changes of a busy cluster are allocations: no state or reason of theirs changed.
    if after.state == before.state and after.reason == before.reason:
        return []
    found = []

    def seen(action: str, reason: str, **detail: object) -> None:
        found.append(
            StoredIntervention(
                at=change.at,
                by="",
                reason=reason,
                subject={"node": after.name},
                source=InterventionSource.DETECTED,
                detail={
                    "action": action,
                    "state_before": before.state,
                    "state_after": after.state,
                    "reason_before": before.reason,
                    "reason_after": after.reason,
                    **detail,
                },
            )
        )

    if _drained(after) and not _drained(before) and not _automatic(after.reason):
        seen("drain", after.reason or "")
    elif _drained(before) and not _drained(after):
        seen("resume", before.reason or "")
    if _CORDONED in after.state and _CORDONED not in before.state:
        seen("cordon", after.reason or "")
    elif _CORDONED in before.state and _CORDONED not in after.state:
        seen("uncordon", before.reason or "")
    if after.reason != before.reason:
        taints_after, taints_before = _taints(after.reason), _taints(before.reason)
        added = sorted(taints_after - taints_before)
        removed = sorted(taints_before - taints_after)
        if added or removed:
            seen("taints_changed", "; ".join(added + removed), added=added, removed=removed)
    return found


def _drained(node: SchedulerNode) -> bool:
    return _draining(node.state)


# A fleet's nodes share a few states, seen again at every change of theirs.
@functools.lru_cache(maxsize=1024)
def _draining(state: str) -> bool:
    return state.rstrip("*").lower().startswith("drain")


def _automatic(reason: str | None) -> bool:
    text = (reason or "").strip().lower()
    return any(text.startswith(mark) for mark in _AUTOMATIC_DRAIN_REASONS)


# A fleet's nodes share a few reasons, seen again at every change of theirs.
@functools.lru_cache(maxsize=4096)
def _taints(reason: str | None) -> frozenset[str]:
    return frozenset(
        f"{key}:{effect}"
        for key, effect in _TAINT.findall(reason or "")
        if not key.startswith(_PLATFORM_TAINTS)
    )


def _cancelled_by_someone(run: ProbeRun) -> bool:
    return run.outcome is Outcome.CANCELLED and run.reason != CONTROLLER_SHUTDOWN


def _cancelled(run: ProbeRun) -> StoredIntervention:
    at = run.finished_at or run.started_at or run.submitted_at
    assert at is not None  # the controller stamps every run it submits
    return StoredIntervention(
        at=at,
        by="",
        reason=run.reason or "",
        subject={"run_id": run.run_id, "tenant": run.tenant},
        source=InterventionSource.DETECTED,
        detail={
            "action": "job_cancelled",
            "probe": run.probe,
            "job_id": run.job_id,
            "message": run.message,
        },
    )


def audit(
    detected: Sequence[StoredIntervention],
    recorded: Sequence[StoredIntervention],
    within_seconds: float,
) -> list[StoredIntervention | None]:
    """For each detected intervention, the recorded one that accounts for it, or None. A
    record accounts for a detected intervention that names the same subject (any key and
    value in common) within `within_seconds` of it; a resume or uncordon is accounted for by
    the record of the drain or cordon it ends, however long the maintenance took."""
    tolerance = timedelta(seconds=within_seconds)
    opened: dict[str, StoredIntervention | None] = {}  # node -> record of its drain/cordon
    found: list[StoredIntervention | None] = []
    for intervention in detected:
        record = next(
            (
                r
                for r in recorded
                if set(r.subject.items()) & set(intervention.subject.items())
                and abs(r.at - intervention.at) <= tolerance
            ),
            None,
        )
        action = intervention.detail.get("action")
        node = intervention.subject.get("node", "")
        if action in _ENDS and record is None:
            record = opened.pop(f"{node}|{_ENDS[str(action)]}", None)
        elif action in _ENDS.values():
            opened[f"{node}|{action}"] = record
        found.append(record)
    return found


_ENDS = {"resume": "drain", "uncordon": "cordon"}
