"""The probe runs of one period: how many passed and failed, the failures grouped by cause,
outcome and the platform's reason, each with its explanation in whose words (`explain`),
the per-task record (`task_records`, with what each run had and met while it lived:
run_surroundings), and each probe's coverage (due, run, skipped). Pure.
Every tenant's jobs are counted apart (jobs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from observer.domain import Expectation, Finding, JsonValue, Outcome, ProbeRun
from observer.probes.outcome import OBSERVER_REASONS, cancelled_by_observer
from observer.records import ProbeSkip, SkipReason, StoredNodeChange
from observer.reports.compute.causes import Cause, Classified, classify
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.notes import Note
from observer.reports.compute.run_surroundings import RunSurroundings, surroundings

FAILED_OUTCOMES = frozenset({Outcome.FAILED, Outcome.REJECTED, Outcome.TIMED_OUT, Outcome.LOST})


@dataclass(frozen=True, slots=True)
class Explained:
    """Failed runs of one group that share one explanation."""

    explanation: Note
    run_ids: tuple[str, ...]
    probes: tuple[str, ...]
    tenants: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FailureGroup:
    """Failed runs sharing a cause (causes.Cause), an outcome and the platform's reason (a
    run that passed after a requeue: its ended attempt's), with every distinct explanation
    among them."""

    cause: str
    outcome: str
    reason: str | None
    count: int
    probes: tuple[str, ...]
    tenants: tuple[str, ...]
    explanations: tuple[Explained, ...]
    evidence: tuple[Note, ...]  # what decided the cause, each distinct line once


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One probe run as the per-task appendix shows it; `explanation` for a run that did not
    pass; `around`: its quota, its GPUs, their errors and the alerts while it lived."""

    run: ProbeRun
    explanation: Note | None
    cause: Classified | None
    around: RunSurroundings


@dataclass(frozen=True, slots=True)
class TaskFigures:
    """Probe runs submitted in the period. `failed`: ended other than their expectation says
    (an expected failure that failed the expected way passed), refused, timed out or lost;
    `cancelled`: by the controller's shutdown or by someone else, of which
    `cancelled_by_observer` its own choice (OBSERVER_CANCELLATIONS); `unfinished`: not ended
    when the data was read; `failure_groups` also hold the runs that passed after the platform
    ended an attempt of them. Every tenant's jobs are counted apart: AllJobFigures."""

    total: int
    passed: int
    failed: int
    cancelled: int
    cancelled_by_observer: int
    unfinished: int
    failure_groups: tuple[FailureGroup, ...]
    by_probe: Mapping[str, int]
    failed_by_probe: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class ProbeCoverage:
    """One probe's copies that came due in the period (`due`): each was submitted (`run`)
    or skipped (`skipped`, by SkipReason value); `most_together`: the most runs of it one
    tenant had in flight at once (submitted and not yet ended), which a burst needs to be
    one."""

    due: int
    run: int
    skipped: Mapping[str, int]
    most_together: int


def is_failed(run: ProbeRun) -> bool:
    return run.outcome in FAILED_OUTCOMES


def explain(run: ProbeRun) -> Note | None:
    """Why a run that did not pass ended as it did, in whose words: the platform's reason and
    message where it gave them, else the observer's reasoning from what it recorded (a run it
    gave up on: how long it waited and on what); for a pass after the platform ended an
    attempt of it, that attempt in the platform's words. None for a clean pass or an
    unfinished run."""
    if run.outcome is None:
        return None
    if run.outcome is Outcome.PASSED:
        if not run.attempts:
            return None
        first = run.attempts[0]
        said = " — ".join(w for w in (first.state, first.reason) if w)
        return Note(
            "why.passed_after_requeue",
            {"nodes": list(first.nodes), "words": said, "attempts": len(run.attempts)},
        )
    if cancelled_by_observer(run):
        return Note(
            "why.cancelled_by_observer",
            {"reason": run.reason, "message_words": run.message or "—"},
        )
    if run.outcome is Outcome.TIMED_OUT:
        deadline = _between(run.submitted_at, run.finished_at)
        if run.started_at is not None:
            return Note(
                "why.timed_out_running",
                {"deadline_seconds": deadline, "run_seconds": run.run_seconds},
            )
        held = run.main_wait_reason
        if held is not None:
            seconds = run.pending_reasons[held]
            return Note(
                "why.timed_out_pending",
                {"deadline_seconds": deadline, "reason_words": held, "reason_seconds": seconds},
            )
        return Note("why.timed_out_silent", {"deadline_seconds": deadline})
    if run.outcome is Outcome.NO_GPU:
        return _said("why.no_gpu", run, nodes=list(run.node_names))
    if run.reason in OBSERVER_REASONS:
        return Note("why.observer", {"reason": run.reason, "message_words": run.message or "—"})
    if run.outcome is Outcome.FAILED and run.expectation is not Expectation.SUCCEED:
        return _said("why.unexpected", run, expectation=run.expectation.value)
    if run.reason is None and run.message is None and run.exit_code is None:
        return Note("why.none")
    return _said("why.platform", run)


def _said(key: str, run: ProbeRun, **params: JsonValue) -> Note:
    """`key` with the platform's words on a run (reason, message) as one phrase; for a run
    that exited, `key`.exit with its exit code, which is no word of the platform's."""
    words = " — ".join(w for w in (run.reason, run.message) if w) or "—"
    if run.exit_code is None:
        return Note(key, {**params, "words": words})
    return Note(f"{key}.exit", {**params, "words": words, "exit_code": run.exit_code})


def _between(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start).total_seconds()


def task_records(data: PeriodData, context: ReportContext) -> tuple[TaskRecord, ...]:
    """Every run of `data`, in the order they were submitted, with its explanation, its cause
    and its surroundings."""
    around = surroundings(data, context)
    return tuple(
        TaskRecord(r, explain(r), classify(r, data.findings, data.node_changes), around[r.run_id])
        for r in sorted(data.runs, key=_submission_order)
    )


def _submission_order(run: ProbeRun) -> tuple[float, str]:
    return (run.submitted_at.timestamp() if run.submitted_at else float("inf"), run.run_id)


def task_figures(
    runs: Sequence[ProbeRun],
    findings: Sequence[Finding],
    node_changes: Sequence[StoredNodeChange],
) -> TaskFigures:
    """`findings` and `node_changes`: the period's, from which each failure's cause is read."""
    failed = [r for r in runs if is_failed(r)]
    # A pass after the platform ended an attempt (a node failure under it) is the platform's
    # failure all the same: grouped with the failures, under the attempt's reason.
    requeued = [r for r in runs if r.outcome is Outcome.PASSED and r.attempts]
    groups: dict[tuple[str, str, str | None], list[ProbeRun]] = {}
    evidence: dict[tuple[str, str, str | None], list[Note]] = {}
    for run in failed + requeued:
        assert run.outcome is not None
        classified = classify(run, findings, node_changes)
        cause = classified.cause if classified else Cause.UNEXPLAINED
        passed = run.outcome is Outcome.PASSED
        reason = run.attempts[0].reason or run.attempts[0].state if passed else run.reason
        key = (cause.value, run.outcome.value, reason)
        groups.setdefault(key, []).append(run)
        lines = evidence.setdefault(key, [])
        # Notes hold their parameters in a dict: kept distinct by equality, not by hash.
        lines += [n for n in (classified.evidence if classified else ()) if n not in lines]
    order = [c.value for c in Cause]
    failure_groups = tuple(
        FailureGroup(
            cause=cause,
            outcome=outcome,
            reason=reason,
            count=len(members),
            probes=tuple(sorted({r.probe for r in members})),
            tenants=tuple(sorted({r.tenant for r in members})),
            explanations=_explained(members),
            evidence=tuple(evidence[(cause, outcome, reason)]),
        )
        for (cause, outcome, reason), members in sorted(
            groups.items(),
            key=lambda kv: (order.index(kv[0][0]), -len(kv[1]), kv[0][1], kv[0][2] or ""),
        )
    )
    return TaskFigures(
        total=len(runs),
        passed=sum(1 for r in runs if r.outcome is Outcome.PASSED),
        failed=len(failed),
        cancelled=sum(1 for r in runs if r.outcome is Outcome.CANCELLED),
        cancelled_by_observer=sum(1 for r in runs if cancelled_by_observer(r)),
        unfinished=sum(1 for r in runs if r.outcome is None),
        failure_groups=failure_groups,
        by_probe=_count(r.probe for r in runs),
        failed_by_probe=_count(r.probe for r in failed),
    )


def _explained(runs: Sequence[ProbeRun]) -> tuple[Explained, ...]:
    notes: dict[str, Note] = {}
    members: dict[str, list[ProbeRun]] = {}
    for run in sorted(runs, key=_submission_order):
        note = explain(run)
        assert note is not None
        same = f"{note.key} {sorted(note.params.items())}"  # Notes hold a mapping: not hashable
        notes.setdefault(same, note)
        members.setdefault(same, []).append(run)
    order = sorted(members, key=lambda same: (-len(members[same]), members[same][0].run_id))
    return tuple(
        Explained(
            notes[same],
            tuple(r.run_id for r in members[same]),
            tuple(sorted({r.probe for r in members[same]})),
            tuple(sorted({r.tenant for r in members[same]})),
        )
        for same in order
    )


def _count(keys: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return {key: counts[key] for key in sorted(counts)}


def coverage_figures(
    runs: Sequence[ProbeRun], skips: Sequence[ProbeSkip]
) -> dict[str, ProbeCoverage]:
    """Per probe that came due: its runs and skips (`runs` and `skips` of one period)."""
    ran: dict[str, list[ProbeRun]] = {}
    for run in runs:
        ran.setdefault(run.probe, []).append(run)
    skipped: dict[str, Counter[str]] = {}
    for skip in skips:
        skipped.setdefault(skip.probe, Counter())[skip.reason.value] += 1
    coverage = {}
    for probe in sorted(ran.keys() | skipped.keys()):
        mine = ran.get(probe, [])
        reasons = skipped.get(probe, Counter())
        coverage[probe] = ProbeCoverage(
            due=len(mine) + reasons.total(),
            run=len(mine),
            skipped={r.value: reasons[r.value] for r in SkipReason if reasons[r.value]},
            most_together=_most_together(mine),
        )
    return coverage


def _most_together(runs: Sequence[ProbeRun]) -> int:
    edges: dict[str, list[tuple[datetime, int]]] = {}  # by tenant: (instant, 0 in / 1 out)
    for run in runs:
        if run.submitted_at is not None:
            mine = edges.setdefault(run.tenant, [])
            mine.append((run.submitted_at, 0))
            if run.finished_at is not None:
                mine.append((run.finished_at, 1))
    most = 0
    for mine in edges.values():
        # At one instant submissions come before ends: copies submitted together were
        # together, even one ended at once (refused; an isolation run reads, runs nothing).
        held = 0
        for _, out in sorted(mine):
            held += -1 if out else 1
            most = max(most, held)
    return most
