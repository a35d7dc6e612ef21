"""The verdict's rules: each criterion passes, fails with its class, or is not observed when
the soak never exercised it; must-fix means no go, anything limited or unseen a limited go
with its scope, and only a soak that showed everything is a go."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from html import escape

import pytest

from observer.detectors.conditions import ConditionTracker
from observer.detectors.fairness import WindowAssessment, assess_window, covers, evaluate
from observer.domain import (
    Expectation,
    Finding,
    FindingKind,
    Outcome,
    ProbeRun,
    QueueState,
    Severity,
)
from observer.probes.windows import Occurrence
from observer.records import (
    ControllerRun,
    GpuMeasure,
    StoredIntervention,
    StoredNodeChange,
    StoredQueueSample,
)
from observer.reports.compute.criteria.judge import CRITERIA
from observer.reports.compute.criteria.result import FailureClass, Status
from observer.reports.compute.criteria.scoring import must_criteria
from observer.reports.compute.data import (
    Allocation,
    GpuUsage,
    Period,
    PeriodData,
    UtilizationHistogram,
    gpu_usage,
)
from observer.reports.compute.layers import NEEDS
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import Recommendation, Verdict, VerdictInputs, build_verdict
from observer.reports.render.i18n import Language
from observer.reports.render.verdict import render_verdict
from tests.detectors.test_fairness import (
    MONDAY_NIGHT,
    TWELVE_GPUS,
    WEIGHTS,
    favoured_prod_night,
    guaranteed,
    stretch_night,
)
from tests.detectors.test_fairness import RULES as FAIRNESS_RULES
from tests.reports.builders import (
    CALENDAR,
    DAY_START,
    RULES,
    alert,
    alerted,
    at,
    context,
    finding,
    gpu,
    node,
    queue,
    reclaim,
    run,
    serving,
    started,
)

WEEK = Period(DAY_START, DAY_START + timedelta(days=7))
NODES = [node("n1", "a", 8, 0, "idle"), node("n2", "a", 8, 0, "idle")]


def _healthy_runs() -> list[ProbeRun]:
    """A soak that exercised every criterion and passed it."""
    runs = []
    for day in range(7):
        peak = DAY_START + timedelta(days=day, hours=10)
        quota = run(
            "quota",
            "prod",
            submitted=peak,
            wait_seconds=None,
            reason="QuotaExceeded",
            message="quota of 6 GPUs",
            expectation=Expectation.BLOCKED,
        )
        runs += [
            run(submitted=peak, wait_seconds=30, pending={"Resources": 30.0}),
            run("fairness", submitted=peak),
            run("fairness", "prod", submitted=peak),
            quota,
            reclaim(quota),
            run(
                "fail-exit",
                submitted=peak,
                reason="NonZeroExitCode",
                message="exit 3",
                exit_code=3,
                expectation=Expectation.FAIL,
            ),
            run("log-canary", submitted=peak),
            run("isolation", submitted=peak, expectation=Expectation.DENIED, message="denied"),
        ]
    return runs


def _soak(**changes: object) -> PeriodData:
    snapshots = [DAY_START + timedelta(minutes=10 * i) for i in range(6 * 24 * 7)]
    data = {
        "period": WEEK,
        "runs": _healthy_runs(),
        "queue_samples": [queue(s, "research") for s in snapshots],
        "nodes_at_start": NODES,
        "gpu": GpuUsage(overall=UtilizationHistogram.of([50] * 7), nodes=frozenset({"n1", "n2"})),
        "inference_samples": serving(WEEK.start + timedelta(minutes=2), WEEK.end),
        "inference_phases": [started(WEEK.start)],
    }
    data.update(changes)
    # A platform's alert of the week, and the chart's rule on each of the observer's findings,
    # in Alertmanager: the alerting chain worked, unless a test says what it held.
    data.setdefault(
        "alerts",
        [
            alert("NodeMemoryPressure", at(15), at(16), severity="warning"),
            *alerted(data.get("findings", []), WEEK.end),  # type: ignore[arg-type]
        ],
    )
    return PeriodData(**data)  # type: ignore[arg-type]


def _verdict(soak: PeriodData | None = None, **ctx: bool) -> Verdict:
    inputs = VerdictInputs(
        context(snapshot_interval_seconds=600, **ctx), soak or _soak(), {}, RULES
    )
    return build_verdict(inputs)


def _status(v: Verdict) -> dict[str, tuple[Status, FailureClass | None]]:
    return {c.criterion: (c.status, c.failure_class) for c in v.criteria}


def test_a_soak_that_showed_everything_and_found_nothing_is_a_go():
    v = _verdict()
    assert [c.criterion for c in v.criteria] == list(CRITERIA)
    assert {c.criterion: c.status for c in v.criteria} == dict.fromkeys(CRITERIA, Status.PASS)
    assert v.recommendation is Recommendation.GO
    assert v.scope == ()
    assert [n.key for n in v.reverification] == ["reverify.rerun"]
    assert len(v.days) == 7 and sum(d.tasks_total for d in v.days) == len(_healthy_runs())


def test_one_node_of_two_without_its_owners_all_week_passes_on_the_other_only_and_no_go():
    unknown = finding("owner_state_unknown", DAY_START - timedelta(days=1), None, node="n2")
    v = _verdict(
        _soak(
            findings=[unknown],
            nodes_at_start=[*NODES, node("n3", "b", 8, 0)],
            gpu=GpuUsage(nodes=frozenset({"n1", "n2", "n3"})),
        )
    )
    leaks = next(c for c in v.criteria if c.criterion == "no_unreleased_resources")
    assert (leaks.status, leaks.not_observed.nodes, leaks.not_observed.pools) == (
        Status.PASS,
        ("n2",),
        ("a",),
    )
    assert v.layers["owners"].share == pytest.approx(2 / 3)
    assert v.recommendation is Recommendation.LIMITED_GO
    assert v.scope == (
        Note(
            "scope.narrowed",
            {"criterion": "no_unreleased_resources", "subject": {"nodes": ["n2"], "pools": ["a"]}},
        ),
    )
    # A must criterion not seen on pool a: the launch begins on pool b, every tenant.
    assert (v.launch_scope.tenants, v.launch_scope.pools) == (("prod", "research"), ("b",))
    [widen] = v.launch_scope.widen
    assert (widen.part, widen.name, widen.criteria) == ("pool", "a", ("no_unreleased_resources",))
    assert [(n.key, n.params["subject"]) for n in widen.reverify] == [
        ("reverify.no_unreleased_resources", {"pools": ["a"], "nodes": ["n2"]})
    ]
    md = render_verdict(v, "en").markdown
    assert (
        "- No unreleased resources passed only where it was observed; not observed on pools a; "
        "nodes n2." in md
    )
    assert "Launch first to: prod, research on b." in md
    assert "| pool a | No unreleased resources | step 1 |" in md
    assert "| No unreleased resources | Must | pass where observed | — | — |" in md
    assert "| owner directory | yes | 66.7% | 2 of 3 nodes | n2 |" in md
    zh = render_verdict(v, "zh-CN").markdown
    assert "| 无未释放资源 | 必须项 | 在已观测范围内通过 | — | — |" in zh
    assert "先行上线范围：租户 prod、research，资源池 b。" in zh


def test_a_gpu_node_the_scheduler_lists_whose_agent_was_never_read_is_not_covered():
    v = _verdict(_soak(nodes_at_start=[*NODES, node("n3", "b", 8, 0)]))
    assert v.layers["agents"].not_covered == ("n3",)
    assert v.layers["agents"].share == pytest.approx(2 / 3)
    health = next(c for c in v.criteria if c.criterion == "gpu_health")
    assert (health.status, health.not_observed.nodes) == (Status.PASS, ("n3",))
    assert (
        Note(
            "ev.layer_covered_nodes",
            {
                "layer": "agents",
                "covered": 2,
                "nodes": 3,
                "share": pytest.approx(2 / 3),
                "not_covered": ["n3"],
            },
        )
        in health.evidence
    )
    assert v.recommendation is Recommendation.LIMITED_GO


def test_a_must_fix_failure_seen_is_a_no_go_even_when_the_observer_was_also_blind():
    blind = [
        finding("agent_unreachable", at(0), at(0) + timedelta(hours=12), agent=agent)
        for agent in ("n1", "n2")
    ]
    leak = finding("allocated_without_job", at(30), at(31), severity=Severity.CRITICAL, node="n1")
    v = _verdict(_soak(findings=[*blind, leak]))
    assert v.recommendation is Recommendation.NO_GO
    assert v.because == Note("rec.no_go.text")


def test_unreleased_gpus_are_a_must_fix_and_a_no_go_naming_the_blocker():
    leak = finding("allocated_without_job", at(3), at(4), severity=Severity.CRITICAL)
    v = _verdict(_soak(findings=[leak]))
    assert _status(v)["no_unreleased_resources"] == (Status.FAIL, FailureClass.MUST_FIX)
    criterion = next(c for c in v.criteria if c.criterion == "no_unreleased_resources")
    assert [f.detector for f in criterion.findings] == ["allocated_without_job"]
    assert criterion.class_reason is not None
    assert criterion.class_reason.key == "class.no_unreleased_resources.must_fix"
    assert v.recommendation is Recommendation.NO_GO
    # The leak's node is in the fleet's only pool: nowhere is clear of it.
    assert (v.launch_scope.tenants, v.launch_scope.pools) == (("prod", "research"), ())
    assert v.launch == Note("launch.none")
    [widen] = v.launch_scope.widen
    assert (widen.part, widen.name, widen.criteria) == ("pool", "a", ("no_unreleased_resources",))
    assert [n.key for n in widen.reverify] == ["reverify.no_unreleased_resources"]


def test_allocated_but_idle_alone_is_a_later_optimisation():
    idle = finding("allocated_idle", at(3), at(4))
    v = _verdict(_soak(findings=[idle]))
    assert _status(v)["no_unreleased_resources"] == (Status.FAIL, FailureClass.LATER_OPTIMISATION)
    assert v.recommendation is Recommendation.GO
    assert [n.key for n in v.scope] == ["scope.later"]


def test_a_quota_that_let_a_job_run_is_a_must_fix_naming_the_tenant_and_the_run():
    ran = run("quota", "prod", outcome=Outcome.FAILED, expectation=Expectation.BLOCKED)
    v = _verdict(_soak(runs=[*_healthy_runs(), ran]))
    assert _status(v)["quota_enforced"] == (Status.FAIL, FailureClass.MUST_FIX)
    [item] = v.tiers[FailureClass.MUST_FIX]
    assert (item.criterion, item.subjects.params()) == (
        "quota_enforced",
        {"tenants": ["prod"], "jobs": [ran.run_id], "windows": ["weekday-peak"]},
    )


def test_persistent_unfairness_and_unexplained_waits_limit_the_launch():
    unfair = finding("persistent_unfairness", at(12), None, tenant="prod", window="weekday-peak")
    unexplained = [
        finding("unexplained_wait", at(10), at(11), run_id=r.run_id, tenant=r.tenant)
        for r in _healthy_runs()[:2]
    ]
    v = _verdict(_soak(findings=[unfair, *unexplained]))
    status = _status(v)
    assert status["no_persistent_unfairness"] == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    assert status["queue_explainable"] == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    assert v.recommendation is Recommendation.LIMITED_GO
    assert {n.key for n in v.scope} == {
        "scope.no_persistent_unfairness",
        "scope.queue_explainable",
    }
    # Explainable queues are a must: the tenants whose waits went unexplained wait for the
    # launch; unfairness (key) is a condition of it, not a reason to leave prod out.
    waited = {r.tenant for r in _healthy_runs()[:2]}
    left = {r.tenant for r in _healthy_runs()} - waited
    assert v.launch_scope.tenants == tuple(sorted(left))
    assert v.launch_scope.pools == ("a",)
    assert v.launch == Note("launch.first", {"tenants": sorted(left), "pools": ["a"]})
    assert [(w.part, w.name, w.criteria) for w in v.launch_scope.widen] == [
        ("tenant", tenant, ("queue_explainable",)) for tenant in sorted(waited)
    ]
    assert {n.key for n in v.reverification} >= {
        "reverify.no_persistent_unfairness",
        "reverify.queue_explainable",
    }


def test_what_the_soak_never_exercised_is_not_observed_and_no_plain_go():
    runs = [r for r in _healthy_runs() if r.probe in ("short",)]
    soak = _soak(runs=runs, gpu=GpuUsage(), inference_samples=[], inference_phases=[])
    v = _verdict(soak, prometheus=False)
    status = _status(v)
    for criterion in (
        "quota_enforced",
        "quota_released",
        "inference_available",
        "failure_evidence",
        "no_log_loss",
        "monitoring_lag_bound",
        "no_persistent_unfairness",
        "tenant_isolation",
        "monitoring_linked",
    ):
        assert status[criterion] == (Status.NOT_OBSERVED, None), criterion
    # The quota, the logs and the GPUs are must criteria: unseen, nothing is decided.
    assert v.recommendation is Recommendation.NOT_DECIDABLE
    # Every must criterion but the queues', which the short probes' waits showed; no GPU
    # sampled: no leak and no GPU health seen either.
    unseen = [c for c in must_criteria(RULES) if c != "queue_explainable"]
    assert v.because == Note("rec.not_decidable.unseen", {"criteria": unseen})
    assert v.launch == Note("launch.none")
    assert {n.key for n in v.scope} == {"scope.not_observed", "scope.not_observed_must"}


def test_a_criterion_unseen_that_is_no_must_leaves_a_limited_go():
    runs = [r for r in _healthy_runs() if r.probe != "fairness"]
    v = _verdict(_soak(runs=runs))
    assert _status(v)["no_persistent_unfairness"] == (Status.NOT_OBSERVED, None)
    assert {c for c, (s, _) in _status(v).items() if s is not Status.PASS} == {
        "no_persistent_unfairness"
    }
    assert v.recommendation is Recommendation.LIMITED_GO
    assert v.because == Note("rec.limited_go.text")
    assert Note("scope.not_observed", {"criterion": "no_persistent_unfairness"}) in v.scope


def test_monitoring_lag_fails_only_beyond_the_bound():
    short = finding("monitoring_lag", at(1), at(1, 5), pipeline="prometheus", check="heartbeat")
    assert _status(_verdict(_soak(findings=[short])))["monitoring_lag_bound"][0] is Status.PASS
    long = finding("prometheus_unreachable", at(1), at(2), pipeline="prometheus")
    assert _status(_verdict(_soak(findings=[long])))["monitoring_lag_bound"] == (
        Status.FAIL,
        FailureClass.LIMITED_LAUNCH,
    )


def test_no_lag_is_counted_while_no_controller_ran():
    # Open at 01:00 when the controller was killed at 01:02, restarted at 03:00 and closed
    # at 03:05: 7 minutes observed late, not 2 h 5 min.
    lag = finding("monitoring_lag", at(1), at(3, 5), pipeline="prometheus", check="heartbeat")
    runs = [
        ControllerRun(1, WEEK.start, at(1, 2), "host", 10),
        ControllerRun(2, at(3), WEEK.end, "host", 11),
    ]
    v = _verdict(_soak(findings=[lag], controller_runs=runs))
    criterion = next(c for c in v.criteria if c.criterion == "monitoring_lag_bound")
    assert criterion.status is Status.PASS
    [note] = [n for n in criterion.evidence if n.key == "ev.lag.within"]
    assert note.params["longest_seconds"] == 7 * 60
    lasting = replace(lag, closed_at=at(3, 15))  # 17 minutes observed: over the bound
    v = _verdict(_soak(findings=[lasting], controller_runs=runs))
    assert _status(v)["monitoring_lag_bound"][0] is Status.FAIL


def test_lost_log_lines_are_a_must_fix_and_late_ones_a_later_optimisation():
    lost = finding(
        "log_loss", at(11), at(11), kind=FindingKind.EVENT, severity=Severity.CRITICAL, run_id="r"
    )
    late = finding("log_delivery_latency", at(11), at(11), kind=FindingKind.EVENT, run_id="r")
    assert _status(_verdict(_soak(findings=[lost])))["no_log_loss"] == (
        Status.FAIL,
        FailureClass.MUST_FIX,
    )
    assert _status(_verdict(_soak(findings=[late])))["no_log_loss"] == (
        Status.FAIL,
        FailureClass.LATER_OPTIMISATION,
    )


def test_the_log_evidence_counts_the_canaries_that_lost_lines_and_the_lines_they_lost():
    def lost(run_id: str, lines: int) -> Finding:
        found = finding(
            "log_loss", at(11), at(11), kind=FindingKind.EVENT, severity=Severity.CRITICAL
        )
        return replace(found, subject={"run_id": run_id}, evidence={"missing_lines": lines})

    v = _verdict(_soak(findings=[lost("r1", 100), lost("r2", 100)]))

    criterion = next(c for c in v.criteria if c.criterion == "no_log_loss")
    [note] = [n for n in criterion.evidence if n.key == "ev.logs"]
    assert (note.params["lost"], note.params["lost_lines"]) == (2, 200)
    assert "2 lost some of their lines (200 lines in all)" in render_verdict(v, "en").markdown


def test_failed_tasks_without_the_platforms_reason_break_the_evidence_chain():
    bare = run(outcome=Outcome.FAILED, reason=None, message=None)
    forgotten = run(outcome=Outcome.LOST, reason="JobForgotten", message="gone")
    v = _verdict(_soak(runs=[*_healthy_runs(), bare, forgotten]))
    assert _status(v)["failure_evidence"] == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    criterion = next(c for c in v.criteria if c.criterion == "failure_evidence")
    assert criterion.evidence[0].params["bare"] == 1
    assert criterion.evidence[0].params["lost"] == 1


def test_interventions_without_a_record_fail_the_audit():
    changes = [StoredNodeChange(at(10), node("n1", "a", 8, 0, "drained", "maintenance"))]
    v = _verdict(_soak(node_changes=changes))
    assert _status(v)["interventions_audited"] == (Status.FAIL, FailureClass.LATER_OPTIMISATION)
    recorded = [StoredIntervention(at(10, 20), "bob", "maintenance", {"node": "n1"})]
    v = _verdict(_soak(node_changes=changes, interventions=recorded))
    assert _status(v)["interventions_audited"] == (Status.PASS, None)


def test_too_much_blind_time_leaves_the_verdict_not_decidable():
    blind = [
        finding("agent_unreachable", at(0), at(0) + timedelta(hours=12), agent=agent)
        for agent in ("n1", "n2")
    ]
    v = _verdict(_soak(findings=blind))
    assert all(c.status is Status.PASS for c in v.criteria)
    assert v.recommendation is Recommendation.NOT_DECIDABLE
    assert [n.key for n in v.scope] == ["scope.blind"]


def test_alert_counts_are_said_incomplete_when_alertmanager_could_not_be_read():
    blind = finding("alertmanager_unreachable", at(3), at(3, 30), source="alertmanager")
    v = _verdict(_soak(findings=[blind]))
    assert v.recommendation is Recommendation.GO  # half an hour of a week is within bound
    [note] = v.scope
    assert (note.key, note.params) == ("scope.alerts_incomplete", {"blind_seconds": 1800.0})


def test_monitoring_that_misses_a_scheduler_node_is_not_linked():
    v = _verdict(_soak(gpu=GpuUsage(overall=UtilizationHistogram.of([1]), nodes=frozenset({"n1"}))))
    assert _status(v)["monitoring_linked"] == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    coverage = next(c for c in v.criteria if c.criterion == "monitoring_linked").evidence[0]
    assert coverage.params == {"sampled": 1, "known": 2, "missing": ["n2"]}


def test_gpu_samples_reach_the_verdict_per_day():
    usage = {DAY_START.date(): gpu_usage_of(80)}
    v = build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), _soak(), usage, RULES))
    assert v.days[0].gpu_utilization_avg == 80.0
    assert v.days[1].gpu_utilization_avg is None


def test_sm_activity_reaches_the_verdict_per_day_beside_utilisation_never_as_zero():
    samples = [
        replace(gpu("n1", at(10), 90), sm_active_percent=12, gpm_supported=True),
        replace(gpu("n1", at(11), 70), sm_active_percent=30, gpm_supported=True),
        replace(gpu("n2", at(10), 50), gpm_supported=False),  # no GPM: not a 0
    ]
    sm = gpu_usage(samples, {"n1": "a"}, CALENDAR, GpuMeasure.SM_ACTIVE)
    usage = {DAY_START.date(): replace(gpu_usage(samples, {"n1": "a"}, CALENDAR), sm_active=sm)}
    v = build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), _soak(), usage, RULES))
    assert v.days[0].gpu_utilization_avg == (90 + 70 + 50) / 3
    assert v.days[0].gpu_sm_active_avg == (12 + 30) / 2
    assert v.days[1].gpu_sm_active_avg is None


def gpu_usage_of(percent: int) -> GpuUsage:
    return gpu_usage([gpu("n1", at(10), percent)], {"n1": "a"}, CALENDAR)


def test_with_the_scheduler_alone_nothing_the_nodes_show_is_passed_and_nothing_decided():
    v = _verdict(
        _soak(gpu=GpuUsage()), agents=False, prometheus=False, logs=False, alertmanager=False
    )
    status = _status(v)
    assert status["no_unreleased_resources"] == (Status.NOT_OBSERVED, None)
    assert status["monitoring_linked"] == (Status.NOT_OBSERVED, None)
    leaks = next(c for c in v.criteria if c.criterion == "no_unreleased_resources")
    assert Note("ev.layer_not_set_up", {"layer": "agents"}) in leaks.evidence
    assert status["gpu_health"] == (Status.NOT_OBSERVED, None)  # only the agents see GPUs
    assert v.recommendation is Recommendation.NOT_DECIDABLE
    assert v.because == Note(
        "rec.not_decidable.unseen",
        {"criteria": ["no_unreleased_resources", "no_log_loss", "gpu_health"]},
    )
    assert {n.params["criterion"] for n in v.scope if n.key == "scope.not_observed_must"} == {
        "no_unreleased_resources",
        "no_log_loss",
        "gpu_health",
    }
    layers = {name: (layer.set_up, layer.share) for name, layer in v.layers.items()}
    assert layers["scheduler"] == (True, 1.0)
    assert layers["agents"] == layers["prometheus"] == layers["logs"] == (False, 0.0)
    md = render_verdict(v, "en").markdown
    assert "Not decidable: a must criterion was not observed (" in md
    assert "| node agents | no | — | — | — |" in md


def test_a_leak_the_scheduler_saw_fails_even_without_node_agents():
    leak = finding("allocated_without_job", at(3), at(4), severity=Severity.CRITICAL)
    v = _verdict(_soak(gpu=GpuUsage(), findings=[leak]), agents=False)
    assert _status(v)["no_unreleased_resources"] == (Status.FAIL, FailureClass.MUST_FIX)
    assert v.recommendation is Recommendation.NO_GO


def test_a_layer_blind_beyond_its_share_leaves_its_criteria_not_observed():
    blind = finding("prometheus_unreachable", at(0), at(0) + timedelta(hours=18), pipeline="p")
    rules = replace(RULES, blind_max_share=0.5, monitoring_lag_max_seconds=86400)
    v = build_verdict(
        VerdictInputs(context(snapshot_interval_seconds=600), _soak(findings=[blind]), {}, rules)
    )
    status = _status(v)
    assert status["monitoring_lag_bound"] == (Status.NOT_OBSERVED, None)
    assert {c for c, (s, _) in status.items() if s is not Status.PASS} == {"monitoring_lag_bound"}
    lag = next(c for c in v.criteria if c.criterion == "monitoring_lag_bound")
    assert lag.evidence[-1].key == "ev.layer_blind"
    assert lag.evidence[-1].params["layer"] == "prometheus"
    assert v.recommendation is Recommendation.LIMITED_GO
    assert v.observation_rule.params == {
        "layer_limit_share": 0.1,
        "blind_limit_share": 0.5,
        "criteria": list(must_criteria(RULES)),
    }


def test_an_accounting_outage_leaves_the_all_jobs_and_quota_audit_criteria_not_observed():
    """slurmdbd down while slurmctld answers: the probes and the scheduler were seen, the
    record of every tenant's jobs and of the quota changes was not."""
    down = finding("accounting_unreachable", at(0), at(0) + timedelta(hours=18), accounting="s")
    rules = replace(RULES, blind_max_share=0.5)
    v = build_verdict(
        VerdictInputs(context(snapshot_interval_seconds=600), _soak(findings=[down]), {}, rules)
    )
    status = _status(v)
    needing = {"failure_evidence", "interventions_audited"}
    assert {c for c, (s, _) in status.items() if s is not Status.PASS} == needing
    for criterion in v.criteria:
        if criterion.criterion in needing:
            assert criterion.status is Status.NOT_OBSERVED
            assert criterion.evidence[-1].key == "ev.layer_blind"
            assert criterion.evidence[-1].params["layer"] == "accounting"


def test_privatedata_leaves_what_needs_every_tenants_jobs_not_observed_never_passed():
    """Slurm's PrivateData=jobs shows the observer its own jobs alone all soak: no other
    tenant's job seen is not "no unfairness", "no quota breach", "queues explained"."""
    hidden = finding("scheduler_partly_visible", at(0), None, scheduler="slurm")
    rules = replace(RULES, blind_max_share=1.0)
    v = build_verdict(VerdictInputs(context(), _soak(findings=[hidden]), {}, rules))

    needing = {c for c, layers in NEEDS.items() if "scheduler" in layers}
    for criterion in v.criteria:
        if criterion.criterion in needing:
            assert criterion.status is Status.NOT_OBSERVED, criterion.criterion
            assert criterion.evidence[-1].params["layer"] == "scheduler"
    assert v.recommendation is not Recommendation.GO


def _lines_under(markdown: str, heading: str) -> list[str]:
    """The list items right under a line of the rendered verdict."""
    after = markdown.split(f"\n{heading}\n\n", 1)[1]
    return after.split("\n\n", 1)[0].splitlines()


def test_the_tiers_list_each_failed_criterion_in_its_class_with_its_subject():
    leak = finding("allocated_without_job", at(3), at(4), severity=Severity.CRITICAL, node="n1")
    unfair = finding("persistent_unfairness", at(12), None, tenant="prod", window="weekday-peak")
    throttled = finding("gpu_clock_slowdown", at(11), at(12), node="n2")
    v = _verdict(_soak(findings=[leak, unfair, throttled]))
    tiers = {
        tier: [(i.criterion, i.subjects.params()) for i in items] for tier, items in v.tiers.items()
    }
    assert tiers == {
        FailureClass.MUST_FIX: [
            ("no_unreleased_resources", {"pools": ["a"], "nodes": ["n1"], "windows": ["night"]})
        ],
        FailureClass.LIMITED_LAUNCH: [
            ("no_persistent_unfairness", {"tenants": ["prod"], "windows": ["weekday-peak"]})
        ],
        FailureClass.LATER_OPTIMISATION: [
            ("gpu_health", {"pools": ["a"], "nodes": ["n2"], "windows": ["weekday-peak"]})
        ],
    }
    by_criterion = {c.criterion: c for c in v.criteria}
    for items in v.tiers.values():
        for item in items:
            assert item.evidence == by_criterion[item.criterion].evidence[0]
    assert v.recommendation is Recommendation.NO_GO

    en = render_verdict(v, "en").markdown
    [must] = _lines_under(en, "#### Must fix")
    assert must.startswith("- No unreleased resources: Leaks: 1; allocated but idle: 0")
    assert must.endswith("Concerns pools a; nodes n1; windows night.")
    [later] = _lines_under(en, "#### Later optimisation")
    assert later.startswith(
        "- GPU and node health: GPU incidents (one per root cause, from 1 findings): 1;"
    )
    assert later.endswith("Concerns pools a; nodes n2; windows weekday-peak.")
    zh = render_verdict(v, "zh-CN").markdown
    [limited] = _lines_under(zh, "#### 限制上线")
    # A finding stored without its occurrences names the tenant; it never says probe coverage.
    assert limited.startswith("- 无持续性不公平：处于劣势：prod。")
    assert limited.endswith("涉及租户 prod；时间窗口 weekday-peak。")
    assert _lines_under(zh, "#### 必须修复") and _lines_under(zh, "#### 后续优化")

    html = render_verdict(v, "en").html
    assert f"<h4>Must fix</h4>\n<ul><li>{escape(must.removeprefix('- '))}</li></ul>" in html
    data = json.loads(render_verdict(v, "en").json)
    assert [i["criterion"] for i in data["tiers"]["must_fix"]] == ["no_unreleased_resources"]
    assert data["tiers"]["must_fix"][0]["text"] == must.removeprefix("- ")
    assert data["tiers"]["limited_launch"][0]["subjects"] == {
        "tenants": ["prod"],
        "windows": ["weekday-peak"],
    }


@pytest.mark.parametrize(
    ("language", "tiers", "none"),
    [
        ("en", ("Must fix", "Limited launch", "Later optimisation"), "- none"),
        ("zh-CN", ("必须修复", "限制上线", "后续优化"), "- 无"),
    ],
)
def test_an_empty_tier_says_none(language: Language, tiers: tuple[str, ...], none: str):
    v = _verdict()
    assert all(items == () for items in v.tiers.values())
    markdown = render_verdict(v, language).markdown
    assert [_lines_under(markdown, f"#### {t}") for t in tiers] == [[none]] * 3


def _allocated(used: dict[str, int], allocated_share: dict[str, float]) -> PeriodData:
    """A soak whose pools averaged `used` percent with `allocated_share` of their GPUs."""
    histograms = {pool: UtilizationHistogram.of([p] * 7) for pool, p in used.items()}
    return _soak(
        gpu=GpuUsage(
            overall=UtilizationHistogram.of([50] * 7),
            by_pool=histograms,
            nodes=frozenset({"n1", "n2"}),
        ),
        allocation=Allocation(
            total_gpu_seconds=dict.fromkeys(used, 1000.0),
            allocated_gpu_seconds={pool: 1000.0 * s for pool, s in allocated_share.items()},
        ),
    )


def test_utilisation_far_below_allocation_is_a_later_optimisation_naming_the_pool():
    # 29 % used against 43 % allocated: under three quarters of it; 40 % against 50 % is not.
    v = _verdict(_allocated({"a": 29, "b": 40}, {"a": 0.43, "b": 0.5}))
    assert v.recommendation is Recommendation.GO  # later optimisation never blocks
    assert v.scope == ()
    [low] = v.later
    assert (low.criterion, low.status, low.failure_class) == (
        "low_utilisation",
        Status.FAIL,
        FailureClass.LATER_OPTIMISATION,
    )
    assert low.subjects.params() == {"pools": ["a"]}
    assert [i.criterion for i in v.tiers[FailureClass.LATER_OPTIMISATION]] == ["low_utilisation"]
    [line] = _lines_under(render_verdict(v, "en").markdown, "#### Later optimisation")
    assert line == (
        "- GPU utilisation against allocation: Pool a: GPU utilisation averaged 29.0% with "
        "43.0% of its GPUs allocated: 67.4% of the allocation used, below 75.0%. Concerns pools a."
    )
    [line] = _lines_under(render_verdict(v, "zh-CN").markdown, "#### 后续优化")
    assert line == (
        "- GPU 利用率与分配量：资源池 a：GPU 平均利用率 29.0%，已分配 GPU 占 43.0%"
        "：分配量的使用率为 67.4%，低于 75.0%。涉及资源池 a。"
    )
    assert [
        c["criterion"] for c in json.loads(render_verdict(v, "en").json)["later_optimisations"]
    ] == ["low_utilisation"]


def test_utilisation_near_its_allocation_is_no_optimisation():
    v = _verdict(_allocated({"a": 40}, {"a": 0.5}))
    assert v.later == () and v.tiers[FailureClass.LATER_OPTIMISATION] == ()


def test_work_held_long_by_its_quota_is_a_later_optimisation_naming_the_tenant():
    held = run(tenant="research", wait_seconds=7200, pending={"QuotaExceeded": 7200.0})
    short = run(tenant="prod", wait_seconds=600, pending={"QuotaExceeded": 600.0})
    # The quota probe is meant to be held: its hold is no optimisation.
    probe = run(
        "quota",
        "prod",
        wait_seconds=None,
        expectation=Expectation.BLOCKED,
        reason="QuotaExceeded",
        pending={"QuotaExceeded": 9000.0},
    )

    def waiting(tenant: str, reasons: dict[str, int], longest_seconds: float) -> StoredQueueSample:
        state = QueueState(tenant, None, 2, 2, 0, 0, longest_seconds, reasons)
        return StoredQueueSample(at(12), state)

    queues = [
        waiting("batch", {"AssocGrpGRES": 2}, 5400.0),
        # Not every pending job waits for its quota: the longest wait may be another's.
        waiting("prod", {"QuotaExceeded": 1, "Resources": 1}, 9000.0),
    ]
    soak = _soak(runs=[*_healthy_runs(), held, short, probe])
    v = _verdict(replace(soak, queue_samples=[*soak.queue_samples, *queues]))
    assert v.recommendation is Recommendation.GO
    [holds] = v.later
    assert holds.criterion == "long_quota_holds"
    assert holds.subjects.params() == {"tenants": ["batch", "research"]}
    assert [(n.params["tenant"], n.params["longest_seconds"]) for n in holds.evidence] == [
        ("research", 7200.0),
        ("batch", 5400.0),
    ]
    en = render_verdict(v, "en").markdown
    assert "- Tenant research: work held by its quota for up to 2 h (bound 1 h).\n" in en
    zh = render_verdict(v, "zh-CN").markdown
    assert "- 租户 batch：作业因配额被挂起最长 1小时30分钟（上限 1小时）。\n" in zh


def test_a_reverification_step_names_the_node_the_probe_the_window_and_the_watch():
    lost = finding("gpu_lost", at(10), at(11), node="n2")
    v = _verdict(_soak(findings=[lost]))
    assert _status(v)["gpu_health"] == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    [step] = [n for n in v.reverification if n.key == "reverify.gpu_health"]
    assert v.reverification[-1].key == "reverify.rerun"
    assert step.params["subject"] == {"pools": ["a"], "nodes": ["n2"], "windows": ["weekday-peak"]}
    assert step.params["probes"] == ["gpu-busy"]
    assert "gpu_lost" in step.params["detectors"]
    plan = _lines_under(render_verdict(v, "en").markdown, "## Re-verification plan")
    [en] = [line for line in plan if "GPU and node health:" in line]
    assert (
        "GPU and node health: with agents reading Xid events, rerun gpu-busy on pools a; "
        "nodes n2; windows weekday-peak for 1 d; pass when no finding of "
    ) in en
    plan = _lines_under(render_verdict(v, "zh-CN").markdown, "## 复验计划")
    [zh] = [line for line in plan if "GPU 与节点健康：" in line]
    assert "重新运行 gpu-busy（范围：资源池 a；节点 n2；时间窗口 weekday-peak），持续 1天" in zh


def test_unfairness_is_watched_for_the_windows_its_persistence_rule_needs():
    unfair = finding("persistent_unfairness", at(12), None, tenant="prod", window="weekday-peak")
    v = _verdict(_soak(findings=[unfair]))
    [step] = [n for n in v.reverification if n.key == "reverify.no_persistent_unfairness"]
    assert step.params["occurrences"] == RULES.fairness_persistence_m
    en = render_verdict(v, "en").markdown
    assert (
        "rerun fairness under contention on tenants prod; windows weekday-peak for 5 occurrences "
        "of each window; pass when no finding of persistent_unfairness opens."
    ) in en


def test_a_criterion_without_findings_is_reverified_on_the_whole_platform():
    runs = [r for r in _healthy_runs() if r.probe != "isolation"]
    v = _verdict(_soak(runs=runs))
    [step] = [n for n in v.reverification if n.key == "reverify.tenant_isolation"]
    assert step.params["subject"] == {}
    assert "rerun isolation for every tenant on the whole platform for 1 d" in (
        render_verdict(v, "en").markdown
    )
    assert "为每个租户重新运行 isolation（范围：整个平台）" in render_verdict(v, "zh-CN").markdown


def test_the_tiers_name_only_the_parts_a_criterion_concerns_and_the_scope_the_must_ones():
    unfair = finding("persistent_unfairness", at(12), None, tenant="prod", window="weekday-peak")
    v = _verdict(_soak(findings=[unfair]))
    en = render_verdict(v, "en").markdown
    limited = _lines_under(en, "#### Limited launch")
    assert any("tenants prod; windows weekday-peak" in line for line in limited)
    # Unfairness is a key criterion: it limits the launch, every must one passed everywhere.
    assert "Launch first to: prod, research on a.\n" in en
    zh = render_verdict(v, "zh-CN").markdown
    assert "先行上线范围：租户 prod、research，资源池 a。\n" in zh


def test_a_step_whose_probes_the_plan_does_not_run_says_to_add_them():
    lost = finding("gpu_lost", at(10), at(11), node="n2")
    planned = replace(context(snapshot_interval_seconds=600), planned_copies={"short": 1})
    v = build_verdict(VerdictInputs(planned, _soak(findings=[lost]), {}, RULES))
    keys = [n.key for n in v.reverification]
    added = v.reverification[keys.index("reverify.gpu_health") + 1]
    assert added == Note("reverify.add_to_plan", {"probes": ["gpu-busy"]})
    plan = _lines_under(render_verdict(v, "en").markdown, "## Re-verification plan")
    assert "The soak's plan does not run gpu-busy: add them to controller.plan first." in "\n".join(
        plan
    )
    zh = render_verdict(v, "zh-CN").markdown
    assert "本次稳定性观察的计划未运行 gpu-busy：请先将其加入 controller.plan。" in zh


def test_the_unfairness_is_explained_its_stretch_who_held_the_gpus_and_who_waited_longer():
    history = [favoured_prod_night(day) for day in range(3)]
    [unfair] = ConditionTracker().update(
        evaluate(history, FAIRNESS_RULES),
        history[-1].occurrence.end,
        lambda detector, subject: covers(history, detector, subject),
    )
    v = _verdict(_soak(findings=[unfair]))

    en = render_verdict(v, "en").markdown
    assert (
        "research got least from 2026-11-30 22:05 to 2026-11-30 22:15 (night): 2.0 GPUs of its "
        "entitled 8.4 (its weighted fair share), 6.4 short."
    ) in en
    assert "Meanwhile prod held 6.4 GPUs beyond its share." in en
    assert "prod's GPUs by priority (QOS, priority class): high 10.0." in en
    assert "prod's GPUs by user: bob 10.0." in en
    assert (
        "prod's probes waited longer (24 min 10 s against 15 s, night), yet prod is not the "
        "disadvantaged one: it received 7.3 GPUs of its entitled 3.6, more than its share, and "
        "its waits are the price of asking for more; research is."
    ) in en
    zh = render_verdict(v, "zh-CN").markdown
    assert (
        "research 在 2026年11月30日 22:05 至 2026年11月30日 22:15（night）获得最少："
        "在应得的 8.4 块 GPU（按权重的公平份额）中只获得 2.0 块，缺少 6.4 块。"
    ) in zh
    assert "同期 prod 超出其份额占用了 6.4 块 GPU。" in zh
    assert (
        "prod 的探测排队等待更久（24分钟10秒，其他租户为 15秒，night），"
        "但处于劣势的并不是 prod：它获得了 7.3 块 GPU，应得 3.6 块，多于其份额，"
        "更长的等待是它申请超出份额的代价；处于劣势的是 research。"
    ) in zh


def test_the_limited_launch_bullet_on_unfairness_states_the_tenants_shortfall():
    history = [favoured_prod_night(day) for day in range(3)]
    [unfair] = ConditionTracker().update(
        evaluate(history, FAIRNESS_RULES),
        history[-1].occurrence.end,
        lambda detector, subject: covers(history, detector, subject),
    )
    v = _verdict(_soak(findings=[unfair]))

    [item] = v.tiers[FailureClass.LIMITED_LAUNCH]
    assert item.evidence.key == "ev.unfair_shortfall.less"
    # research was held below its share in each of its three 8-hour nights.
    assert item.evidence.params["received_gpus"] < item.evidence.params["entitled_gpus"]
    [limited] = _lines_under(render_verdict(v, "en").markdown, "#### Limited launch")
    assert limited == (
        "- No persistent unfairness: research was held short: it received 4.7 GPUs of its "
        "entitled 8.4 while its jobs waited, less than its share, on average over the 3 of the "
        "last 3 window occurrences it was disadvantaged in (night; 1 d in all). Concerns tenants "
        "research; windows night."
    )
    [limited] = _lines_under(render_verdict(v, "zh-CN").markdown, "#### 限制上线")
    assert limited.startswith(
        "- 无持续性不公平：research 获得不足："
        "在其处于劣势的 3 次窗口（最近 3 次中；night，共 1天）里，"
        "作业等待期间平均获得 4.7 块 GPU，应得 8.4 块，少于其份额。"
    )


def test_an_unfairness_weighed_against_a_queues_nominal_quota_says_so():
    def night(day: int) -> WindowAssessment:
        start = MONDAY_NIGHT.start + timedelta(days=day)
        occurrence = Occurrence("night", start, start + timedelta(hours=8))
        queue = guaranteed(stretch_night(day), "research", nominal=8, limit=0)
        return assess_window(occurrence, [], queue, WEIGHTS, TWELVE_GPUS, FAIRNESS_RULES)

    history = [night(day) for day in range(3)]
    [unfair] = ConditionTracker().update(
        evaluate(history, FAIRNESS_RULES),
        history[-1].occurrence.end,
        lambda detector, subject: covers(history, detector, subject),
    )
    assert unfair.evidence["worst_stretch"]["entitlement_basis"] == "nominal_quota"
    assert unfair.evidence["occurrences"][0]["nominal_gpus"] == 8.0

    v = _verdict(_soak(findings=[unfair]))

    assert (
        "research got least from 2026-11-30 22:05 to 2026-11-30 22:15 (night): 2.0 GPUs of its "
        "entitled 8.0 (its queue's nominal quota and what it may borrow), 6.0 short."
    ) in render_verdict(v, "en").markdown
    assert "（其队列的名义配额及可借用部分）中只获得 2.0 块，缺少 6.0 块。" in (
        render_verdict(v, "zh-CN").markdown
    )
