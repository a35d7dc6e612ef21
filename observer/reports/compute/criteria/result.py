"""What a criterion's judgement is, and the pieces every criterion gives one with: its
status, the class of its failure, the verdict's rules, whom and where a failure concerns
(Subjects), and the first few findings and probe runs behind it. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from observer.domain import Finding, ProbeRun
from observer.probes.windows import Calendar
from observer.reports.compute.data import Period
from observer.reports.compute.events import FindingItem, finding_figures
from observer.reports.compute.notes import Note

EXAMPLES = 5


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NOT_OBSERVED = "not_observed"


class FailureClass(StrEnum):
    MUST_FIX = "must_fix"
    LIMITED_LAUNCH = "limited_launch"
    LATER_OPTIMISATION = "later_optimisation"


class ScoreLayer(StrEnum):
    """How much a criterion weighs in the verdict's scoring, after the acceptance guides:
    what no tenant may do without, what a platform team needs to run it, what users notice."""

    MUST = "must"
    KEY = "key"
    EXPERIENCE = "experience"


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
    # reports.verdict_criteria_layers: a criterion's scoring layer where the defaults
    # (scoring.DEFAULT_LAYERS) do not suit the platform
    score_layers: Mapping[str, ScoreLayer] = field(default_factory=dict)


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
    # a pass that holds on part of the fleet only: what its layers could not see (see layers)
    not_observed: Subjects = Subjects()


def result(
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


def found_by(findings: Iterable[Finding], detectors: Iterable[str]) -> list[Finding]:
    """The findings of those detectors."""
    wanted = frozenset(detectors)
    return [f for f in findings if f.detector in wanted]


def run_examples(runs: Sequence[ProbeRun]) -> list[Note]:
    """The first few runs, each with the platform's words on it."""
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
