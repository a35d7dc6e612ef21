"""The go-live criteria, each judged over the whole soak: pass / fail / not observed with the
recorded evidence behind it, a failure classed (must fix, limited launch, later optimisation)
with its reason. Pure.

Classes follow what a failure costs the platform's users: lost capacity, lost evidence or a
broken promise (quota, isolation) must be fixed before anyone relies on the platform; waits
or monitoring nobody can explain limit the launch to tenants who accept them; the rest can
follow the launch. A criterion the soak never exercised, or whose layers it did not observe
(see layers), is not observed, never a pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from observer.detectors import (
    fairness,
    gpu_health,
    gpu_in_service,
    inference,
    node_leaks,
    quota_reclaim,
    unexplained_wait,
)
from observer.domain import (
    Expectation,
    Finding,
    FindingKind,
    JsonValue,
    Outcome,
    ProbeRun,
    Severity,
)
from observer.probes.catalog import QUOTA_PROBE, RECLAIM_PROBE
from observer.probes.windows import Calendar, occurrence_of
from observer.records import PhaseKind, controller_not_running, overlap_seconds
from observer.reports.compute import health
from observer.reports.compute.causes import Cause, classify
from observer.reports.compute.data import Period, PeriodData, ReportContext
from observer.reports.compute.events import (
    NODE_NAMES,
    FindingItem,
    InterventionFigures,
    InterventionItem,
    OwnerStateFigures,
    finding_figures,
    owner_state_note,
)
from observer.reports.compute.inference import WHOLE_DAY, inference_figures
from observer.reports.compute.notes import Note, named

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
# The agents' GPU conditions short of a fatal fault (health.is_fatal) or throttling.
GPU_ERRORS = (
    frozenset(health.CONDITIONS) - gpu_in_service.FATAL_CONDITIONS - {gpu_health.CLOCK_SLOWDOWN}
)
# One failure is often several reports minutes apart (Xid 79 and the GPU it leaves lost, Xid 48
# then 63 or 64): a node's fatal faults recur when they lie further apart than this.
RECURS_AFTER = timedelta(hours=1)
EXAMPLES = 5


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NOT_OBSERVED = "not_observed"


class FailureClass(StrEnum):
    MUST_FIX = "must_fix"
    LIMITED_LAUNCH = "limited_launch"
    LATER_OPTIMISATION = "later_optimisation"


CRITERIA = (
    "queue_explainable",
    "monitoring_linked",
    "quota_enforced",
    "quota_released",
    "failure_evidence",
    "no_unreleased_resources",
    "no_log_loss",
    "monitoring_lag_bound",
    "no_persistent_unfairness",
    "interventions_audited",
    "tenant_isolation",
    "gpu_health",
    "inference_available",
)


@dataclass(frozen=True, slots=True)
class VerdictRules:
    monitoring_lag_max_seconds: float
    unexplained_wait_max_share: float
    unexplained_failure_max_share: float
    blind_max_share: float
    layer_blind_max_share: float
    intervention_match_seconds: float
    fairness_persistence_k: int
    fairness_persistence_m: int
    later_utilisation_share_of_allocated: float
    later_quota_hold_seconds: float
    quota_reclaim_seconds: float  # controller.quota_reclaim_seconds: quota_not_reclaimed's bound


@dataclass(frozen=True, slots=True)
class Subjects:
    """Who and where a failed criterion concerns, from the findings behind it: `jobs`, the
    probe runs or jobs they name; `windows`, those they name or opened in; `pools`, of their
    nodes (the verdict knows the pools)."""

    tenants: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    jobs: tuple[str, ...] = ()
    pipelines: tuple[str, ...] = ()
    windows: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return any(self.params().values())

    def params(self) -> dict[str, list[str]]:
        """The parts that name something, in this order: a Note's `subject` parameter."""
        parts = {f: list(getattr(self, f)) for f in self.__dataclass_fields__}
        return {part: names for part, names in parts.items() if names}


@dataclass(frozen=True, slots=True)
class CriterionResult:
    criterion: str
    status: Status
    failure_class: FailureClass | None  # set when failed
    class_reason: Note | None
    evidence: tuple[Note, ...]
    findings: tuple[FindingItem, ...]  # the first few behind a failure
    subjects: Subjects = Subjects()  # of every finding behind a failure


def judge(
    soak: PeriodData,
    context: ReportContext,
    rules: VerdictRules,
    interventions: InterventionFigures,
    owners: OwnerStateFigures,
) -> tuple[CriterionResult, ...]:
    """Every criterion, in the order of CRITERIA, on the evidence alone (layers.observed then
    judges what the soak could not see)."""
    return (
        _queue_explainable(soak, context, rules),
        _monitoring_linked(soak, context),
        _quota_enforced(soak.runs),
        _quota_released(soak, context, rules),
        _failure_evidence(soak, rules),
        _no_unreleased(soak, context, owners),
        _no_log_loss(soak, context),
        _monitoring_lag(soak, context, rules),
        _no_unfairness(soak, context, rules),
        _interventions_audited(soak, interventions),
        _isolation(soak, context),
        _gpu_health(soak, context),
        _inference_available(soak, context),
    )


def _result(
    criterion: str,
    status: Status,
    evidence: Iterable[Note],
    failure: FailureClass | None = None,
    findings: Iterable[Finding] = (),
    period: Period | None = None,
    calendar: Calendar | None = None,
    runs: Sequence[ProbeRun] = (),
) -> CriterionResult:
    """`runs`: the probe runs behind a failure, besides its findings."""
    failed = failure if status is Status.FAIL else None
    behind = list(findings)
    shown = sorted(behind, key=lambda f: (f.opened_at, f.detector))[:EXAMPLES]
    items = finding_figures(shown, period.start, period.end).items if period else ()
    return CriterionResult(
        criterion=criterion,
        status=status,
        failure_class=failed,
        class_reason=None if failed is None else Note(f"class.{criterion}.{failed.value}"),
        evidence=tuple(evidence),
        findings=items,
        subjects=_subjects(behind, runs, calendar) if failed else Subjects(),
    )


def _subjects(
    findings: Sequence[Finding], runs: Sequence[ProbeRun], calendar: Calendar | None
) -> Subjects:
    def values(*keys: str, more: Iterable[str | None] = ()) -> tuple[str, ...]:
        named = {f.subject[k] for f in findings for k in keys if f.subject.get(k)}
        return tuple(sorted(named | {m for m in more if m}))

    in_evidence = [w for f in findings for w in _strings(f.evidence.get("windows"))]
    fell_in = {w for f in findings for w in calendar.windows_at(f.opened_at)} if calendar else set()
    return Subjects(
        tenants=values("tenant", more=(r.tenant for r in runs)),
        nodes=values("node", more=(n for r in runs for n in r.node_names)),
        jobs=values("run_id", "job_id", more=(r.run_id for r in runs)),
        pipelines=values("pipeline"),
        windows=values("window", more=[*in_evidence, *fell_in, *(r.window for r in runs)]),
    )


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _of(findings: Iterable[Finding], detectors: Iterable[str]) -> list[Finding]:
    wanted = frozenset(detectors)
    return [f for f in findings if f.detector in wanted]


def _waited(run: ProbeRun) -> bool:
    return (run.queue_wait_seconds or 0.0) > 0 or sum(run.pending_reasons.values()) > 0


def _queue_explainable(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    name = "queue_explainable"
    runs = list(soak.runs)
    waited = [r for r in runs if _waited(r)]
    if not waited:
        return _result(name, Status.NOT_OBSERVED, [Note("ev.no_waits", {"runs": len(runs)})])
    unexplained = _of(soak.findings, [unexplained_wait.UNEXPLAINED_WAIT])
    unexplained_runs = {f.subject.get("run_id") for f in unexplained}
    share = len(unexplained_runs) / len(waited)
    reasons: dict[str, float] = {}
    for run in waited:
        for reason, seconds in run.pending_reasons.items():
            reasons[reason] = reasons.get(reason, 0.0) + seconds
    evidence = [
        Note(
            "ev.waits",
            {
                "waited": len(waited),
                "runs": len(runs),
                "unexplained": len(unexplained_runs),
                "share": share,
                "limit_share": rules.unexplained_wait_max_share,
            },
        ),
        *(
            Note("ev.pending_reason", {"reason_words": reason, "total_seconds": seconds})
            for reason, seconds in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    ]
    failed = share > rules.unexplained_wait_max_share
    return _result(
        name,
        Status.FAIL if failed else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        unexplained,
        soak.period,
        context.calendar,
    )


def _monitoring_linked(soak: PeriodData, context: ReportContext) -> CriterionResult:
    name = "monitoring_linked"
    sampled = soak.gpu.nodes
    if not sampled:
        return _result(name, Status.NOT_OBSERVED, [Note("ev.no_gpu_samples")])
    known = {n.name for n in soak.nodes_at_start if n.gpus_total > 0} | {
        c.node.name for c in soak.node_changes if c.node.gpus_total > 0
    }
    missing = sorted(known - sampled)
    busy_lag = [
        f
        for f in soak.findings
        if f.detector == "monitoring_lag" and f.subject.get("check") == "gpu_busy_lag"
    ]
    attributed = sum(1 for r in soak.runs if r.tenant and r.window)
    busy_runs = sum(
        1 for r in soak.runs if r.probe in context.busy_probes and r.outcome is Outcome.PASSED
    )
    evidence = [
        Note(
            "ev.coverage",
            {
                "sampled": len(known & sampled),
                "known": len(known),
                "missing": named(missing, NODE_NAMES),
            },
        ),
        Note("ev.runs_attributed", {"attributed": attributed, "runs": len(soak.runs)}),
        Note(
            "ev.gpus_attributed",
            {
                "attributed": sum(h.samples for h in soak.gpu.by_tenant.values()),
                "samples": soak.gpu.overall.samples,
            },
        ),
        Note("ev.busy_lag", {"runs": busy_runs, "findings": len(busy_lag)}),
    ]
    failed = bool(missing or busy_lag)
    return _result(
        name,
        Status.FAIL if failed else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        busy_lag,
        soak.period,
        context.calendar,
    )


def _quota_enforced(runs: Sequence[ProbeRun]) -> CriterionResult:
    name = "quota_enforced"
    quota = [r for r in runs if r.expectation is Expectation.BLOCKED and r.outcome is not None]
    if not quota:
        return _result(name, Status.NOT_OBSERVED, [Note("ev.no_probe_runs", {"probe": "quota"})])
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
        *_run_examples(ran + unrecorded),
    ]
    if ran:
        return _result(name, Status.FAIL, evidence, FailureClass.MUST_FIX, runs=ran)
    if unrecorded:
        return _result(name, Status.FAIL, evidence, FailureClass.LIMITED_LAUNCH, runs=unrecorded)
    if not passed:
        return _result(name, Status.NOT_OBSERVED, evidence)
    return _result(name, Status.PASS, evidence)


def _quota_released(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    """The release half of the quota: a within-quota probe after each over-quota one starts
    once its tenant's own usage leaves room. One still held by the quota past the bound
    (quota_not_reclaimed) is a quota enforced but never given back: the tenant cannot use
    what it pays for. Apart from quota_enforced, since the two promises fail apart, are
    shown by different probes and verified again by different rules."""
    name = "quota_released"
    reclaims = [r for r in soak.runs if r.probe == RECLAIM_PROBE]
    held = _of(soak.findings, [quota_reclaim.DETECTOR])
    if not reclaims and not held:
        return _result(
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
        *(
            Note(
                "ev.quota_not_reclaimed",
                {
                    "tenant": f.subject.get("tenant"),
                    "run_id": f.subject.get("run_id"),
                    "waited_seconds": f.evidence.get("waited_seconds"),
                    "limit_seconds": f.evidence.get("reclaim_seconds"),
                    "reason_words": f.evidence.get("pending_reason") or "-",
                    "message_words": f.evidence.get("pending_message") or "-",
                },
            )
            for f in sorted(held, key=lambda f: f.opened_at)[:EXAMPLES]
        ),
    ]
    if held:
        return _result(
            name, Status.FAIL, evidence, FailureClass.MUST_FIX, held, soak.period, context.calendar
        )
    return _result(name, Status.PASS if waits else Status.NOT_OBSERVED, evidence)


_EXPECTED_FAILURES = frozenset({Expectation.FAIL, Expectation.FAIL_TO_START, Expectation.OOM})


def _failure_evidence(soak: PeriodData, rules: VerdictRules) -> CriterionResult:
    """Every failure with the platform's words (or lost), ended the way expected ones should,
    and classed by its cause from the evidence; too many of unknown cause, among the probe
    runs or among every tenant's failed jobs, fail it."""
    name = "failure_evidence"
    runs = soak.runs
    ended_badly = [
        r
        for r in runs
        if r.outcome is not None
        and (
            r.expectation in _EXPECTED_FAILURES
            or r.outcome in (Outcome.FAILED, Outcome.REJECTED, Outcome.TIMED_OUT, Outcome.LOST)
        )
        and r.expectation not in (Expectation.BLOCKED, Expectation.DENIED)
    ]
    if not ended_badly:
        return _result(name, Status.NOT_OBSERVED, [Note("ev.no_failures")])
    lost = [r for r in ended_badly if r.outcome is Outcome.LOST]
    bare = [r for r in ended_badly if _bare(r)]
    misreported = [
        r
        for r in ended_badly
        if r.expectation in _EXPECTED_FAILURES and r.outcome is Outcome.FAILED
    ]
    evidence = [
        Note(
            "ev.failures",
            {
                "runs": len(ended_badly),
                "complete": len(ended_badly) - len({r.run_id for r in lost + bare}),
                "lost": len(lost),
                "bare": len(bare),
                "misreported": len(misreported),
            },
        ),
        Note("ev.failure_logs"),
        *_run_examples(lost + bare + misreported),
    ]
    failed = bool(lost or bare or misreported)
    runs_by_cause = Counter(
        c.cause.value for r in runs if (c := classify(r, soak.findings, soak.node_changes))
    )
    # Every tenant's failed jobs are judged apart: the probes are among them, and would weigh
    # twice counted with the probe runs. A failed job tallied before causes were kept has none.
    jobs_by_cause: Counter[str] = Counter()
    for slot in soak.job_slots:
        for tally in slot.tallies:
            if tally.cause:
                jobs_by_cause[tally.cause] += tally.jobs
    limit = rules.unexplained_failure_max_share
    for key, counts in (
        ("ev.failure_causes", runs_by_cause),
        ("ev.all_job_failure_causes", jobs_by_cause),
    ):
        if counts:
            share = counts[Cause.UNEXPLAINED.value] / counts.total()
            params = {cause.value: counts[cause.value] for cause in Cause}
            evidence.append(Note(key, {**params, "unexplained_share": share, "limit_share": limit}))
            failed |= share > limit
    return _result(
        name,
        Status.FAIL if failed else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        runs=lost + bare + misreported,
    )


def _bare(run: ProbeRun) -> bool:
    """A failure the platform did not explain. A job the observer gave up on needs only what
    held it pending (a running one, nothing); a lost job is counted apart."""
    if run.outcome is Outcome.LOST:
        return False
    if run.outcome is Outcome.TIMED_OUT:
        return run.started_at is None and not run.reason
    return not run.reason or (not run.message and run.exit_code is None)


def _no_unreleased(
    soak: PeriodData, context: ReportContext, owners: OwnerStateFigures
) -> CriterionResult:
    name = "no_unreleased_resources"
    leaks = _of(soak.findings, LEAK_DETECTORS)
    idle = _of(soak.findings, IDLE_DETECTORS)
    evidence = [
        Note(
            "ev.unreleased",
            {"leaks": len(leaks), "idle": len(idle), "detectors": _detectors(leaks + idle)},
        )
    ]
    if owners.known is not None:
        # Memory held after its job ended shows only on nodes that knew the job had ended.
        evidence.append(owner_state_note("ev", owners))
    if leaks:
        return _result(
            name, Status.FAIL, evidence, FailureClass.MUST_FIX, leaks, soak.period, context.calendar
        )
    if idle:
        return _result(
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
        return _result(name, Status.NOT_OBSERVED, evidence)
    return _result(name, Status.PASS, evidence)


def _lines(value: object) -> int:
    return value if isinstance(value, int) else 0


def _no_log_loss(soak: PeriodData, context: ReportContext) -> CriterionResult:
    name = "no_log_loss"
    canaries = [
        r for r in soak.runs if r.probe in context.canary_probes and r.outcome is Outcome.PASSED
    ]
    if not canaries:
        return _result(
            name,
            Status.NOT_OBSERVED,
            [Note("ev.no_probe_runs", {"probe": sorted(context.canary_probes)})],
        )
    lost = _of(soak.findings, ["log_loss"])
    missing = [f for f in lost if f.severity is Severity.CRITICAL]
    late = _of(soak.findings, ["log_delivery_latency"])
    evidence = [
        Note(
            "ev.logs",
            {
                "canaries": len(canaries),
                "lost": len(missing),
                "lost_lines": sum(_lines(f.evidence.get("missing_lines")) for f in missing),
                "damaged": len(lost) - len(missing),
                "late": len(late),
            },
        )
    ]
    where = (soak.period, context.calendar)
    if missing:
        return _result(name, Status.FAIL, evidence, FailureClass.MUST_FIX, missing, *where)
    if lost:
        return _result(name, Status.FAIL, evidence, FailureClass.LIMITED_LAUNCH, lost, *where)
    if late:
        return _result(name, Status.FAIL, evidence, FailureClass.LATER_OPTIMISATION, late, *where)
    return _result(name, Status.PASS, evidence)


def _monitoring_lag(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    name = "monitoring_lag_bound"
    lag = _of(soak.findings, ["monitoring_lag", "prometheus_unreachable"])
    end = soak.period.end
    # No lag is measured while no controller ran: that time is blind, not late.
    down = controller_not_running(soak.controller_runs, end, context.controller_gone_after_seconds)

    def lasted(f: Finding) -> float:
        closed = f.closed_at or end
        return (closed - f.opened_at).total_seconds() - overlap_seconds(f.opened_at, closed, down)

    over = [
        f
        for f in lag
        if f.kind is FindingKind.CONDITION and lasted(f) > rules.monitoring_lag_max_seconds
    ]
    longest = max((lasted(f) for f in lag), default=0.0)
    evidence = [
        Note(
            "ev.lag",
            {
                "conditions": len(lag),
                "over": len(over),
                "longest_seconds": longest,
                "limit_seconds": rules.monitoring_lag_max_seconds,
            },
        )
    ]
    return _result(
        name,
        Status.FAIL if over else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        over,
        soak.period,
        context.calendar,
    )


def _no_unfairness(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    name = "no_persistent_unfairness"
    calendar = context.calendar
    known = {w.name for w in calendar.windows}
    seen: dict[str, set[datetime]] = {}
    for run in soak.runs:
        if run.probe not in context.fairness_probes or run.submitted_at is None:
            continue
        if run.window not in known:
            continue
        occurrence = occurrence_of(calendar, run.window, run.submitted_at)
        if occurrence is not None:
            seen.setdefault(run.window, set()).add(occurrence.start)
    per_window = [f"{w} {len(s)}" for w, s in sorted(seen.items())]
    evidence = [
        Note("ev.fairness", {"occurrences": per_window, "needed": rules.fairness_persistence_k})
    ]
    unfair = _of(soak.findings, [fairness.PERSISTENT_UNFAIRNESS])
    if not unfair and sum(len(s) for s in seen.values()) < rules.fairness_persistence_k:
        return _result(name, Status.NOT_OBSERVED, evidence)
    if unfair:
        tenants = sorted({str(f.subject.get("tenant")) for f in unfair})
        evidence.append(Note("ev.unfair", {"tenants": tenants}))
        for finding in sorted(unfair, key=lambda f: (str(f.subject.get("tenant")), f.opened_at)):
            evidence += _unfairness_explained(finding)
    return _result(
        name,
        Status.FAIL if unfair else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        unfair,
        soak.period,
        context.calendar,
    )


def _unfairness_explained(finding: Finding) -> list[Note]:
    """What a persistent_unfairness finding's evidence says of why: the stretch in which the
    tenant got least (when, how many GPUs short, against which entitlement), who held the GPUs
    then, and each tenant that waited longer yet received more than its share."""
    tenant = str(finding.subject.get("tenant"))
    notes: list[Note] = []
    worst = finding.evidence.get("worst_stretch")
    if isinstance(worst, Mapping):
        basis = str(worst.get("entitlement_basis") or fairness.WEIGHTED_SHARE)
        notes.append(
            Note(
                f"ev.unfair_stretch.{basis}",
                {
                    "tenant": tenant,
                    "window": worst.get("window"),
                    "start_at": worst.get("start"),
                    "end_at": worst.get("end"),
                    "short_gpus": worst.get("short_gpus"),
                    "received_gpus": worst.get("received_gpus"),
                    "entitled_gpus": worst.get("entitled_gpus"),
                },
            )
        )
        for holder in worst.get("holders") or []:
            name = holder.get("tenant")
            notes.append(
                Note("ev.unfair_holder", {"holder": name, "beyond_gpus": holder.get("beyond_gpus")})
            )
            for kind in ("priority", "user"):
                if by := holder.get(f"by_{kind}"):
                    names = [f"{who} {gpus:.1f}" for who, gpus in by.items()]
                    notes.append(Note(f"ev.unfair_holder_{kind}", {"holder": name, "names": names}))
    for other in finding.evidence.get("favoured_with_longer_waits") or []:
        notes.append(
            Note(
                "ev.unfair_favoured",
                {
                    "tenant": other.get("tenant"),
                    "disadvantaged": tenant,
                    "window": other.get("window"),
                    "wait_seconds": other.get("median_wait_seconds"),
                    "others_wait_seconds": other.get("others_median_wait_seconds"),
                    "received_gpus": other.get("received_gpus"),
                    "entitled_gpus": other.get("entitled_gpus"),
                },
            )
        )
    return notes


def _interventions_audited(soak: PeriodData, interventions: InterventionFigures) -> CriterionResult:
    """From the soak's intervention figures: a week of a large fleet's node log is detected
    and audited once per verdict."""
    name = "interventions_audited"
    if not soak.nodes_at_start and not soak.node_changes and not soak.runs:
        return _result(name, Status.NOT_OBSERVED, [Note("ev.no_scheduler_data")])
    unaudited = [i for i in interventions.items if i.source == "detected" and i.audited_by is None]
    evidence = [
        Note(
            "ev.interventions",
            {
                "recorded": interventions.recorded,
                "detected": interventions.detected,
                "unaudited": len(unaudited),
            },
        ),
        *(_unaudited(i) for i in unaudited[:EXAMPLES]),
    ]
    return _result(
        name,
        Status.FAIL if unaudited else Status.PASS,
        evidence,
        FailureClass.LATER_OPTIMISATION,
    )


def _unaudited(i: InterventionItem) -> Note:
    params: dict[str, JsonValue] = {
        "at": i.at.isoformat(),
        "action": i.action,
        "subject": ", ".join(f"{k}={v}" for k, v in sorted(i.subject.items())),
    }
    if i.reason:
        # The operator's or the platform's own words: quoted, never translated.
        return Note("ev.unaudited.said", {**params, "reason_words": i.reason})
    return Note("ev.unaudited", params)


def _isolation(soak: PeriodData, context: ReportContext) -> CriterionResult:
    """The isolation probe's cross-tenant reads, and the node agents' processes on GPUs their
    pod or job was not given (a container that sees every GPU): either is a breach."""
    name = "tenant_isolation"
    runs = soak.runs
    tries = [r for r in runs if r.expectation is Expectation.DENIED and r.outcome is not None]
    crossed = _of(soak.findings, [node_leaks.GPU_NOT_ASSIGNED])
    breaches = [r for r in tries if r.outcome is Outcome.FAILED]
    evidence = (
        [Note("ev.isolation", {"runs": len(tries), "breaches": len(breaches)})]
        if tries
        else [Note("ev.no_probe_runs", {"probe": "isolation"})]
    )
    evidence += _run_examples(breaches)
    if soak.gpu.nodes or crossed:
        evidence.append(Note("ev.gpu_isolation", {"findings": len(crossed)}))
    if breaches or crossed:
        return _result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.MUST_FIX,
            crossed,
            soak.period,
            context.calendar,
            breaches,
        )
    return _result(name, Status.PASS if tries else Status.NOT_OBSERVED, evidence)


def _gpu_health(soak: PeriodData, context: ReportContext) -> CriterionResult:
    """The GPUs' and nodes' health as the agents saw it, and the platform's reaction: a node
    kept in service after a fatal fault, or fatal faults recurring on a node, must be fixed;
    any fatal fault or GPU error limits the launch (its nodes named); throttling alone is a
    later optimisation. Without GPU samples it was not observed."""
    name = "gpu_health"
    in_service = _of(soak.findings, [gpu_in_service.UNHEALTHY_GPU_IN_SERVICE])
    fatal = [f for f in soak.findings if health.is_fatal(f)]
    errors = _of(soak.findings, GPU_ERRORS)
    throttled = _of(soak.findings, [gpu_health.CLOCK_SLOWDOWN])
    affected = sorted({f.subject.get("node", "") for f in fatal + errors + in_service + throttled})
    evidence = [
        Note(
            "ev.gpu_health",
            {
                "fatal": len(fatal),
                "errors": len(errors),
                "throttled": len(throttled),
                "in_service": len(in_service),
                "nodes": affected,
            },
        )
    ]
    shown = in_service + fatal + errors
    if in_service or _recurring(fatal):
        return _result(
            name, Status.FAIL, evidence, FailureClass.MUST_FIX, shown, soak.period, context.calendar
        )
    if fatal or errors:
        return _result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.LIMITED_LAUNCH,
            shown,
            soak.period,
            context.calendar,
        )
    if throttled:
        return _result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.LATER_OPTIMISATION,
            throttled,
            soak.period,
            context.calendar,
        )
    if not soak.gpu.nodes:
        return _result(name, Status.NOT_OBSERVED, [*evidence, Note("ev.no_gpu_samples")])
    return _result(name, Status.PASS, evidence)


def _inference_available(soak: PeriodData, context: ReportContext) -> CriterionResult:
    """The inference service, when one ran (it is opt-in: none ran is not observed, and the
    scope says online inference was not shown). Unavailable, or never answering, limits the
    launch: online inference waits, batch work may go. A scale-out that stalled while the
    service still answered (else it was unavailable too) is a later optimisation: it serves
    at the replicas it started with; what it lacked is headroom, which reserved capacity
    gives until the platform places scale-outs in time."""
    name = "inference_available"
    unavailable = _of(soak.findings, [inference.UNAVAILABLE])
    stalled = _of(soak.findings, [inference.SCALE_OUT_STALLED])
    figures = inference_figures(soak.inference_samples, soak.inference_phases, context.calendar)
    if figures is None and not unavailable and not stalled:
        return _result(name, Status.NOT_OBSERVED, [Note("ev.no_inference")])
    whole = next((w for w in figures.windows if w.window == WHOLE_DAY), None) if figures else None
    services = ", ".join(figures.services) if figures else "-"
    evidence = [
        Note(
            "ev.inference",
            {
                "services": services,
                "looks": whole.looks,
                "availability_share": whole.availability,
                "requests": whole.requests,
                "errors": whole.errors,
                "p95_ms": whole.p95_ms,
                "p99_ms": whole.p99_ms,
            },
        )
        if whole is not None and whole.p95_ms is not None
        else Note(
            "ev.inference_unanswered",
            {"services": services, "looks": whole.looks if whole else 0},
        ),
        *(
            Note(
                "ev.inference_scale_out",
                {
                    "replicas_from": p.phase.replicas_from,
                    "replicas_to": p.phase.replicas_to,
                    "ready_seconds": p.ready_seconds,
                    "pending_seconds": p.phase.pending_seconds,
                },
            )
            for p in (figures.phases if figures else ())
            if p.kind is PhaseKind.SCALE_OUT
        ),
    ]
    where = (soak.period, context.calendar)
    if unavailable or (whole is not None and whole.available == 0):
        failed = FailureClass.LIMITED_LAUNCH
        return _result(name, Status.FAIL, evidence, failed, unavailable + stalled, *where)
    if stalled:
        failed = FailureClass.LATER_OPTIMISATION
        return _result(name, Status.FAIL, evidence, failed, stalled, *where)
    return _result(name, Status.PASS if whole else Status.NOT_OBSERVED, evidence)


def _recurring(fatal: Iterable[Finding]) -> bool:
    times: dict[str, list[datetime]] = {}
    for f in fatal:
        times.setdefault(f.subject.get("node", ""), []).append(f.opened_at)
    return any(max(at) - min(at) > RECURS_AFTER for at in times.values())


def _run_examples(runs: Sequence[ProbeRun]) -> list[Note]:
    return [
        Note(
            "ev.run",
            {
                "run_id": r.run_id,
                "probe": r.probe,
                "tenant": r.tenant,
                "outcome": r.outcome.value if r.outcome else "-",
                "reason_words": r.reason or "-",
                "message_words": r.message or "-",
            },
        )
        for r in runs[:EXAMPLES]
    ]


def _detectors(findings: Iterable[Finding]) -> list[JsonValue]:
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.detector] = counts.get(f.detector, 0) + 1
    return [f"{d} {n}" for d, n in sorted(counts.items())]
