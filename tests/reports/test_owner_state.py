"""Per node, whether its agent knew if each GPU process's pod or job still ran (the owner
state): the daily summary and the verdict count the nodes that knew and name those that did
not, and the verdict sees node-level leaks only where a node knew."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from observer.domain import Finding, SchedulerSnapshot
from observer.records import StoredGpuSample
from observer.reports.compute.criteria.result import CriterionResult, FailureClass, Status
from observer.reports.compute.daily import DailyInputs, DailyReport, build_daily
from observer.reports.compute.data import Period, PeriodData
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import Recommendation, Verdict, VerdictInputs, build_verdict
from observer.reports.inputs import load_daily
from observer.reports.render.blocks import Rendered
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language
from observer.reports.render.verdict import render_verdict
from observer.settings import Settings
from observer.storage.store import Store
from tests.reports.builders import (
    DAY,
    DAY_START,
    RULES,
    at,
    context,
    finding,
    gpu,
    node,
    owner_state_unknown,
    queue,
    sampled,
)

WEEK = Period(DAY_START, DAY_START + timedelta(days=7))
NODES = ("gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6")


def _verdict(*findings: Finding) -> Verdict:
    """A week whose scheduler was read every 10 minutes and whose six nodes were sampled."""
    snapshots = [DAY_START + timedelta(minutes=10 * i) for i in range(6 * 24 * 7)]
    soak = PeriodData(
        WEEK,
        findings=findings,
        queue_samples=[queue(s, "research") for s in snapshots],
        gpu=sampled(*NODES),
    )
    return build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES))


def _unreleased(verdict: Verdict) -> CriterionResult:
    return next(c for c in verdict.criteria if c.criterion == "no_unreleased_resources")


def _rendered(report: Verdict | DailyReport, language: Language) -> tuple[str, dict[str, Any]]:
    rendered: Rendered = (
        render_verdict(report, language)
        if isinstance(report, Verdict)
        else render_daily(report, language)
    )
    return rendered.markdown, json.loads(rendered.json)


def test_a_soak_where_every_node_knew_its_owners_observes_node_leaks_on_all_of_them():
    # A two-hour kubelet restart on one node is well within the 10 % the layers may miss.
    restart = owner_state_unknown("gpu-2", at(30), at(32))

    v = _verdict(restart)

    assert v.figures.owners.nodes == 6
    assert v.figures.owners.known == 6
    assert v.figures.owners.not_known == {}
    criterion = _unreleased(v)
    assert criterion.status is Status.PASS
    assert Note("ev.owner_state", {"known": 6, "nodes": 6}) in criterion.evidence
    assert v.recommendation is not Recommendation.NO_GO
    md, data = _rendered(v, "en")
    assert "- Owner state known on 6 of 6 nodes." in md
    assert "| Owner state known (agents) | 6 of 6 nodes |" in md
    assert data["owner_state_nodes"] == 6
    assert data["owner_state_known_nodes"] == 6
    zh_md, zh = _rendered(v, "zh-CN")
    assert "- 6 个节点中 6 个的属主状态已知。" in zh_md
    assert "| 已知属主状态的节点（节点代理） | 6 个节点中 6 个 |" in zh_md
    assert zh["owner_state_known_nodes"] == 6


def test_a_soak_where_no_node_knew_its_owners_has_not_observed_node_leaks():
    # Every agent ran with agent.owners none, or could never read its kubelet.
    blind = [owner_state_unknown(n, DAY_START - timedelta(days=1), None) for n in NODES]

    v = _verdict(*blind)

    assert v.figures.owners.known == 0
    assert v.figures.owners.not_known == dict.fromkeys(NODES, 1.0)
    criterion = _unreleased(v)
    assert criterion.status is Status.NOT_OBSERVED
    assert [n.key for n in criterion.evidence] == [
        "ev.unreleased",
        "ev.owner_state_not_known",
        "ev.owner_state_not_observed",
    ]
    assert v.recommendation is Recommendation.NOT_DECIDABLE  # a must criterion went unseen
    assert Note("scope.not_observed_must", {"criterion": "no_unreleased_resources"}) in v.scope
    assert "reverify.no_unreleased_resources" in [n.key for n in v.reverification]
    md, data = _rendered(v, "en")
    assert (
        "- Owner state known on 0 of 6 nodes; not known (unknown for more than 10.0% of the "
        "soak) on gpu-1, gpu-2, gpu-3, gpu-4, gpu-5, gpu-6: memory held after a job ended is not "
        "observed there." in md
    )
    assert (
        "- No node's agent knew whether its GPU processes' pods or jobs still ran (6 nodes): "
        "memory held after a job ended was not observed." in md
    )
    assert "| Owner state known (agents) | 0 of 6 nodes |" in md
    assert data["owner_state_known_nodes"] == 0
    assert data["owner_state"] == {
        "nodes": 6,
        "known": 0,
        "not_known": dict.fromkeys(NODES, 1.0),
        "limit_share": 0.1,
        "known_share": 0.0,
    }
    criteria = {c["criterion"]: c for c in data["criteria"]}
    assert criteria["no_unreleased_resources"]["status"] == "not_observed"
    zh_md, _ = _rendered(v, "zh-CN")
    assert (
        "- 没有任何节点的代理知道其 GPU 进程所属的 Pod 或作业是否仍在运行（共 6 个节点）："
        "作业结束后仍占用的显存未观测。" in zh_md
    )
    assert "6 个节点中 0 个的属主状态已知；gpu-1、gpu-2、gpu-3、gpu-4、gpu-5、gpu-6 " in zh_md


def test_a_leak_seen_while_no_node_knew_its_owners_still_fails():
    blind = [owner_state_unknown(n, DAY_START, None) for n in NODES]
    leak = finding("allocated_without_job", at(3), at(4), node="gpu-1")

    criterion = _unreleased(_verdict(*blind, leak))

    assert (criterion.status, criterion.failure_class) == (Status.FAIL, FailureClass.MUST_FIX)
    assert "ev.owner_state_not_observed" in [n.key for n in criterion.evidence]


def test_a_soak_where_some_nodes_knew_counts_and_names_them():
    findings = [
        owner_state_unknown("gpu-5", DAY_START, None),  # never knew
        # 36 hours of a week (21 %), in two overlapping stretches counted once.
        owner_state_unknown("gpu-6", at(24), at(48)),
        owner_state_unknown("gpu-6", at(36), at(60)),
        owner_state_unknown("gpu-4", at(50), at(60)),  # 10 hours (6 %): it knew
        owner_state_unknown("gpu-9", DAY_START, None),  # no GPU samples: not one of the nodes
    ]

    v = _verdict(*findings)

    owners = v.figures.owners
    assert (owners.nodes, owners.known) == (6, 4)
    assert owners.not_known == {"gpu-5": 1.0, "gpu-6": pytest.approx(36 / (7 * 24))}
    criterion = _unreleased(v)
    # No leak on the four nodes that knew; the two that did not are not vouched for.
    assert criterion.status is Status.PASS
    assert criterion.not_observed.nodes == ("gpu-5", "gpu-6")
    assert (
        Note(
            "ev.owner_state_not_known",
            {"known": 4, "nodes": 6, "not_known": ["gpu-5", "gpu-6"], "limit_share": 0.1},
        )
        in criterion.evidence
    )
    assert v.layers["owners"].share == pytest.approx(1 - (1 + 36 / 168 + 10 / 168) / 6)
    assert (
        Note(
            "scope.narrowed",
            {"criterion": "no_unreleased_resources", "subject": {"nodes": ["gpu-5", "gpu-6"]}},
        )
        in v.scope
    )
    md, data = _rendered(v, "en")
    assert "- Owner state known on 4 of 6 nodes; not known (unknown for more than 10.0% " in md
    assert "| Owner state known (agents) | 4 of 6 nodes |" in md
    assert (data["owner_state_nodes"], data["owner_state_known_nodes"]) == (6, 4)
    assert data["owner_state"]["not_known"] == {"gpu-5": 1.0, "gpu-6": 0.214}
    zh_md, _ = _rendered(v, "zh-CN")
    assert "- 6 个节点中 4 个的属主状态已知；gpu-5、gpu-6 的属主状态未知（超过观察期的 10.0%）" in (
        zh_md
    )


def _daily(day: PeriodData, soak: PeriodData) -> DailyReport:
    return build_daily(
        DailyInputs(
            context=context(),
            day=DAY.start.date(),
            data=day,
            previous=None,
            soak=soak,
            intervention_match_seconds=0,
            layer_blind_max_share=0.1,
        )
    )


def test_the_daily_summary_says_on_how_many_nodes_owner_state_was_known_that_day_and_to_date():
    week_before = Period(DAY.start - timedelta(days=6), DAY.end)
    nodes = ("gpu-1", "gpu-2", "gpu-3")
    outage = owner_state_unknown("gpu-3", at(1), at(9))  # 8 hours: a third of the day

    report = _daily(
        PeriodData(DAY, findings=[outage], gpu=sampled(*nodes)),
        PeriodData(week_before, findings=[outage], gpu=sampled(*nodes)),
    )

    assert (report.figures.owners.known, report.figures.owners.nodes) == (2, 3)
    assert (report.soak_to_date.owners.known, report.soak_to_date.owners.nodes) == (3, 3)
    md, data = _rendered(report, "en")
    assert "| Owner state known (agents) | 2 of 3 nodes | — | 3 of 3 nodes |" in md
    assert (
        "Owner state known on 2 of 3 nodes; not known (its agent could not tell for more than "
        "10.0% of the period whether a GPU process's pod or job still ran) on gpu-3: memory left "
        "after a job ended is not seen there." in md
    )
    assert (data["owner_state_nodes"], data["owner_state_known_nodes"]) == (3, 2)
    assert data["owner_state"]["not_known"] == {"gpu-3": 0.333}
    assert data["soak_to_date"]["owner_state_known_nodes"] == 3
    zh_md, _ = _rendered(report, "zh-CN")
    assert "| 已知属主状态的节点（节点代理） | 3 个节点中 2 个 | — | 3 个节点中 3 个 |" in zh_md
    assert "3 个节点中 2 个的属主状态已知；gpu-3 的属主状态未知" in zh_md


def test_a_day_no_node_was_sampled_leaves_owner_state_not_observed():
    report = _daily(PeriodData(DAY), PeriodData(DAY))

    assert report.figures.owners.known is None
    md, data = _rendered(report, "en")
    assert "| Owner state known (agents) | not observed | — | not observed |" in md
    assert "Owner state known on" not in md
    assert (data["owner_state_nodes"], data["owner_state_known_nodes"]) == (0, None)


@pytest.mark.parametrize(("limit_share", "known"), [(0.1, 1), (0.5, 2)])
def test_the_stored_day_counts_a_node_as_knowing_within_the_layer_blind_share(
    store: Store, limit_share: float, known: int
) -> None:
    settings = Settings.model_validate(
        {
            "controller": {"timezone": "Asia/Shanghai"},
            "reports": {
                "soak_started_at": DAY.start.isoformat(),
                "verdict_layer_blind_max_share": limit_share,
            },
        }
    )
    store.save_scheduler_snapshot(SchedulerSnapshot(at(0), (), (node("gpu-1", "a", 8, 0),), ()))
    samples: list[StoredGpuSample] = [
        gpu(name, at(hour), 40) for name in ("gpu-1", "gpu-2") for hour in range(24)
    ]
    store.add_gpu_samples(samples)
    store.save_findings([owner_state_unknown("gpu-2", at(6), at(15))])  # 9 hours: 37.5 %

    report = build_daily(
        load_daily(store, settings, DAY.start.date(), DAY.end + timedelta(hours=9))
    )

    assert (report.figures.owners.nodes, report.figures.owners.known) == (2, known)
