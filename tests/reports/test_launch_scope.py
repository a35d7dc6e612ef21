"""The verdict's layered scoring, its launch scope and the alerting-chain criterion: every
criterion scored in one layer (must, key, experience; the settings move one), the launch
scope where every must criterion passed and no must fix touched, what widens it for each
tenant or pool left out, and whether the soak's alerts reached Alertmanager."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from observer.domain import Severity
from observer.errors import ConfigError
from observer.reports.compute.criteria.judge import CRITERIA
from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    ScoreLayer,
    Status,
)
from observer.reports.compute.criteria.scoring import DEFAULT_LAYERS, layers_of
from observer.reports.compute.data import GpuUsage, PeriodData, UtilizationHistogram
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import Recommendation, Verdict, VerdictInputs, build_verdict
from observer.reports.inputs import verdict_rules
from observer.reports.render.verdict import render_verdict
from observer.settings import load_settings
from tests.reports.builders import RULES, alert, alerted, at, context, finding, node
from tests.reports.test_verdict import NODES, WEEK, _healthy_runs, _soak

THREE_NODES = [*NODES, node("n3", "b", 8, 0, "idle")]


def _verdict(soak: PeriodData, rules=RULES, **ctx: bool) -> Verdict:
    return build_verdict(
        VerdictInputs(context(snapshot_interval_seconds=600, **ctx), soak, {}, rules)
    )


def _criterion(v: Verdict, name: str) -> CriterionResult:
    return next(c for c in v.criteria if c.criterion == name)


def _two_pools(**changes: object) -> PeriodData:
    """The healthy week on pools a (n1, n2) and b (n3), every node sampled."""
    sampled = GpuUsage(
        overall=UtilizationHistogram.of([50] * 7), nodes=frozenset({"n1", "n2", "n3"})
    )
    return _soak(nodes_at_start=THREE_NODES, gpu=sampled, **changes)


# --- the launch scope -----------------------------------------------------------------


def test_a_tenant_whose_waits_went_unexplained_is_left_out_and_told_what_widens_the_scope():
    waited = [r for r in _healthy_runs() if r.probe == "short"][:2]  # research's
    unexplained = [
        finding("unexplained_wait", at(10), at(11), run_id=r.run_id, tenant=r.tenant)
        for r in waited
    ]
    v = _verdict(_two_pools(findings=unexplained))
    assert v.recommendation is Recommendation.LIMITED_GO
    out = {r.tenant for r in waited}
    tenants = sorted({r.tenant for r in _healthy_runs()} - out)
    assert (list(v.launch_scope.tenants), v.launch_scope.pools) == (tenants, ("a", "b"))
    assert v.launch == Note("launch.first", {"tenants": tenants, "pools": ["a", "b"]})
    assert [(w.part, w.name, w.criteria) for w in v.launch_scope.widen] == [
        ("tenant", t, ("queue_explainable",)) for t in sorted(out)
    ]
    [step] = v.launch_scope.widen[0].reverify
    assert step.key == "reverify.queue_explainable"
    assert step in v.reverification

    en = render_verdict(v, "en")
    assert f"Launch first to: {', '.join(tenants)} on a, b." in en.markdown
    number = v.reverification.index(step) + 1
    for t in sorted(out):
        assert (
            f"| tenant {t} | Queue and priority behaviour explainable | step {number} |"
            in en.markdown
        )
    zh = render_verdict(v, "zh-CN").markdown
    assert f"先行上线范围：租户 {'、'.join(tenants)}，资源池 a、b。" in zh
    for t in sorted(out):
        assert f"| 租户 {t} |" in zh

    data = json.loads(en.json)["launch_scope"]
    assert data["tenants"] == tenants and data["pools"] == ["a", "b"]
    assert data["text"] == f"Launch first to: {', '.join(tenants)} on a, b."
    assert [(w["tenant"], w["criteria"]) for w in data["widen"]] == [
        (t, ["queue_explainable"]) for t in sorted(out)
    ]
    assert [n["key"] for n in data["widen"][0]["reverify"]] == ["reverify.queue_explainable"]


def test_a_must_fix_on_one_pool_is_a_no_go_whose_first_scope_is_the_other_pool():
    leak = finding("allocated_without_job", at(3), at(4), severity=Severity.CRITICAL, node="n3")
    v = _verdict(_two_pools(findings=[leak]))
    assert v.recommendation is Recommendation.NO_GO
    assert v.launch_scope.pools == ("a",)
    assert v.launch_scope.tenants == tuple(sorted({r.tenant for r in _healthy_runs()}))
    assert v.launch.key == "launch.after"
    [widen] = v.launch_scope.widen
    assert (widen.part, widen.name, widen.criteria) == ("pool", "b", ("no_unreleased_resources",))
    [step] = widen.reverify
    assert (step.key, step.params["subject"]["pools"]) == (
        "reverify.no_unreleased_resources",
        ["b"],
    )
    en = render_verdict(v, "en").markdown
    assert "No launch until the recommendation changes; then first to prod, research on a" in en
    assert "| pool b | No unreleased resources |" in en


def test_a_go_launches_to_the_whole_fleet_and_a_must_failure_everywhere_leaves_no_scope():
    go = _verdict(_two_pools())
    assert go.recommendation is Recommendation.GO
    assert (go.launch_scope.pools, go.launch_scope.widen) == (("a", "b"), ())
    assert go.launch.key == "launch.whole_fleet"
    assert "| Left out |" not in render_verdict(go, "en").markdown

    # Lost log lines on every tenant's canaries (a finding naming no one): nowhere is clear.
    lost = finding("log_loss", at(3), at(4), severity=Severity.CRITICAL, pipeline="loki")
    v = _verdict(_two_pools(findings=[lost]))
    assert v.recommendation is Recommendation.NO_GO
    assert v.launch == Note("launch.none")
    assert {w.name for w in v.launch_scope.widen} == {"a", "b", "prod", "research"}
    assert all(w.criteria == ("no_log_loss",) for w in v.launch_scope.widen)
    assert "No launch scope: no tenant and pool passed every must criterion" in (
        render_verdict(v, "en").markdown
    )
    assert "无上线范围" in render_verdict(v, "zh-CN").markdown


def test_a_must_criterion_failed_everywhere_without_a_must_fix_is_a_no_go_without_scope():
    # Every run of the week waited unexplained: explainable queues fail (a limited launch
    # class), but the must layer leaves no tenant to launch to.
    unexplained = [
        finding("unexplained_wait", at(10), at(11), run_id=r.run_id)
        for r in _healthy_runs()
        if r.queue_wait_seconds
    ]
    v = _verdict(_two_pools(findings=unexplained))
    assert _criterion(v, "queue_explainable").failure_class is FailureClass.LIMITED_LAUNCH
    assert v.recommendation is Recommendation.NO_GO
    assert v.because == Note("rec.no_go.no_scope", {"criteria": ["queue_explainable"]})


# --- the scoring ----------------------------------------------------------------------


def test_each_layer_counts_its_criteria_by_their_own_status():
    leak = finding("allocated_without_job", at(3), at(4), severity=Severity.CRITICAL, node="n3")
    unfair = finding("persistent_unfairness", at(12), None, tenant="prod", window="weekday-peak")
    runs = [r for r in _healthy_runs() if r.probe != "isolation"]
    v = _verdict(_two_pools(findings=[leak, unfair], runs=runs), alertmanager=False)
    status = {c.criterion: c.status for c in v.criteria}
    assert sum(
        len(s.passed) + len(s.failed) + len(s.not_observed) for s in v.scoring.values()
    ) == len(CRITERIA)
    for layer, score in v.scoring.items():
        in_layer = [c for c in CRITERIA if v.score_layers[c] is layer]
        assert list(score.passed) == [c for c in in_layer if status[c] is Status.PASS]
        assert list(score.failed) == [c for c in in_layer if status[c] is Status.FAIL]
        assert list(score.not_observed) == [c for c in in_layer if status[c] is Status.NOT_OBSERVED]
    must = v.scoring[ScoreLayer.MUST]
    assert must.failed[0] == "no_unreleased_resources"
    assert must.not_observed[0] == "tenant_isolation"
    assert v.scoring[ScoreLayer.KEY].failed == ("no_persistent_unfairness",)
    assert "alerting_chain" in v.scoring[ScoreLayer.KEY].not_observed

    en = render_verdict(v, "en")
    key = v.scoring[ScoreLayer.KEY]
    assert f"| Key | {len(key.passed)}: " in en.markdown
    assert "| Must | " in en.markdown and "| Experience | " in en.markdown
    data = json.loads(en.json)
    assert set(data["scoring"]) == {"must", "key", "experience"}
    for layer, score in v.scoring.items():
        assert data["scoring"][layer.value] == {
            "passed": list(score.passed),
            "failed": list(score.failed),
            "not_observed": list(score.not_observed),
        }
    assert data["score_layers"] == {c: v.score_layers[c].value for c in CRITERIA}
    assert {c["criterion"]: c["layer"] for c in data["criteria"]} == data["score_layers"]
    zh = render_verdict(v, "zh-CN").markdown
    assert "| 必须项 | " in zh and "| 关键项 | " in zh and "| 体验项 | " in zh


def test_the_settings_move_a_criterion_to_another_layer_and_the_decision_follows():
    # Without Alertmanager the alerting chain is not observed: a key criterion limits the
    # launch; made a must one, nothing is decided.
    assert _verdict(_two_pools(), alertmanager=False).recommendation is Recommendation.LIMITED_GO
    rules = replace(RULES, score_layers={"alerting_chain": ScoreLayer.MUST})
    v = _verdict(_two_pools(), rules, alertmanager=False)
    assert v.score_layers["alerting_chain"] is ScoreLayer.MUST
    assert v.scoring[ScoreLayer.MUST].not_observed == ("alerting_chain",)
    assert v.recommendation is Recommendation.NOT_DECIDABLE
    assert v.because == Note("rec.not_decidable.unseen", {"criteria": ["alerting_chain"]})
    assert "| Alerts reach Alertmanager | Must | not observed |" in (
        render_verdict(v, "en").markdown
    )


def test_the_layers_come_from_the_settings_which_name_the_field_when_wrong(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text(
        "reports:\n  verdict_criteria_layers:\n    gpu_health: key\n    alerting_chain: must\n"
    )
    layers = layers_of(verdict_rules(load_settings(config)))
    assert (layers["gpu_health"], layers["alerting_chain"]) == (ScoreLayer.KEY, ScoreLayer.MUST)
    assert {
        c: layer for c, layer in layers.items() if c not in ("gpu_health", "alerting_chain")
    } == {c: DEFAULT_LAYERS[c] for c in CRITERIA if c not in ("gpu_health", "alerting_chain")}
    config.write_text("reports:\n  verdict_criteria_layers:\n    gpu_health: nice\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert any(p.startswith("reports.verdict_criteria_layers") for p in caught.value.problems)
    config.write_text("reports:\n  verdict_criteria_layers:\n    uptime: must\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert any(p.startswith("reports.verdict_criteria_layers") for p in caught.value.problems)


def test_every_criterion_has_a_default_layer():
    assert tuple(DEFAULT_LAYERS) == CRITERIA


# --- the alerting chain ---------------------------------------------------------------


def _chain(v: Verdict) -> tuple[Status, FailureClass | None, str]:
    c = _criterion(v, "alerting_chain")
    return c.status, c.failure_class, c.evidence[0].key


def test_without_alertmanager_whether_alerts_reach_anyone_is_not_observed():
    v = _verdict(_two_pools(), alertmanager=False)
    assert _chain(v) == (Status.NOT_OBSERVED, None, "ev.alerting.not_set_up")
    assert (
        "Alertmanager is not set up: whether alerts reach anyone was not observed."
        in render_verdict(v, "en").markdown
    )
    assert "未配置 Alertmanager：告警能否送达任何人未观测。" in render_verdict(v, "zh-CN").markdown


def test_a_condition_that_raised_its_alert_passes_and_one_that_did_not_fails():
    lag = finding("monitoring_lag", at(12), at(14), node="n3", check="gpu_busy_lag")
    v = _verdict(_two_pools(findings=[lag]))
    assert _chain(v) == (Status.PASS, None, "ev.alerting.reached")
    reached = _criterion(v, "alerting_chain").evidence[0]
    assert (reached.params["due"], reached.params["missed"]) == (1, 0)

    # The same condition, Alertmanager holding only the platform's own alert.
    silent = _verdict(_two_pools(findings=[lag], alerts=[alert("NodeDown", at(1), at(2))]))
    assert _chain(silent) == (Status.FAIL, FailureClass.LIMITED_LAUNCH, "ev.alerting.missed")
    missed = _criterion(silent, "alerting_chain")
    assert (missed.evidence[0].params["missed"], missed.evidence[0].params["alerts"]) == (1, 1)
    assert missed.subjects.nodes == ("n3",) and missed.subjects.pools == ("b",)
    assert "scope.alerting_chain" in [n.key for n in silent.scope]
    assert "reverify.alerting_chain" in [n.key for n in silent.reverification]
    en = render_verdict(silent, "en").markdown
    assert "1 of the 1 conditions of the observer's that lasted 30 min" in en
    assert "Alerts reach Alertmanager — fail" in en
    # A key criterion: it limits the launch, leaves pool b in the scope.
    assert silent.recommendation is Recommendation.LIMITED_GO
    assert silent.launch_scope.pools == ("a", "b")


def test_an_alert_of_another_detector_or_outside_the_condition_does_not_count():
    lag = finding("monitoring_lag", at(12), at(14), node="n3", check="gpu_busy_lag")
    other = alert("ObserverWarningFindingOpen", at(12), at(14), detector="gpu_xid")
    before = alert("ObserverMonitoringLag", at(9), at(11))
    v = _verdict(_two_pools(findings=[lag], alerts=[other, before]))
    assert _chain(v)[0] is Status.FAIL
    during = alert("ObserverMonitoringLag", at(12, 20), at(13))  # a rule naming no detector
    assert _chain(_verdict(_two_pools(findings=[lag], alerts=[during])))[0] is Status.PASS


def test_short_conditions_or_those_while_alertmanager_was_unread_are_due_no_alert():
    short = finding("monitoring_lag", at(12), at(12, 20), node="n3")
    v = _verdict(_two_pools(findings=[short], alerts=[]))
    assert _chain(v) == (Status.NOT_OBSERVED, None, "ev.alerting.unexercised")

    lag = finding("monitoring_lag", at(12), at(14), node="n3")
    unread = finding("alertmanager_unreachable", at(11), at(15), source="alertmanager")
    v = _verdict(_two_pools(findings=[lag, unread], alerts=alerted([unread], WEEK.end)))
    assert _chain(v) == (Status.PASS, None, "ev.alerting.seen")
    assert _criterion(v, "alerting_chain").evidence[0].params["due"] == 0
