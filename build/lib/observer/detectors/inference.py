"""The inference service's two conditions, from one look at it: unavailable (once started, no
ready replica answered, or more of the look's requests failed than allowed) and a scale-out
that stalls (its replicas not all ready after the bound, most often waiting for GPUs). Pure:
the condition tracker holds them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from observer.domain import Severity, Symptom
from observer.settings.inference import InferenceSettings

UNAVAILABLE = "inference_unavailable"
SCALE_OUT_STALLED = "inference_scale_out_stalled"
DETECTORS = (UNAVAILABLE, SCALE_OUT_STALLED)


@dataclass(frozen=True, slots=True)
class ServiceLook:
    """What one look saw. `started`: its first replicas were ready once (before, it is
    starting, not unavailable); `scale_out_since`: a scale-out to `scale_out_to` replicas
    under way since then; `pending_reason`: the scheduler's words for a replica waiting."""

    service: str
    tenant: str
    at: datetime
    started: bool
    ready_replicas: int
    requests: int
    errors: int
    scale_out_since: datetime | None = None
    scale_out_to: int = 0
    pending_reason: str | None = None


def symptoms(look: ServiceLook, rules: InferenceSettings) -> list[Symptom]:
    subject = {"service": look.service, "tenant": look.tenant}
    found = []
    if look.started:
        answered = look.requests - look.errors
        error_rate = look.errors / look.requests if look.requests else 1.0
        if answered == 0 or error_rate > rules.max_error_rate:
            found.append(
                Symptom(
                    detector=UNAVAILABLE,
                    subject=subject,
                    severity=Severity.CRITICAL,
                    summary=f"inference service {look.tenant}/{look.service}: "
                    f"{look.ready_replicas} ready replica(s), {look.errors} of {look.requests} "
                    "requests failed",
                    rule=f"no replica answered, or more than {rules.max_error_rate:.0%} of "
                    f"requests failed, for {rules.unavailable_max_seconds:g} s",
                    evidence={
                        "ready_replicas": look.ready_replicas,
                        "requests": look.requests,
                        "errors": look.errors,
                    },
                    hold_seconds=rules.unavailable_max_seconds,
                )
            )
    if look.scale_out_since is not None:
        found.append(
            Symptom(
                detector=SCALE_OUT_STALLED,
                subject=subject,
                severity=Severity.WARNING,
                summary=f"inference service {look.tenant}/{look.service}: scale-out to "
                f"{look.scale_out_to} replicas has {look.ready_replicas} ready",
                rule="a scale-out's replicas not all ready within "
                f"{rules.scale_out_max_wait_seconds:g} s",
                evidence={
                    "scale_out_to": look.scale_out_to,
                    "ready_replicas": look.ready_replicas,
                    "pending_reason": look.pending_reason,
                    "scale_out_since": look.scale_out_since.isoformat(),
                },
                hold_seconds=rules.scale_out_max_wait_seconds,
                since=look.scale_out_since,
            )
        )
    return found
