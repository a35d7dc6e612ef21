"""The go-live verdict over the whole soak: the criteria as judged (see criteria), scored in
layers (must, key, experience: see criteria/scoring), a recommendation with its launch scope
(see scope) and conditions, the three tiers of what to fix (must fix, limited launch, later
optimisation, the data's later optimisations among them: see later), the plan to verify again
(see plan), and the soak day by day. Pure.

The decision, printed with the verdict: no go on any must-fix failure observed, or when a
must criterion failed with no tenant or pool left clear of it (nowhere to launch first); not
decidable when a must criterion was not observed or the observer was blind beyond its limit;
a limited go when every must criterion passed, for the launch scope it passed on, and
something else failed, went unobserved, passed on part of the fleet only or was never
exercised (a probe of the plan never run, or a burst whose copies were never in flight
together); a go only when every criterion passed on the whole fleet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from enum import StrEnum

from observer.reports.compute import usage as who_used
from observer.reports.compute.criteria.judge import judge
from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    ScoreLayer,
    Status,
    Subjects,
    VerdictRules,
)
from observer.reports.compute.criteria.scoring import LayerScore, layers_of, must_criteria, score
from observer.reports.compute.data import GpuUsage, Period, PeriodData, ReportContext
from observer.reports.compute.events import blind_figures, finding_figures
from observer.reports.compute.figures import PeriodFigures, period_figures
from observer.reports.compute.later import later_checks
from observer.reports.compute.layers import LayerCoverage, NodeScope, coverage, observed
from observer.reports.compute.notes import Note
from observer.reports.compute.plan import plan
from observer.reports.compute.queues import wait_stats
from observer.reports.compute.scope import LaunchScope, launch_scope
from observer.reports.compute.tasks import ProbeCoverage, task_figures
from observer.reports.compute.usage import Usage


class Recommendation(StrEnum):
    GO = "go"
    LIMITED_GO = "limited_go"
    NO_GO = "no_go"
    NOT_DECIDABLE = "not_decidable"  # the observer was blind too long to judge


@dataclass(frozen=True, slots=True)
class VerdictInputs:
    """`soak`: the whole soak; `gpu_by_day`: its GPU samples reduced per local day."""

    context: ReportContext
    soak: PeriodData
    gpu_by_day: Mapping[date, GpuUsage]
    rules: VerdictRules
    provisional: bool = False  # over the soak so far, its last day not over


@dataclass(frozen=True, slots=True)
class DayLine:
    day: date
    tasks_total: int
    tasks_failed: int
    queue_wait_seconds_avg: float | None
    gpu_utilization_avg: float | None
    findings_new: int  # conditions opened and events raised
    blind_seconds: float
    gpu_sm_active_avg: float | None = None  # GPM's; None: no GPU reported it that day


@dataclass(frozen=True, slots=True)
class TierItem:
    """A failed criterion, or a later optimisation of the data, in its tier: its first
    evidence and whom and where it concerns."""

    criterion: str
    evidence: Note
    subjects: Subjects


@dataclass(frozen=True, slots=True)
class Verdict:
    soak_started_at: datetime
    soak_ended_at: datetime
    timezone: str
    figures: PeriodFigures
    days: tuple[DayLine, ...]
    criteria: tuple[CriterionResult, ...]
    layers: Mapping[str, LayerCoverage]  # every layer a criterion needs, by name
    score_layers: Mapping[str, ScoreLayer]  # every criterion's layer, in the criteria's order
    scoring: Mapping[ScoreLayer, LayerScore]  # every layer, in ScoreLayer's order
    recommendation: Recommendation
    because: Note  # why this recommendation, in a sentence
    launch_scope: LaunchScope
    launch: Note  # the launch scope in a sentence, chosen by the recommendation
    tiers: Mapping[FailureClass, tuple[TierItem, ...]]  # every class, in FailureClass order
    later: tuple[CriterionResult, ...]  # the data's later optimisations (see later)
    scope: tuple[Note, ...]
    observation_rule: Note  # when a criterion counts as observed, stated in the report
    reverification: tuple[Note, ...]
    provisional: bool  # built over the soak so far: it may still change
    usage: Usage = field(default_factory=Usage)  # who used what over the soak


def build_verdict(inputs: VerdictInputs) -> Verdict:
    context, soak, rules = inputs.context, inputs.soak, inputs.rules
    figures = period_figures(
        soak, context, rules.intervention_match_seconds, rules.layer_blind_max_share
    )
    pool_of = {n.name: n.pool for n in soak.nodes_at_start if n.pool}
    nodes = NodeScope(
        frozenset(soak.gpu.nodes), frozenset(n.name for n in soak.nodes_at_start if n.gpus_total)
    )
    layers = coverage(
        figures.blind, figures.owners, nodes, soak.period.seconds, rules.layer_blind_max_share
    )
    criteria = tuple(
        _with_pools(c, pool_of)
        for c in observed(
            judge(soak, context, rules, figures.interventions, figures.owners),
            layers,
            rules.layer_blind_max_share,
        )
    )
    later = later_checks(figures.gpu, soak, rules)
    score_layers = layers_of(rules)
    must = list(must_criteria(rules))
    reverification = plan(criteria, context, rules)
    launch = launch_scope(
        criteria,
        must,
        (r.tenant for r in soak.runs),
        (n.pool for n in soak.nodes_at_start if n.pool),
        reverification,
    )
    recommendation, because, scope = _recommend(
        criteria, figures, rules, must, launch, context.planned_copies
    )
    return Verdict(
        soak_started_at=soak.period.start,
        soak_ended_at=soak.period.end,
        timezone=context.calendar.timezone.key,
        figures=figures,
        days=tuple(_days(inputs)),
        criteria=criteria,
        layers=layers,
        score_layers=score_layers,
        scoring=score(criteria, score_layers),
        recommendation=recommendation,
        because=because,
        launch_scope=launch,
        launch=_launch_sentence(recommendation, launch),
        tiers=_tiers([*criteria, *later]),
        later=later,
        scope=scope,
        observation_rule=Note(
            "scope.rule",
            {
                "layer_limit_share": rules.layer_blind_max_share,
                "blind_limit_share": rules.blind_max_share,
                "criteria": must,
            },
        ),
        reverification=reverification,
        provisional=inputs.provisional,
        usage=who_used.usage(soak, context),
    )


# --- recommendation and tiers ------------------------------------------------------------


def _with_pools(c: CriterionResult, pool_of: Mapping[str, str | None]) -> CriterionResult:
    def pooled(subjects: Subjects) -> Subjects:
        pools = tuple(sorted({p for n in subjects.nodes if (p := pool_of.get(n))}))
        return replace(subjects, pools=pools) if pools else subjects

    return replace(c, subjects=pooled(c.subjects), not_observed=pooled(c.not_observed))


def _tiers(failed: Sequence[CriterionResult]) -> dict[FailureClass, tuple[TierItem, ...]]:
    return {
        tier: tuple(
            TierItem(c.criterion, c.evidence[0], c.subjects)
            for c in failed
            if c.status is Status.FAIL and c.failure_class is tier and c.evidence
        )
        for tier in FailureClass
    }


def _recommend(
    criteria: Sequence[CriterionResult],
    figures: PeriodFigures,
    rules: VerdictRules,
    must_layer: Sequence[str],
    launch: LaunchScope,
    planned_copies: Mapping[str, int],
) -> tuple[Recommendation, Note, tuple[Note, ...]]:
    """The decision, why, and the conditions of a launch (who and where: the launch scope)."""
    failed = [c for c in criteria if c.status is Status.FAIL]
    must = [c for c in failed if c.failure_class is FailureClass.MUST_FIX]
    limited = [c for c in failed if c.failure_class is FailureClass.LIMITED_LAUNCH]
    later = [c for c in failed if c.failure_class is FailureClass.LATER_OPTIMISATION]
    unseen = [c for c in criteria if c.status is Status.NOT_OBSERVED]
    narrowed = [c for c in criteria if c.status is Status.PASS and c.not_observed]
    blind = figures.blind.share or 0.0
    scope = [Note(f"scope.{c.criterion}") for c in limited]
    scope += [
        Note("scope.not_observed_must", {"criterion": c.criterion})
        if c.criterion in must_layer
        else Note("scope.not_observed", {"criterion": c.criterion})
        for c in unseen
    ]
    scope += [
        Note("scope.narrowed", {"criterion": c.criterion, "subject": c.not_observed.params()})
        for c in narrowed
    ]
    not_exercised, partly = _coverage(planned_copies, figures.coverage)
    scope += not_exercised + partly
    if blind > rules.blind_max_share:
        scope.append(Note("scope.blind", {"share": blind, "limit_share": rules.blind_max_share}))
    alerts_blind = figures.blind.by_source.get("alerts")
    if alerts_blind:
        scope.append(Note("scope.alerts_incomplete", {"blind_seconds": alerts_blind}))
    scope += [Note("scope.later", {"criterion": c.criterion}) for c in later]
    must_unseen = [c.criterion for c in unseen if c.criterion in must_layer]
    if must:
        return Recommendation.NO_GO, Note("rec.no_go.text"), tuple(scope)
    if blind > rules.blind_max_share:
        return (
            Recommendation.NOT_DECIDABLE,
            Note("rec.not_decidable.text", {"share": blind}),
            tuple(scope),
        )
    if must_unseen:
        return (
            Recommendation.NOT_DECIDABLE,
            Note("rec.not_decidable.unseen", {"criteria": must_unseen}),
            tuple(scope),
        )
    if launch.empty:
        # Every must criterion observed, yet one failed wherever the soak looked.
        failed_must = [c.criterion for c in failed if c.criterion in must_layer]
        return (
            Recommendation.NO_GO,
            Note("rec.no_go.no_scope", {"criteria": failed_must}),
            tuple(scope),
        )
    if limited or unseen or narrowed or not_exercised:
        return Recommendation.LIMITED_GO, Note("rec.limited_go.text"), tuple(scope)
    return Recommendation.GO, Note("rec.go.text"), tuple(scope)


def _launch_sentence(recommendation: Recommendation, launch: LaunchScope) -> Note:
    """The launch scope as the decision lets it be read: the whole fleet on a go, where to
    begin on a limited go, where to begin once the decision changes otherwise."""
    if launch.empty:
        return Note("launch.none")
    named = {"tenants": list(launch.tenants), "pools": list(launch.pools)}
    if recommendation is Recommendation.GO:
        return Note("launch.whole_fleet", named)
    if recommendation is Recommendation.LIMITED_GO:
        return Note("launch.first", named)
    return Note("launch.after", named)


def _coverage(
    planned_copies: Mapping[str, int], coverage: Mapping[str, ProbeCoverage]
) -> tuple[list[Note], list[Note]]:
    """The probes of the plan the soak did not exercise, each with why (the skips' commonest
    reason; never due: its windows never opened), and those it ran less than half as often
    as they came due."""
    not_exercised, partly = [], []
    for probe, copies in sorted(planned_copies.items()):
        c = coverage.get(probe, ProbeCoverage(0, 0, {}, 0))
        # Ties go to the reason listed first: skipped is in SkipReason's order.
        why = max(c.skipped, key=lambda reason: c.skipped[reason]) if c.skipped else "not_due"
        if c.run == 0:
            not_exercised.append(Note("scope.not_exercised", {"probe": probe, "why": why}))
        elif c.most_together < copies:
            not_exercised.append(
                Note(
                    "scope.not_together",
                    {"probe": probe, "copies": copies, "most": c.most_together},
                )
            )
        elif 2 * c.run < c.due:
            partly.append(
                Note(
                    "scope.partly_exercised",
                    {"probe": probe, "runs": c.run, "due": c.due, "why": why},
                )
            )
    return not_exercised, partly


# --- per day -----------------------------------------------------------------------------


def _days(inputs: VerdictInputs) -> list[DayLine]:
    soak, context = inputs.soak, inputs.context
    tz = context.calendar.timezone
    first = soak.period.start.astimezone(tz).date()
    last = (soak.period.end - timedelta(microseconds=1)).astimezone(tz).date()
    lines = []
    day = first
    while day <= last:
        start = max(datetime.combine(day, datetime.min.time(), tzinfo=tz), soak.period.start)
        end = min(
            datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=tz),
            soak.period.end,
        )
        runs = [
            r for r in soak.runs if r.submitted_at is not None and start <= r.submitted_at < end
        ]
        tasks = task_figures(runs, soak.findings, soak.node_changes)
        usage = inputs.gpu_by_day.get(day, GpuUsage())
        sliced = replace(
            soak,
            period=Period(start, end),
            runs=runs,
            queue_samples=[s for s in soak.queue_samples if start <= s.at < end],
            gpu=usage,
        )
        found = finding_figures(soak.findings, start, end)
        lines.append(
            DayLine(
                day=day,
                tasks_total=tasks.total,
                tasks_failed=tasks.failed,
                queue_wait_seconds_avg=wait_stats(
                    w for r in runs if (w := r.queue_wait_seconds) is not None
                ).avg_seconds,
                gpu_utilization_avg=usage.overall.mean(),
                findings_new=found.opened + found.events,
                blind_seconds=blind_figures(sliced, context).total_seconds,
                gpu_sm_active_avg=usage.sm_active.overall.mean() if usage.sm_active else None,
            )
        )
        day += timedelta(days=1)
    return lines
