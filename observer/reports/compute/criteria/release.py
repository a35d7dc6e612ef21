"""The release criteria: what a tenant is given back once done. A quota enforced is released
when the tenant's usage leaves room (quota_released); GPUs, memory and processes are freed
when their job ends (no_unreleased_resources). Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from observer.detectors import quota_reclaim
from observer.domain import Finding, JsonValue, compare_seconds
from observer.probes.catalog import QUOTA_PROBE, RECLAIM_PROBE
from observer.reports.compute.criteria.result import (
    EXAMPLES,
    CriterionResult,
    FailureClass,
    Status,
    VerdictRules,
    found_by,
    result,
)
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.events import OwnerStateFigures, owner_state_note
from observer.reports.compute.notes import Note

LEAK_DETECTORS = frozenset(
    {
        "unreleased_memory",
        "orphan_process",
        "vanished_process",
        "memory_without_process",
        "allocated_without_job",
        "kill_task_failed",
        "stuck_terminating",
        "probe_unreleased",
    }
)


IDLE_DETECTORS = frozenset({"allocated_idle"})


def quota_released(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    """The release half of the quota: a within-quota probe after each over-quota one starts
    once its tenant's own usage leaves room. One still held by the quota past the bound
    (quota_not_reclaimed) is a quota enforced but never given back: the tenant cannot use
    what it pays for. Apart from quota_enforced, since the two promises fail apart, are
    shown by different probes and verified again by different rules."""
    name = "quota_released"
    reclaims = [r for r in soak.runs if r.probe == RECLAIM_PROBE]
    held = found_by(soak.findings, [quota_reclaim.DETECTOR])
    if not reclaims and not held:
        return result(
            name, Status.NOT_OBSERVED, [Note("ev.no_probe_runs", {"probe": RECLAIM_PROBE})]
        )
    ended = {r.run_id: r.finished_at for r in soak.runs if r.probe == QUOTA_PROBE}
    waits = [
        seconds
        for r in reclaims
        if (end := ended.get(r.reclaims_run_id or "")) is not None
        and (seconds := quota_reclaim.reclaimed_seconds(r, end)) is not None
    ]
    evidence = [
        Note(
            "ev.quota_release",
            {
                "runs": len(reclaims),
                "started": len(waits),
                "not_reclaimed": len(held),
                "longest_seconds": max(waits, default=None),
                "limit_seconds": rules.quota_reclaim_seconds,
            },
        ),
        *(_not_reclaimed(f) for f in sorted(held, key=lambda f: f.opened_at)[:EXAMPLES]),
    ]
    if held:
        return result(
            name, Status.FAIL, evidence, FailureClass.MUST_FIX, held, soak.period, context.calendar
        )
    return result(name, Status.PASS if waits else Status.NOT_OBSERVED, evidence)


def _not_reclaimed(finding: Finding) -> Note:
    """A within-quota task still held, worded by its wait against the bound as both are
    written."""
    waited, limit = finding.evidence.get("waited_seconds"), finding.evidence.get("reclaim_seconds")
    params: dict[str, JsonValue] = {
        "tenant": finding.subject.get("tenant"),
        "run_id": finding.subject.get("run_id"),
        "waited_seconds": waited,
        "limit_seconds": limit,
        "reason_words": finding.evidence.get("pending_reason") or "-",
        "message_words": finding.evidence.get("pending_message") or "-",
    }
    if not isinstance(waited, int | float) or not isinstance(limit, int | float):
        return Note("ev.quota_not_reclaimed.unmeasured", params)
    return Note(f"ev.quota_not_reclaimed.{compare_seconds(waited, limit)}", params)


def no_unreleased_resources(
    soak: PeriodData, context: ReportContext, owners: OwnerStateFigures
) -> CriterionResult:
    name = "no_unreleased_resources"
    leaks = found_by(soak.findings, LEAK_DETECTORS)
    idle = found_by(soak.findings, IDLE_DETECTORS)
    evidence = [
        Note(
            "ev.unreleased",
            {
                "leaks": len(leaks),
                "idle": len(idle),
                "detector_counts": _detector_counts(leaks + idle),
            },
        )
    ]
    if owners.known is not None:
        # Memory held after its job ended shows only on nodes that knew the job had ended.
        evidence.append(owner_state_note("ev", owners))
    if leaks:
        return result(
            name, Status.FAIL, evidence, FailureClass.MUST_FIX, leaks, soak.period, context.calendar
        )
    if idle:
        return result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.LATER_OPTIMISATION,
            idle,
            soak.period,
            context.calendar,
        )
    if not soak.gpu.nodes:
        # The scheduler alone cannot see memory held after a job ended.
        evidence.append(Note("ev.no_gpu_samples"))
        return result(name, Status.NOT_OBSERVED, evidence)
    return result(name, Status.PASS, evidence)


def _detector_counts(findings: Iterable[Finding]) -> dict[str, JsonValue]:
    """How many findings each detector opened, by detector."""
    return dict(sorted(Counter(f.detector for f in findings).items()))
