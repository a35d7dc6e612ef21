"""The verdict's quota release and inference criteria. A quota enforced but not given back once
the over-quota job ended must be fixed; no quota-reclaim probe, not observed. An inference
service that was unavailable, or never answered, limits the launch (online inference waits);
a scale-out that stalled while it answered is a later optimisation; no service ran, not
observed, and the scope says so; a blind scheduler leaves both not observed."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from observer.domain import Expectation, Finding, ProbeRun, Severity
from observer.records import InferenceSample
from observer.reports.compute.criteria.result import CriterionResult, FailureClass, Status
from observer.reports.compute.data import PeriodData
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import Verdict, VerdictInputs, build_verdict
from observer.reports.render.verdict import render_verdict
from tests.reports.builders import (
    DAY,
    RULES,
    alerted,
    at,
    context,
    finding,
    queue,
    reclaim,
    run,
    serving,
    started,
)

SNAPSHOTS = [queue(DAY.start + timedelta(minutes=10 * i), "prod") for i in range(6 * 24)]
QUOTA = run(
    "quota",
    "prod",
    submitted=at(10),
    wait_seconds=None,
    reason="QuotaExceeded",
    message="exceeded quota: prod-quota, requested: requests.nvidia.com/gpu=7",
    expectation=Expectation.BLOCKED,
)
LOOKS = serving(at(8, 2), at(20), every=timedelta(minutes=10))


def verdict(
    runs: tuple[ProbeRun, ...] = (),
    findings: tuple[Finding, ...] = (),
    looks: list[InferenceSample] | None = None,
    snapshots: int = len(SNAPSHOTS),
) -> Verdict:
    served = bool(looks)
    soak = PeriodData(
        DAY,
        runs=runs,
        findings=findings,
        queue_samples=SNAPSHOTS[:snapshots],
        inference_samples=looks or [],
        inference_phases=[started(at(8))] if served else [],
        alerts=alerted(findings, DAY.end),
    )
    # A scheduler blind most of the day is judged criterion by criterion, not as a whole.
    rules = replace(RULES, blind_max_share=0.9)
    return build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, rules))


def criterion(v: Verdict, name: str) -> CriterionResult:
    return next(c for c in v.criteria if c.criterion == name)


def judged(result: CriterionResult) -> tuple[Status, FailureClass | None]:
    return result.status, result.failure_class


def not_reclaimed(held: ProbeRun, waited_seconds: float = 1260.0) -> Finding:
    """quota_not_reclaimed as detectors/quota_reclaim.py opens it for `held`."""
    return finding(
        "quota_not_reclaimed",
        at(10, 21),
        None,
        severity=Severity.CRITICAL,
        evidence={
            "tenant": held.tenant,
            "over_quota_run_id": QUOTA.run_id,
            "run_id": held.run_id,
            "waited_seconds": waited_seconds,
            "reclaim_seconds": 300.0,
            "pending_reason": "QuotaExceeded",
            "pending_message": "exceeded quota: prod-quota, used: requests.nvidia.com/gpu=6",
            "quota_gpus": 6,
            "tenant_usage_gpus": 0,
            "tenant_usage_gpus_series": [[at(10).isoformat(), 0]],
            "tenant_ending_gpus": 0,
        },
        tenant=held.tenant,
        run_id=held.run_id,
    )


def stalled(hour: int) -> Finding:
    return finding(
        "inference_scale_out_stalled",
        at(hour),
        at(hour + 1),
        evidence={
            "scale_out_to": 4,
            "ready_replicas": 2,
            "pending_reason": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            "scale_out_since": at(hour - 1).isoformat(),
        },
        service="svc",
        tenant="prod",
    )


# --- the quota's release -------------------------------------------------------------------


def test_a_quota_that_frees_in_time_passes_with_the_wait_it_took():
    result = criterion(verdict((QUOTA, reclaim(QUOTA, wait_seconds=40))), "quota_released")

    assert judged(result) == (Status.PASS, None)
    assert result.evidence[0] == Note(
        "ev.quota_release",
        {
            "runs": 1,
            "started": 1,
            "not_reclaimed": 0,
            "longest_seconds": 40.0,
            "limit_seconds": 300,
        },
    )


def test_without_a_reclaim_probe_the_release_is_not_observed():
    v = verdict((QUOTA,))

    assert judged(criterion(v, "quota_enforced")) == (Status.PASS, None)
    result = criterion(v, "quota_released")
    assert judged(result) == (Status.NOT_OBSERVED, None)
    assert result.evidence == (Note("ev.no_probe_runs", {"probe": "quota-reclaim"}),)


def test_a_quota_never_given_back_is_a_must_fix_naming_the_tenant_in_its_words():
    held = reclaim(QUOTA, wait_seconds=None, outcome=None, reason="QuotaExceeded")
    v = verdict((QUOTA, held), (not_reclaimed(held),))

    result = criterion(v, "quota_released")
    assert judged(result) == (Status.FAIL, FailureClass.MUST_FIX)
    [item] = v.tiers[FailureClass.MUST_FIX]
    assert (item.criterion, item.subjects.params()) == (
        "quota_released",
        {"tenants": ["prod"], "jobs": [held.run_id], "windows": ["weekday-peak"]},
    )
    assert [f.detector for f in result.findings] == ["quota_not_reclaimed"]
    # prod, the soak's only tenant, waits for its quota to be given back before any launch.
    assert v.launch == Note("launch.none")
    [widen] = [w for w in v.launch_scope.widen if w.part == "tenant"]
    assert widen.name == "prod" and "quota_released" in widen.criteria
    assert "reverify.quota_released" in [n.key for n in widen.reverify]

    en = render_verdict(v, "en").markdown
    assert "### Quota given back once over-quota work ended — fail" in en
    assert (
        f"Tenant prod: task {held.run_id} within its quota was still held 21 min after the "
        "over-quota task ended and its own usage left room, beyond its bound of 5 min: "
        "“QuotaExceeded” — "
        "“exceeded quota: prod-quota, used: requests.nvidia.com/gpu=6”"
    ) in en
    assert "the tenant cannot use what it pays for" in en
    zh = render_verdict(v, "zh-CN").markdown
    assert "### 超配额作业结束后配额按时释放 — 未通过" in zh
    assert (
        f"租户 prod：超配额任务结束、租户自身用量也已留出空间，21分钟后配额内任务 {held.run_id} "
        "仍被挂起，超过上限 5分钟：平台原因「QuotaExceeded」"
    ) in zh
    assert (
        "租户 prod 的配额未释放：超配额任务结束、且此后每次调度器快照中租户自身用量都留有空间 "
        f"21分钟后，配额内的任务 {held.run_id} 仍以平台原因「QuotaExceeded」被挂起"
        "（自身已用 GPU 块数的变化，配额 6 块：0）"
    ) in zh


def test_the_release_is_verified_again_for_the_tenant_with_its_bound():
    held = reclaim(QUOTA, wait_seconds=None, outcome=None, reason="QuotaExceeded")
    v = verdict((QUOTA, held), (not_reclaimed(held),))

    [step] = [n for n in v.reverification if n.key == "reverify.quota_released"]
    assert step.params["probes"] == ["quota"]
    assert step.params["detectors"] == ["quota_not_reclaimed"]
    assert step.params["subject"] == {
        "tenants": ["prod"],
        "jobs": [held.run_id],
        "windows": ["weekday-peak"],
    }
    en = render_verdict(v, "en").markdown
    assert (
        "rerun quota for every tenant with a quota on tenants prod; tasks "
        f"{held.run_id}; windows weekday-peak for 1 d, each refusal followed by its within-quota "
        "quota-reclaim probe; pass when each starts within 5 min once its tenant's own usage "
        "leaves room and no finding of quota_not_reclaimed opens."
    ) in en
    zh = render_verdict(v, "zh-CN").markdown
    assert (
        "租户自身用量留出空间后每个探测都在 5分钟内启动，且未出现相关问题（配额未释放），即为通过。"
    ) in zh


# --- the inference service -----------------------------------------------------------------


def test_a_service_that_answered_all_day_passes_with_its_availability_and_latency():
    v = verdict(looks=LOOKS)

    result = criterion(v, "inference_available")
    assert judged(result) == (Status.PASS, None)
    assert result.evidence[0] == Note(
        "ev.inference",
        {
            "services": ["svc"],
            "looks": len(LOOKS),
            "availability_share": 1.0,
            "requests": 2 * len(LOOKS),
            "errors": 0,
            "p95_ms": 24.0,
            "p99_ms": 24.0,
        },
    )
    assert not [n for n in v.reverification if n.key == "reverify.inference_available"]
    assert (
        f"Service svc: available in 100.0% of {len(LOOKS)} looks once started; 0 of "
        f"{2 * len(LOOKS)} requests failed; latency p95 24.0 ms, p99 24.0 ms."
    ) in render_verdict(v, "en").markdown
    assert "可用比例为 100.0%" in render_verdict(v, "zh-CN").markdown


def test_no_service_in_the_soak_is_not_observed_and_named_in_the_scope():
    v = verdict()

    result = criterion(v, "inference_available")
    assert judged(result) == (Status.NOT_OBSERVED, None)
    assert result.evidence == (Note("ev.no_inference"),)
    assert Note("scope.not_observed", {"criterion": "inference_available"}) in v.scope
    en = render_verdict(v, "en").markdown
    assert "- Not shown by the soak, so not promised: Online inference available.\n" in en
    assert "online inference was not exercised" in en
    assert "with controller.inference.enabled, keep the inference service up on the whole " in en
    zh = render_verdict(v, "zh-CN").markdown
    assert "- 稳定性观察未能证明，因此不作承诺：在线推理服务可用。\n" in zh
    assert "本次稳定性观察未运行推理服务（controller.inference.enabled 未开启）" in zh


def test_an_unavailable_service_limits_the_launch_online_inference_waits():
    # From 14:02 on, one of the two requests of each look failed: 5 % allowed, 50 % seen.
    failing = [InferenceSample(s.at, "svc", 2, 1, 0, 2, 1, (30.0,)) for s in LOOKS[36:]]
    looks = LOOKS[:36] + failing
    down = finding(
        "inference_unavailable",
        at(14, 1),
        at(16),
        severity=Severity.CRITICAL,
        evidence={"ready_replicas": 1, "requests": 2, "errors": 1},
        service="svc",
        tenant="prod",
    )
    v = verdict(findings=(down,), looks=looks)

    result = criterion(v, "inference_available")
    assert judged(result) == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    assert result.evidence[0].params["availability_share"] == 1.0  # each look had an answer
    assert result.evidence[0].params["errors"] == len(failing)
    [item] = v.tiers[FailureClass.LIMITED_LAUNCH]
    assert item.criterion == "inference_available"
    assert item.subjects.params() == {"tenants": ["prod"], "windows": ["weekday-peak"]}
    assert Note("scope.inference_available") in v.scope
    en = render_verdict(v, "en").markdown
    assert "- Online inference waits until its service stays available; other work may go." in en
    assert "Inference service svc of prod unavailable: 1 ready replica(s), 1 of 2 requests" in en
    zh = render_verdict(v, "zh-CN").markdown
    assert "在线推理需暂缓上线，批处理与训练作业可以上线。" in zh
    assert "租户 prod 的推理服务 svc 不可用：就绪副本 1 个，2 个请求中 1 个失败" in zh
    [step] = [n for n in v.reverification if n.key == "reverify.inference_available"]
    assert step.params["detectors"] == ["inference_unavailable", "inference_scale_out_stalled"]


def test_a_service_that_never_answered_limits_the_launch():
    # Deployed, never ready: no start phase, no request ever answered.
    looks = [InferenceSample(s.at, "svc", 2, 0, 2, 0, 0, ()) for s in LOOKS]
    soak = PeriodData(DAY, queue_samples=SNAPSHOTS, inference_samples=looks)
    v = build_verdict(VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES))

    result = criterion(v, "inference_available")
    assert judged(result) == (Status.FAIL, FailureClass.LIMITED_LAUNCH)
    assert result.evidence[0] == Note(
        "ev.inference_unanswered", {"services": ["svc"], "looks": len(LOOKS)}
    )
    assert f"Service svc: no request answered in {len(LOOKS)} looks." in (
        render_verdict(v, "en").markdown
    )


def test_a_stalled_scale_out_while_it_answered_is_a_later_optimisation():
    v = verdict(findings=(stalled(12),), looks=LOOKS)

    result = criterion(v, "inference_available")
    assert judged(result) == (Status.FAIL, FailureClass.LATER_OPTIMISATION)
    assert [i.criterion for i in v.tiers[FailureClass.LATER_OPTIMISATION]] == [
        "inference_available"
    ]
    assert Note("scope.later", {"criterion": "inference_available"}) in v.scope
    en = render_verdict(v, "en").markdown
    assert (
        "Inference service svc of prod: its scale-out to 4 replicas has 2 ready: a replica waits "
        "for a node: “0/3 nodes are available: 3 Insufficient nvidia.com/gpu.”"
    ) in en
    zh = render_verdict(v, "zh-CN").markdown
    assert "推理服务扩容停滞，但服务仍在应答" in zh
    assert "租户 prod 的推理服务 svc：扩容到 4 个副本，仅 2 个就绪" in zh


# --- what the soak could not see -----------------------------------------------------------


def test_with_the_scheduler_blind_neither_passes():
    # Snapshots for the first five hours only: the scheduler was blind most of the day.
    v = verdict((QUOTA, reclaim(QUOTA)), looks=LOOKS, snapshots=30)

    for name in ("quota_released", "inference_available"):
        result = criterion(v, name)
        assert judged(result) == (Status.NOT_OBSERVED, None), name
        assert result.evidence[-1].key == "ev.layer_blind"
        assert result.evidence[-1].params["layer"] == "scheduler"
