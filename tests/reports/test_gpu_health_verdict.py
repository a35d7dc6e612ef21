"""The verdict's GPU and node health criterion: the platform kept scheduling on a failed GPU,
or fatal faults recur on a node, must be fixed; a fatal fault or GPU error limits the launch
to the healthy nodes; throttling alone is a later optimisation; no GPU samples, or no Xid source
seeing the GPUs' Xids, not observed."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest

from observer.domain import Finding, FindingKind, Severity
from observer.reports.compute.criteria.result import CriterionResult, FailureClass, Status
from observer.reports.compute.data import PeriodData
from observer.reports.compute.verdict import VerdictInputs, build_verdict
from observer.reports.render.i18n import Language, Words
from observer.reports.render.verdict import render_verdict
from tests.reports.builders import DAY, RULES, at, context, finding, queue, sampled
from tests.reports.test_gpu_health_daily import condition, ecc_rise, kept_in_service, xid

SNAPSHOTS = [queue(DAY.start + timedelta(minutes=10 * i), "research") for i in range(6 * 24)]


def fatal_xid(hour: int, node: str = "node-3") -> Finding:
    return Finding(
        detector="gpu_xid",
        kind=FindingKind.EVENT,
        subject={"node": node, "pci_bus_id": "0000:3b:00.0", "xid": "79"},
        severity=Severity.CRITICAL,
        summary="Xid 79",
        opened_at=at(hour),
        closed_at=at(hour),
        evidence={"xid": 79, "fatal": True, "xid_class": "bus"},
    )


def criterion(*findings: Finding, sampled_nodes: bool = True) -> CriterionResult:
    soak = PeriodData(
        DAY,
        findings=findings,
        queue_samples=SNAPSHOTS,
        gpu=sampled("node-1", "node-3") if sampled_nodes else sampled(),
    )
    verdict = build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES))
    return next(c for c in verdict.criteria if c.criterion == "gpu_health")


def judged(result: CriterionResult) -> tuple[Status, FailureClass | None]:
    return result.status, result.failure_class


def test_healthy_gpus_pass_and_unsampled_ones_are_not_observed():
    assert judged(criterion()) == (Status.PASS, None)
    assert criterion(sampled_nodes=False).status is Status.NOT_OBSERVED


def test_xid_detection_down_all_soak_leaves_healthy_looking_gpus_not_observed():
    blind = [
        finding("xid_source_unavailable", DAY.start, None, node=n) for n in ("node-1", "node-3")
    ]

    result = criterion(*blind)

    assert result.status is Status.NOT_OBSERVED
    [note] = [n for n in result.evidence if n.key == "ev.layer_blind"]
    assert (note.params["layer"], note.params["share"]) == ("xid", 1.0)


def test_one_fatal_fault_limits_the_launch_and_names_the_node():
    result = criterion(fatal_xid(3))

    assert judged(result) == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    [note] = [n for n in result.evidence if n.key == "ev.gpu_health"]
    assert (note.params["fatal"], note.params["nodes"]) == (1, ["node-3"])


def test_fatal_faults_recurring_on_a_node_or_a_node_kept_in_service_must_be_fixed():
    assert judged(criterion(fatal_xid(3), fatal_xid(9))) == (Status.FAIL, FailureClass.MUST_FIX)
    kept = finding("unhealthy_gpu_in_service", at(4), None, node="node-3")
    assert judged(criterion(fatal_xid(3), kept)) == (Status.FAIL, FailureClass.MUST_FIX)


def test_one_failure_reported_twice_is_one_fault_not_a_recurrence():
    # A GPU falling off the bus is Xid 79 and, seconds later, the lost GPU it leaves.
    lost = finding("gpu_lost", at(3, 0, 5), None, node="node-3", gpu="2")

    result = criterion(fatal_xid(3), lost)

    assert judged(result) == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    assert (counts(result)["incidents"], counts(result)["fatal"]) == (1, 1)


def counts(result: CriterionResult) -> dict[str, object]:
    [note] = [n for n in result.evidence if n.key == "ev.gpu_health"]
    keys = ("incidents", "symptoms", "fatal", "errors", "in_service")
    return {k: note.params[k] for k in keys}


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_an_xid_79_the_gpu_it_leaves_lost_and_the_node_kept_in_service_are_one_fatal_fault(
    language: Language,
):
    fell_off = xid(79, at(3), "node-3", 2)
    lost = condition("gpu_lost", at(3, 0, 5), None, "node-3", 2)
    kept = kept_in_service(fell_off, at(3, 15))
    soak = PeriodData(
        DAY, findings=[fell_off, lost, kept], queue_samples=SNAPSHOTS, gpu=sampled("node-3")
    )
    verdict = build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES))
    result = next(c for c in verdict.criteria if c.criterion == "gpu_health")

    assert counts(result) == {
        "incidents": 1,
        "symptoms": 3,
        "fatal": 1,
        "errors": 0,
        "in_service": 1,
    }
    [note] = [n for n in result.evidence if n.key == "ev.gpu_health"]
    assert Words(language, UTC).note(note) in render_verdict(verdict, language).markdown


def test_an_ecc_error_and_the_row_remap_it_needs_are_one_error_and_two_gpus_two():
    ecc = ecc_rise(at(11), "node-1", 0, before=3, after=5)
    remap = condition("gpu_row_remap_pending", at(11, 1), None, "node-1", 0)
    elsewhere = condition("gpu_row_remap_pending", at(11, 1), None, "node-3", 4)

    assert counts(criterion(ecc, remap))["errors"] == 1
    assert counts(criterion(ecc, remap, elsewhere)) == {
        "incidents": 2,
        "symptoms": 3,
        "fatal": 0,
        "errors": 2,
        "in_service": 0,
    }


def test_throttling_alone_is_a_later_optimisation():
    slow = finding("gpu_clock_slowdown", at(10), at(11), node="node-1", gpu_uuid="GPU-1")

    result = criterion(slow)

    assert judged(result) == (Status.FAIL, FailureClass.LATER_OPTIMISATION)
    [note] = [n for n in result.evidence if n.key == "ev.gpu_health"]
    assert note.params["nodes"] == ["node-1"]


def test_the_criterion_reads_in_both_languages():
    soak = PeriodData(DAY, findings=[fatal_xid(3)], queue_samples=SNAPSHOTS, gpu=sampled("node-3"))
    verdict = build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES))

    assert "GPU and node health — fail" in render_verdict(verdict, "en").markdown
    assert "GPU 与节点健康" in render_verdict(verdict, "zh-CN").markdown
