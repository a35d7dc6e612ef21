"""The tenancy criteria: a tenant held to what it was given. Work over its quota is blocked
(quota_enforced); it reads no other tenant's data and runs on no GPU its job was not given
(tenant_isolation). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from observer.detectors import node_leaks
from observer.domain import Expectation, Outcome, ProbeRun
from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    Status,
    found_by,
    result,
    run_examples,
)
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.notes import Note


def quota_enforced(runs: Sequence[ProbeRun]) -> CriterionResult:
    name = "quota_enforced"
    quota = [r for r in runs if r.expectation is Expectation.BLOCKED and r.outcome is not None]
    if not quota:
        return result(name, Status.NOT_OBSERVED, [Note("ev.no_probe_runs", {"probe": "quota"})])
    ran = [r for r in quota if r.outcome is Outcome.FAILED]
    unrecorded = [r for r in quota if r.outcome is Outcome.TIMED_OUT]
    passed = [r for r in quota if r.outcome is Outcome.PASSED]
    reasons = sorted({r.reason or "-" for r in passed})
    evidence = [
        Note(
            "ev.quota",
            {
                "runs": len(quota),
                "blocked": len(passed),
                "ran": len(ran),
                "held_without_reason": len(unrecorded),
                "reasons": reasons,
            },
        ),
        *run_examples(ran + unrecorded),
    ]
    if ran:
        return result(name, Status.FAIL, evidence, FailureClass.MUST_FIX, runs=ran)
    if unrecorded:
        return result(name, Status.FAIL, evidence, FailureClass.LIMITED_LAUNCH, runs=unrecorded)
    if not passed:
        return result(name, Status.NOT_OBSERVED, evidence)
    return result(name, Status.PASS, evidence)


def tenant_isolation(soak: PeriodData, context: ReportContext) -> CriterionResult:
    """The isolation probe's cross-tenant reads, and the node agents' processes on GPUs their
    pod or job was not given (a container that sees every GPU): either is a breach."""
    name = "tenant_isolation"
    runs = soak.runs
    tries = [r for r in runs if r.expectation is Expectation.DENIED and r.outcome is not None]
    crossed = found_by(soak.findings, [node_leaks.GPU_NOT_ASSIGNED])
    breaches = [r for r in tries if r.outcome is Outcome.FAILED]
    evidence = (
        [Note("ev.isolation", {"runs": len(tries), "breaches": len(breaches)})]
        if tries
        else [Note("ev.no_probe_runs", {"probe": "isolation"})]
    )
    evidence += run_examples(breaches)
    if soak.gpu.nodes or crossed:
        evidence.append(Note("ev.gpu_isolation", {"findings": len(crossed)}))
    if breaches or crossed:
        return result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.MUST_FIX,
            crossed,
            soak.period,
            context.calendar,
            breaches,
        )
    return result(name, Status.PASS if tries else Status.NOT_OBSERVED, evidence)
