"""One delivery's attempts: try, wait the policy's next backoff step after a failure that may
pass later, try again; then the outcome as a DeliveryResult."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from observer.clock import Clock
from observer.delivery.base import DeliveryResult, Form, RetryPolicy
from observer.delivery.scrub import Scrubber

_DELIVERED: dict[Form, str] = {
    "full": "delivered the whole report",
    "summary": "delivered the summary and link: the whole report exceeds the size limit",
    "attachment": "delivered the summary with the report attached: the report is too big to "
    "show inline",
}


@dataclass(frozen=True)
class Attempt:
    ok: bool
    retry: bool
    """A failure that may pass on a later attempt."""
    detail: str
    form: Form
    wait_seconds: float = 0.0
    """The platform's own Retry-After, if it gave one."""


def with_retries(policy: RetryPolicy, attempt: Callable[[], Attempt]) -> tuple[Attempt, int]:
    steps = iter(policy.backoff_seconds)
    longest = max(policy.backoff_seconds, default=0.0)
    attempts = 0
    while True:
        attempts += 1
        outcome = attempt()
        if outcome.ok or not outcome.retry:
            return outcome, attempts
        step = next(steps, None)
        if step is None:
            return replace(
                outcome, detail=f"{outcome.detail} (gave up after {attempts} attempts)"
            ), attempts
        # A platform's Retry-After is honoured up to the longest step, so the schedule stays
        # finite whatever the platform asks.
        if policy.clock.sleep(max(step, min(outcome.wait_seconds, longest)), policy.stop):
            return replace(outcome, detail=f"{outcome.detail} (stopped before retrying)"), attempts


def delivery_result(
    name: str, outcome: Attempt, attempts: int, clock: Clock, scrub: Scrubber
) -> DeliveryResult:
    if outcome.ok:
        return DeliveryResult(
            name, True, attempts, _DELIVERED[outcome.form], clock.now(), outcome.form
        )
    return DeliveryResult(name, False, attempts, scrub(outcome.detail), None, outcome.form)
