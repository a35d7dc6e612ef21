"""The layers of the platform each criterion needs to see, how much of the soak each of them
covered, and what a criterion could judge from that. Pure.

A layer's coverage is the share of the soak (of its node-time, for a node layer) it was set
up, reachable and fresh: from the configuration of the controller runs and the blind time
their failed reads left, never from the presence of failures. A node layer covers a node when
that node was blind for no more than the limit share of the soak; a node the scheduler lists
with GPUs whose agent never answered is not covered.

A criterion whose layer went unobserved can still fail on what was seen, but never pass:
node-level leaks (memory held after the job ended) are invisible to the scheduler, so the
scheduler's side alone cannot show there were none; nor can a node that did not know whether
its GPU processes' owners still ran (the owner state: the pseudo-layer `owners`). When a node
layer covered some nodes and not others, a pass holds on the covered ones only: the criterion
passes for that narrower scope, the nodes it could not judge named (`not_observed`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from observer.reports.compute.criteria.result import CriterionResult, Status, Subjects
from observer.reports.compute.events import (
    NODE_NAMES,
    NODE_SOURCES,
    BlindFigures,
    BlindPeriod,
    OwnerStateFigures,
    node_of,
    union_seconds,
)
from observer.reports.compute.notes import Note, named

OWNERS = "owners"
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
    "no_unreleased_resources": (*_NODES, OWNERS),
    "no_log_loss": ("scheduler", "logs"),
    "monitoring_lag_bound": ("prometheus",),
    "alerting_chain": ("alerts",),
    "no_persistent_unfairness": _SCHEDULER,
    # The quota changes among the interventions come from the accounting.
    "interventions_audited": _ACCOUNTING,
    "tenant_isolation": _SCHEDULER,
    # Xid errors reach the agent through NVML's events or the kernel log, not its samples.
    "gpu_health": (*_NODES, "xid"),
    # The service's replicas as the platform shows them; its requests go to them directly.
    "inference_available": _SCHEDULER,
}


# Every layer a criterion needs, in the order the verdict lists them.
LAYERS = tuple(dict.fromkeys(layer for needs in NEEDS.values() for layer in needs))


@dataclass(frozen=True, slots=True)
class NodeScope:
    """The nodes a node layer should have covered: those whose GPUs were `sampled`, and those
    the scheduler `listed` with GPUs."""

    sampled: frozenset[str]
    listed: frozenset[str]


@dataclass(frozen=True, slots=True)
class LayerCoverage:
    """`share`: of the soak's time (node-time for a node layer) the layer was set up and not
    blind; 0 when never set up. `nodes`: a node layer's scope (0 for a fleet layer);
    `not_covered`: those of its nodes blind for more than the limit share of the soak."""

    layer: str
    set_up: bool
    share: float
    nodes: int = 0
    not_covered: tuple[str, ...] = ()

    @property
    def covered(self) -> int:
        return self.nodes - len(self.not_covered)


def coverage(
    blind: BlindFigures,
    owners: OwnerStateFigures,
    nodes: NodeScope,
    soak_seconds: float,
    limit_share: float,
) -> dict[str, LayerCoverage]:
    """Every layer a criterion needs, by name, in the order of LAYERS."""

    def of(layer: str) -> LayerCoverage:
        if layer == OWNERS:
            return LayerCoverage(
                OWNERS,
                "agents" not in blind.not_set_up,
                owners.known_share or 0.0,
                owners.nodes,
                tuple(owners.not_known),
            )
        if layer in blind.not_set_up:
            return LayerCoverage(layer, False, 0.0)
        if layer in NODE_SOURCES:
            return _node_layer(layer, blind.periods, nodes, soak_seconds, limit_share)
        return _fleet_layer(layer, blind, soak_seconds)

    return {layer: of(layer) for layer in LAYERS}


def _fleet_layer(layer: str, blind: BlindFigures, seconds: float) -> LayerCoverage:
    share = 1 - blind.by_source.get(layer, 0.0) / seconds if seconds else 0.0
    return LayerCoverage(layer, True, max(share, 0.0))


def _node_layer(
    layer: str,
    periods: Sequence[BlindPeriod],
    nodes: NodeScope,
    seconds: float,
    limit_share: float,
) -> LayerCoverage:
    mine = [p for p in periods if p.source == layer]
    everywhere = [p for p in mine if node_of(p) is None]
    named = {n for p in mine if (n := node_of(p)) is not None}
    scope = sorted(nodes.sampled | nodes.listed | named)
    if not scope or not seconds:
        return LayerCoverage(layer, True, 0.0 if seconds else 1.0)
    blind = {
        # A node the scheduler gives GPUs whose agent was never read was never seen.
        node: 1.0
        if node in nodes.listed and node not in nodes.sampled
        else union_seconds([*everywhere, *(p for p in mine if node_of(p) == node)]) / seconds
        for node in scope
    }
    return LayerCoverage(
        layer,
        True,
        1 - sum(blind.values()) / len(scope),
        len(scope),
        tuple(node for node, share in blind.items() if share > limit_share),
    )


def observed(
    criteria: Sequence[CriterionResult],
    layers: Mapping[str, LayerCoverage],
    limit_share: float,
) -> tuple[CriterionResult, ...]:
    """Each criterion with what its layers could not see in its evidence: a failure seen stays
    one; a pass with a layer unobserved is not observed; a pass with a node layer that covered
    only some nodes holds on those, the others in `not_observed`."""
    judged = []
    for result in criteria:
        unseen, partly, narrowed = _judged(result.criterion, layers, limit_share)
        status = result.status
        if status is Status.PASS and unseen:
            status = Status.NOT_OBSERVED
        judged.append(
            replace(
                result,
                status=status,
                evidence=result.evidence + unseen + partly,
                not_observed=Subjects(nodes=narrowed)
                if status is Status.PASS and narrowed
                else result.not_observed,
            )
        )
    return tuple(judged)


def _judged(
    criterion: str, layers: Mapping[str, LayerCoverage], limit_share: float
) -> tuple[tuple[Note, ...], tuple[Note, ...], tuple[str, ...]]:
    """Why each layer `criterion` needs went unobserved (empty: every one was observed); the
    coverage of each node layer that covered part of its nodes (the owner state says its own:
    events.owner_state_note); and the nodes those did not cover."""
    notes: list[Note] = []
    partly: list[Note] = []
    nodes: set[str] = set()
    for name in NEEDS[criterion]:
        layer = layers[name]
        blind = Note(
            "ev.layer_blind", {"layer": name, "share": 1 - layer.share, "limit_share": limit_share}
        )
        if not layer.set_up:
            notes.append(Note("ev.layer_not_set_up", {"layer": name}))
        elif name == OWNERS:
            # No node sampled is the agents' layer's to say.
            if layer.nodes and not layer.covered:
                notes.append(Note("ev.owner_state_not_observed", {"nodes": layer.nodes}))
            elif layer.covered:
                nodes.update(layer.not_covered)
        elif layer.nodes and not layer.covered:
            notes.append(blind)
        elif layer.nodes and layer.not_covered:
            nodes.update(layer.not_covered)
            partly.append(
                Note(
                    "ev.layer_covered_nodes",
                    {
                        "layer": name,
                        "covered": layer.covered,
                        "nodes": layer.nodes,
                        "share": layer.share,
                        "not_covered": named(list(layer.not_covered), NODE_NAMES),
                    },
                )
            )
        elif not layer.nodes and 1 - layer.share > limit_share:
            notes.append(blind)
    return tuple(notes), tuple(partly), tuple(sorted(nodes))
