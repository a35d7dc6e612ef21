"""The plan to verify again: for each criterion the soak did not pass, or passed only where
its layers could see, what to rerun, where (the subjects and windows its findings named, or
what its layers did not see; none: the whole platform), for how long, and
the criterion's rule that passes it; then a whole soak again. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from observer.detectors import (
    fairness,
    gpu_health,
    gpu_in_service,
    inference,
    node_leaks,
    quota_reclaim,
    unexplained_wait,
)
from observer.reports.compute import health
from observer.reports.compute.criteria.monitoring import ALERT_DUE_SECONDS
from observer.reports.compute.criteria.release import IDLE_DETECTORS, LEAK_DETECTORS
from observer.reports.compute.criteria.result import CriterionResult, Status, VerdictRules
from observer.reports.compute.data import ReportContext
from observer.reports.compute.notes import Note

MIN_REVERIFY_DAYS = 7  # a working week and a weekend: every window occurs
WATCH_SECONDS = 86400.0  # a day: each daily window occurs once while the rerun is watched

# Per criterion: the probes to rerun and the detectors whose findings fail it (none: its rule
# counts runs, not findings; see reverify.<criterion>).
RERUN: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "queue_explainable": (("short", "fairness"), (unexplained_wait.UNEXPLAINED_WAIT,)),
    "monitoring_linked": (("gpu-busy",), ("monitoring_lag",)),
    "quota_enforced": (("quota",), ()),
    # Each refused quota probe is followed by its quota-reclaim probe: not one of the plan's.
    "quota_released": (("quota",), (quota_reclaim.DETECTOR,)),
    "failure_evidence": (("fail-exit", "fail-command", "fail-image", "fail-oom"), ()),
    "no_unreleased_resources": (
        ("gpu-busy", "short"),
        tuple(sorted(LEAK_DETECTORS | IDLE_DETECTORS)),
    ),
    "no_log_loss": (("log-canary",), ("log_loss", "log_delivery_latency")),
    "monitoring_lag_bound": (("gpu-busy",), ("monitoring_lag", "prometheus_unreachable")),
    "no_persistent_unfairness": (("fairness",), (fairness.PERSISTENT_UNFAIRNESS,)),
    # A test alert through Alertmanager, then the findings' own alerts as they come.
    "alerting_chain": ((), ()),
    "interventions_audited": ((), ()),
    "tenant_isolation": (("isolation",), (node_leaks.GPU_NOT_ASSIGNED,)),
    "gpu_health": (
        ("gpu-busy",),
        tuple(
            sorted(
                {gpu_health.GPU_XID, gpu_in_service.UNHEALTHY_GPU_IN_SERVICE, *health.CONDITIONS}
            )
        ),
    ),
    # The service is controller.inference's, not a probe of the plan.
    "inference_available": ((), inference.DETECTORS),
}


def plan(
    criteria: Sequence[CriterionResult], context: ReportContext, rules: VerdictRules
) -> tuple[Note, ...]:
    """`reverify.<criterion>` steps: `subject` the parts the findings named (windows among
    them), `probes`, `detectors`, and the watch: `watch_seconds`, or for fairness the
    `occurrences` of each window its persistence rule needs; the quota's release, its bound
    `reclaim_seconds`."""
    steps = []
    for c in criteria:
        # A pass its node layers narrowed is verified again where they could not see.
        if c.status is Status.PASS and not c.not_observed:
            continue
        probes, detectors = RERUN[c.criterion]
        watch: dict[str, float | int] = (
            {"occurrences": rules.fairness_persistence_m}
            if c.criterion == "no_persistent_unfairness"
            else {"watch_seconds": WATCH_SECONDS}
        )
        params = {
            "criterion": c.criterion,
            "subject": (c.not_observed if c.status is Status.PASS else c.subjects).params(),
            "probes": list(probes),
            "detectors": list(detectors),
            **watch,
        }
        if c.criterion == "quota_released":
            params["reclaim_seconds"] = rules.quota_reclaim_seconds
        if c.criterion == "alerting_chain":
            params["due_seconds"] = ALERT_DUE_SECONDS
        steps.append(Note(f"reverify.{c.criterion}", params))
        unplanned = [p for p in probes if p not in context.planned_copies]
        if unplanned:
            steps.append(Note("reverify.add_to_plan", {"probes": unplanned}))
    windows = [w.name for w in context.calendar.windows]
    days = max(MIN_REVERIFY_DAYS, rules.fairness_persistence_m)
    steps.append(Note("reverify.rerun", {"days": days, "windows": windows}))
    return tuple(steps)
