"""The audit criteria: what the soak left on record for whoever must answer for it. Every
failure kept with the platform's words and classed by its cause (failure_evidence); every
intervention the observer detected audited (interventions_audited). Pure."""

from __future__ import annotations

from collections import Counter

from observer.domain import Expectation, JsonValue, Outcome, ProbeRun
from observer.probes.outcome import EXPECTED_FAILURES, cancelled_by_observer
from observer.reports.compute.causes import Cause, classify
from observer.reports.compute.criteria.result import (
    EXAMPLES,
    CriterionResult,
    FailureClass,
    Status,
    VerdictRules,
    result,
    run_examples,
)
from observer.reports.compute.data import PeriodData
from observer.reports.compute.events import InterventionFigures, InterventionItem
from observer.reports.compute.notes import Note


def failure_evidence(soak: PeriodData, rules: VerdictRules) -> CriterionResult:
    """Every failure with the platform's words (or lost), ended the way expected ones should,
    and classed by its cause from the evidence; too many of unknown cause, among the probe
    runs or among every tenant's failed jobs, fail it."""
    name = "failure_evidence"
    # What the observer cancelled of its own choice is not the platform's failure: listed
    # apart, counted in no share.
    mine = [r for r in soak.runs if cancelled_by_observer(r)]
    runs = [r for r in soak.runs if not cancelled_by_observer(r)]
    apart = [Note("ev.cancelled_by_observer", {"runs": len(mine)})] if mine else []
    ended_badly = [
        r
        for r in runs
        if r.outcome is not None
        and (
            r.expectation in EXPECTED_FAILURES
            or r.outcome in (Outcome.FAILED, Outcome.REJECTED, Outcome.TIMED_OUT, Outcome.LOST)
        )
        and r.expectation not in (Expectation.BLOCKED, Expectation.DENIED)
    ]
    if not ended_badly:
        return result(name, Status.NOT_OBSERVED, [Note("ev.no_failures"), *apart])
    lost = [r for r in ended_badly if r.outcome is Outcome.LOST]
    bare = [r for r in ended_badly if _bare(r)]
    misreported = [
        r for r in ended_badly if r.expectation in EXPECTED_FAILURES and r.outcome is Outcome.FAILED
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
        *apart,
        *run_examples(lost + bare + misreported),
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
        # A probe that failed as designed is no failure of the platform's: named, not counted.
        designed = counts.pop(Cause.AS_DESIGNED.value, 0)
        if counts:
            share = counts[Cause.UNEXPLAINED.value] / counts.total()
            params = {cause.value: counts[cause.value] for cause in Cause} | {
                Cause.AS_DESIGNED.value: designed
            }
            evidence.append(Note(key, {**params, "unexplained_share": share, "limit_share": limit}))
            failed |= share > limit
    return result(
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


def interventions_audited(soak: PeriodData, interventions: InterventionFigures) -> CriterionResult:
    """From the soak's intervention figures: a week of a large fleet's node log is detected
    and audited once per verdict."""
    name = "interventions_audited"
    if not soak.nodes_at_start and not soak.node_changes and not soak.runs:
        return result(name, Status.NOT_OBSERVED, [Note("ev.no_scheduler_data")])
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
    return result(
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
