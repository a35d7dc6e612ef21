"""Pod admission as the API server's built-in plugins do it, for the emulated API server, in
the order they run: LimitRanger defaults then checks (plugin/pkg/admission/limitranger), a
compute ResourceQuota requires what it covers (plugin/pkg/admission/resourcequota with
pkg/quota/v1/evaluator/core/pods.go), then a validating webhook may deny
(staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/errors). Each refusal is the
message the API server returns with 403 (400 for a webhook that sets no code), after
`pods "<name>" is forbidden: ` for the plugins.

    defaulted = limit_range_defaults(pod_spec, limit_range)
    refusal = limit_range_refusal(defaulted, limit_range) or compute_quota_refusal(...)
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

Spec = dict[str, Any]

_SUFFIXES: dict[str, Decimal | int] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def quantity(text: str) -> Decimal:
    """A resource.Quantity's value ("250m" is 0.25, "1Gi" is 2**30)."""
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    if m is None or m[2] not in _SUFFIXES:
        raise ValueError(f"not a quantity: {text!r}")
    return Decimal(m[1]) * Decimal(_SUFFIXES[m[2]])


@dataclass(frozen=True)
class LimitRange:
    """A LimitRange's item of type Container (core/v1 LimitRangeItem)."""

    name: str
    default: dict[str, str] = field(default_factory=dict)  # limits of a container without
    default_request: dict[str, str] = field(default_factory=dict)
    max: dict[str, str] = field(default_factory=dict)
    min: dict[str, str] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        item = {"type": "Container", "default": self.default, "max": self.max, "min": self.min}
        item["defaultRequest"] = self.default_request
        return {"metadata": {"name": self.name}, "spec": {"limits": [item]}}


def _containers(spec: Spec) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def limit_range_defaults(spec: Spec, limits: LimitRange | None) -> Spec:
    """The spec as LimitRanger mutates it: a container's missing limit takes `default`, its
    missing request `defaultRequest`, else its limit (the limit it now has)."""
    if limits is None:
        return spec
    spec = copy.deepcopy(spec)
    for container in _containers(spec):
        resources = container.setdefault("resources", {})
        limit = resources.setdefault("limits", {})
        request = resources.setdefault("requests", {})
        for resource, value in limits.default.items():
            limit.setdefault(resource, value)
        for resource, value in limits.default_request.items():
            request.setdefault(resource, value)
        for resource, value in limit.items():
            if resource in ("cpu", "memory"):
                request.setdefault(resource, value)
    return spec


def limit_range_refusal(spec: Spec, limits: LimitRange | None) -> str | None:
    """LimitRanger's words for a container outside min or max (minConstraint, maxConstraint),
    or None."""
    if limits is None:
        return None
    errors = []
    for container in _containers(spec):
        resources = container.get("resources") or {}
        request, limit = resources.get("requests") or {}, resources.get("limits") or {}
        for resource, low in sorted(limits.min.items()):
            if resource not in request:
                errors.append(
                    f"minimum {resource} usage per Container is {low}.  No request is specified"
                )
            elif quantity(request[resource]) < quantity(low):
                errors.append(
                    f"minimum {resource} usage per Container is {low}, but request is "
                    f"{request[resource]}"
                )
        for resource, high in sorted(limits.max.items()):
            if resource not in limit:
                errors.append(
                    f"maximum {resource} usage per Container is {high}.  No limit is specified"
                )
            elif quantity(limit[resource]) > quantity(high):
                errors.append(
                    f"maximum {resource} usage per Container is {high}, but limit is "
                    f"{limit[resource]}"
                )
    if not errors:
        return None
    # utilerrors.NewAggregate: one error as it is, several in brackets
    return errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"


# A quota on these requires every container to state them (pods.go's validationSet).
_REQUIRED = {
    "cpu": "requests.cpu",
    "requests.cpu": "requests.cpu",
    "limits.cpu": "limits.cpu",
    "memory": "requests.memory",
    "requests.memory": "requests.memory",
    "limits.memory": "limits.memory",
}


def compute_quota_refusal(spec: Spec, quota_name: str, hard: dict[str, str]) -> str | None:
    """The resource quota plugin's words for a pod missing what a quota covering cpu or memory
    requires ('failed quota: <name>: must specify <resource> for: <containers>; ...'), or
    None. Like the evaluator, `cpu` in a quota is requests.cpu."""
    required = {_REQUIRED[resource] for resource in hard if resource in _REQUIRED}
    missing: dict[str, set[str]] = {}
    for container in _containers(spec):
        resources = container.get("resources") or {}
        stated = {f"requests.{r}" for r in resources.get("requests") or {}}
        stated |= {f"limits.{r}" for r in resources.get("limits") or {}}
        for resource in required - stated:
            missing.setdefault(resource, set()).add(container.get("name", ""))
    if not missing:
        return None
    said = "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))
    return f"failed quota: {quota_name}: must specify {said}"


def webhook_refusal(webhook: str, message: str) -> str:
    """A webhook's denial as the API server words it (webhook/errors ToStatusErr)."""
    denied = f'admission webhook "{webhook}" denied the request'
    return f"{denied}: {message}" if message else f"{denied} without explanation"
