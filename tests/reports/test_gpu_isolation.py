"""Tenant isolation in the verdict counts both ways a tenant can reach what is not its own:
the isolation probe's cross-tenant reads, and a process the node agents saw on a GPU its pod
or job was not given (gpu_not_assigned, from the kubelet's or slurmd's assignments)."""

from __future__ import annotations

from datetime import timedelta

from observer.domain import Expectation, Finding, Outcome, ProbeRun, Severity
from observer.reports.compute.criteria.result import CriterionResult, FailureClass, Status
from observer.reports.compute.data import Period, PeriodData
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import Verdict, VerdictInputs, build_verdict
from observer.reports.render.verdict import render_verdict
from tests.reports.builders import DAY_START, RULES, at, context, finding, queue, run, sampled

WEEK = Period(DAY_START, DAY_START + timedelta(days=7))
# The scheduler read every 10 minutes all week: its layer was observed.
SNAPSHOTS = [queue(DAY_START + timedelta(minutes=10 * i), "research") for i in range(6 * 24 * 7)]
DENIED = run("isolation", expectation=Expectation.DENIED, outcome=Outcome.PASSED)


def _verdict(runs: tuple[ProbeRun, ...], *findings: Finding) -> Verdict:
    soak = PeriodData(
        WEEK, runs=runs, findings=findings, queue_samples=SNAPSHOTS, gpu=sampled("gpu-1", "gpu-2")
    )
    return build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES))


def _isolation(runs: tuple[ProbeRun, ...], *findings: Finding) -> CriterionResult:
    verdict = _verdict(runs, *findings)
    return next(c for c in verdict.criteria if c.criterion == "tenant_isolation")


def test_a_process_on_a_gpu_its_pod_was_not_given_fails_isolation_even_when_the_probe_passed():
    crossed = finding(
        "gpu_not_assigned",
        at(30),
        at(60),
        severity=Severity.CRITICAL,
        node="gpu-1",
        gpu_uuid="GPU-3",
        pid="4242",
    )

    criterion = _isolation((DENIED,), crossed)

    assert (criterion.status, criterion.failure_class) == (Status.FAIL, FailureClass.MUST_FIX)
    assert Note("ev.gpu_isolation", {"findings": 1}) in criterion.evidence
    assert [item.detector for item in criterion.findings] == ["gpu_not_assigned"]


def test_isolation_passes_on_refused_reads_and_no_gpu_crossing_on_sampled_nodes():
    criterion = _isolation((DENIED,))

    assert criterion.status is Status.PASS
    assert Note("ev.gpu_isolation", {"findings": 0}) in criterion.evidence


def test_a_gpu_crossing_is_a_breach_even_when_the_isolation_probe_never_ran():
    crossed = finding("gpu_not_assigned", at(30), None, node="gpu-1", gpu_uuid="GPU-0")

    criterion = _isolation((), crossed)

    assert criterion.status is Status.FAIL
    assert [n.key for n in criterion.evidence] == ["ev.no_probe_runs", "ev.gpu_isolation"]


def test_without_the_probe_or_a_crossing_isolation_is_not_observed():
    assert _isolation(()).status is Status.NOT_OBSERVED


def test_the_verdict_states_the_gpu_crossings_in_both_languages():
    crossed = finding("gpu_not_assigned", at(30), at(40), node="gpu-1", gpu_uuid="GPU-3")
    verdict = _verdict((DENIED,), crossed)

    english = render_verdict(verdict, "en").markdown
    chinese = render_verdict(verdict, "zh-CN").markdown

    assert "1 times a process ran on a GPU its pod or job was not given" in english
    assert "进程在未分配给其 Pod 或作业的 GPU 上运行 1 次" in chinese
