"""The layers of the platform each criterion needs to see, and which of them the soak did not
observe: a layer not set up, or blind longer than the rules allow. Pure.

A criterion whose layer went unobserved can still fail on what was seen, but never pass:
node-level leaks (memory held after the job ended) are invisible to the scheduler, so the
scheduler's side alone cannot show there were none; nor can a node that did not know whether
its GPU processes' owners still ran (the owner state: the pseudo-layer `owners`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from observer.reports.compute.criteria.result import CriterionResult, Status
from observer.reports.compute.events import BlindFigures, OwnerStateFigures
from observer.reports.compute.notes import Note

# By blind source (events.BLIND_SOURCES): the node agents' view is theirs and NVML's.
_SCHEDULER = ("scheduler",)
_NODES = ("scheduler", "agents", "nvml")
_ACCOUNTING = ("scheduler", "accounting")
NEEDS: Mapping[str, tuple[str, ...]] = {
    "queue_explainable": _SCHEDULER,
    "monitoring_linked": _NODES,
    "quota_enforced": _SCHEDULER,
    "quota_released": _SCHEDULER,
    # Every tenant's failed jobs by cause, from the platform's accounting.
    "failure_evidence": _ACCOUNTING,
    "no_unreleased_resources": (*_NODES, "owners"),
    "no_log_loss": ("scheduler", "logs"),
    "monitoring_lag_bound": ("prometheus",),
    "no_persistent_unfairness": _SCHEDULER,
    # The quota changes among the interventions come from the accounting.
    "interventions_audited": _ACCOUNTING,
    "tenant_isolation": _SCHEDULER,
    # Xid errors reach the agent through NVML's events or the kernel log, not its samples.
    "gpu_health": (*_NODES, "xid"),
    # The service's replicas as the platform shows them; its requests go to them directly.
    "inference_available": _SCHEDULER,
}


def observed(
    criteria: Sequence[CriterionResult],
    blind: BlindFigures,
    owners: OwnerStateFigures,
    soak_seconds: float,
    max_share: float,
) -> tuple[CriterionResult, ...]:
    """Each criterion with its unobserved layers in its evidence; a failure seen stays one, a
    pass with a layer unobserved is not observed."""
    judged = []
    for result in criteria:
        notes = unobserved(result.criterion, blind, owners, soak_seconds, max_share)
        status = Status.NOT_OBSERVED if notes and result.status is Status.PASS else result.status
        judged.append(replace(result, status=status, evidence=result.evidence + notes))
    return tuple(judged)


def unobserved(
    criterion: str,
    blind: BlindFigures,
    owners: OwnerStateFigures,
    soak_seconds: float,
    max_share: float,
) -> tuple[Note, ...]:
    """Why each layer `criterion` needs went unobserved; empty: every one was observed."""
    notes = []
    for layer in NEEDS[criterion]:
        if layer == "owners":
            # Some nodes knowing is observed on those (the criterion's evidence counts them);
            # no node sampled is the agents' layer's to say.
            if owners.known == 0:
                notes.append(Note("ev.owner_state_not_observed", {"nodes": owners.nodes}))
            continue
        if layer in blind.not_set_up:
            notes.append(Note("ev.layer_not_set_up", {"layer": layer}))
            continue
        share = blind.by_source.get(layer, 0.0) / soak_seconds if soak_seconds else 1.0
        if share > max_share:
            notes.append(
                Note("ev.layer_blind", {"layer": layer, "share": share, "limit_share": max_share})
            )
    return tuple(notes)
