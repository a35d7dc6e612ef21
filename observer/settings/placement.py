"""Where the Kubernetes probe pods go and what they ask for (`controller.kubernetes`): their
tolerations, the pools they are placed on, and their CPU and memory. Each is checked as the
API server would check it, so a pod no namespace would admit is found at load, not as a
refused probe at 3 am."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from observer.settings.base import FieldProblems, Group

# A resource.Quantity as the API server parses it (apimachinery's resource/quantity.go): a
# decimal number, then a binary (Ki..Ei), decimal (m, k, M..E) or exponent suffix.
QUANTITY_PATTERN = r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[mkMGTPE]|[eE][+-]?[0-9]+)?$"


class TolerationSettings(Group):
    """One toleration of the probe pods, as in a pod spec (snake_case names)."""

    key: str | None = Field(None, description="Taint key; unset with operator Exists: any taint.")
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = Field(None, description="Taint value, with operator Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="Taint effect tolerated; unset: every effect."
    )
    toleration_seconds: int | None = Field(
        None, ge=0, description="With effect NoExecute: how long the pod stays once tainted."
    )

    @model_validator(mode="after")
    def _as_the_api_validates(self) -> TolerationSettings:
        # The API server refuses these; found at load, not as a failed probe at 3 am.
        problems = []
        if self.operator == "Exists" and self.value:
            problems.append(("value", "must be empty when operator is Exists"))
        if self.key is None and self.operator != "Exists":
            problems.append(("operator", "must be Exists when key is unset"))
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            problems.append(("toleration_seconds", "is allowed only with effect NoExecute"))
        if problems:
            raise FieldProblems(problems)
        return self


class PodResourcesSettings(Group):
    """CPU and memory of a probe pod's container, in the pod spec's quantities ("250m", "1",
    "128Mi"); each one unset keeps the size below it (the probe's program, then the probe's)."""

    cpu_request: str | None = Field(None, pattern=QUANTITY_PATTERN)
    cpu_limit: str | None = Field(None, pattern=QUANTITY_PATTERN)
    memory_request: str | None = Field(None, pattern=QUANTITY_PATTERN)
    memory_limit: str | None = Field(None, pattern=QUANTITY_PATTERN)


class PoolSettings(Group):
    """How a probe pod is placed on one pool of GPU nodes (the nodes whose `pool_label` has the
    pool's name): the pool's own taints tolerated, its runtime and priority."""

    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels besides the pool's, e.g. a zone."
    )
    tolerations: tuple[TolerationSettings, ...] = Field(
        (), description="Tolerations of the pool's taints, besides those of every probe pod."
    )
    runtime_class_name: str | None = Field(
        None, description="RuntimeClass of the pool's GPU containers, e.g. nvidia."
    )
    priority_class_name: str | None = Field(
        None, description="PriorityClass of probe pods whose tenant sets no `priority`."
    )
