"""The verdict's layered scoring: each criterion in a layer (must, key, experience), and per
layer the criteria that passed, failed and went unobserved. The must layer is what the
decision rests on: a must criterion not observed leaves it open, and the launch scope is
where every must criterion passed (see compute/scope.py). Pure.

The default layers follow the acceptance guides. Must: the promises no tenant may do without,
isolation, quota, released GPUs, task records and failure evidence, explainable queues, logs,
healthy GPUs. Key: what running the platform needs, utilisation reporting (every GPU sampled,
every run attributed), scheduling policy (fairness), monitoring and its alerting chain.
Experience: the rest. `reports.verdict_criteria_layers` moves a criterion to another layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from observer.reports.compute.criteria.judge import CRITERIA
from observer.reports.compute.criteria.result import (
    CriterionResult,
    ScoreLayer,
    Status,
    VerdictRules,
)

DEFAULT_LAYERS: Mapping[str, ScoreLayer] = {
    "queue_explainable": ScoreLayer.MUST,
    "monitoring_linked": ScoreLayer.KEY,
    "quota_enforced": ScoreLayer.MUST,
    "quota_released": ScoreLayer.MUST,
    "failure_evidence": ScoreLayer.MUST,
    "no_unreleased_resources": ScoreLayer.MUST,
    "no_log_loss": ScoreLayer.MUST,
    "monitoring_lag_bound": ScoreLayer.KEY,
    "alerting_chain": ScoreLayer.KEY,
    "no_persistent_unfairness": ScoreLayer.KEY,
    "interventions_audited": ScoreLayer.EXPERIENCE,
    "tenant_isolation": ScoreLayer.MUST,
    "gpu_health": ScoreLayer.MUST,
    "inference_available": ScoreLayer.EXPERIENCE,
}


@dataclass(frozen=True, slots=True)
class LayerScore:
    """The criteria of one layer by status, each in the order the verdict lists them."""

    passed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    not_observed: tuple[str, ...] = ()


def layers_of(rules: VerdictRules) -> dict[str, ScoreLayer]:
    """Every criterion, in the order of CRITERIA, with its layer: the settings' where they
    name one, else the default."""
    return {c: rules.score_layers.get(c, DEFAULT_LAYERS[c]) for c in CRITERIA}


def must_criteria(rules: VerdictRules) -> tuple[str, ...]:
    return tuple(c for c, layer in layers_of(rules).items() if layer is ScoreLayer.MUST)


def score(
    criteria: Sequence[CriterionResult], layers: Mapping[str, ScoreLayer]
) -> dict[ScoreLayer, LayerScore]:
    """Every layer, in ScoreLayer's order, empty ones included: a reader sees that a layer
    holds nothing rather than wonders whether it was left out."""
    by_layer: dict[ScoreLayer, dict[Status, list[str]]] = {
        layer: {status: [] for status in Status} for layer in ScoreLayer
    }
    for c in criteria:
        by_layer[layers[c.criterion]][c.status].append(c.criterion)
    return {
        layer: LayerScore(
            tuple(named[Status.PASS]), tuple(named[Status.FAIL]), tuple(named[Status.NOT_OBSERVED])
        )
        for layer, named in by_layer.items()
    }
