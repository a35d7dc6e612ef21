"""A probe that found no usable GPU is a finding only where the scheduler gave it GPUs: then
the node claims GPUs it cannot run work on."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from observer.detectors.gpu_unusable import evaluate
from observer.domain import Expectation, FindingKind, Outcome, ProbeRun, RunState, Severity

ENDED = datetime(2026, 11, 30, 9, 5, tzinfo=UTC)
RUN = ProbeRun(
    run_id="r1",
    probe="gpu-busy",
    tenant="research",
    queue="gpu",
    window="always",
    expectation=Expectation.SUCCEED,
    gpus=2,
    nodes=2,
    state=RunState.DONE,
    job_id="41",
    finished_at=ENDED,
    outcome=Outcome.NO_GPU,
    exit_code=69,
    reason="NonZeroExitCode",
    node_names=("gpu-1", "gpu-2"),
)


def test_a_run_given_gpus_that_found_none_is_a_critical_event_per_node() -> None:
    findings = evaluate(RUN)

    assert [f.subject for f in findings] == [
        {"node": "gpu-1", "run_id": "r1"},
        {"node": "gpu-2", "run_id": "r1"},
    ]
    for finding in findings:
        assert (finding.kind, finding.severity) == (FindingKind.EVENT, Severity.CRITICAL)
        assert finding.opened_at == finding.closed_at == ENDED
        assert finding.evidence["exit_code"] == 69 and finding.evidence["job_id"] == "41"


def test_without_gpus_allocated_no_gpu_says_nothing_about_the_platform() -> None:
    assert evaluate(replace(RUN, gpus=0)) == []


def test_other_outcomes_raise_nothing() -> None:
    for outcome in (Outcome.PASSED, Outcome.FAILED, Outcome.CANCELLED, None):
        assert evaluate(replace(RUN, outcome=outcome)) == []
