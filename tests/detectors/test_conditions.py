"""A condition opens when a symptom has persisted for its hold time, is reported once while
it persists, and closes on the first evaluation that could see it and no longer does. A
blind evaluation (one that does not cover the subject) never closes anything."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from observer.detectors.conditions import ConditionTracker, Covers, covers_all
from observer.domain import Finding, FindingKind, JsonValue, Severity, Subject, Symptom, finding_key
from tests.support.times import seconds_after

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
at = seconds_after(T0)
GIB = 1024**3
GPU0: Subject = {"node": "gpu-node-7", "gpu": "GPU-0"}
GPU1: Subject = {"node": "gpu-node-7", "gpu": "GPU-1"}


def held_memory(
    subject: Subject = GPU0,
    *,
    hold_seconds: float = 60.0,
    since: datetime | None = None,
    used_bytes: int = 3 * GIB,
    severity: Severity = Severity.WARNING,
) -> Symptom:
    """The leak detector's symptom: memory still held on a GPU after its owner ended."""
    evidence: Mapping[str, JsonValue] = {"memory_used_bytes": used_bytes}
    return Symptom(
        detector="gpu_memory_leak",
        subject=subject,
        severity=severity,
        summary=f"{used_bytes // GIB} GiB held on {subject['gpu']} after its owner ended",
        rule="memory_used_bytes > baseline + 1 GiB while no owner runs",
        evidence=evidence,
        hold_seconds=hold_seconds,
        since=since,
    )


def blind_to(*subjects: Subject) -> Covers:
    """A `covers` for an evaluation that could not see `subjects` (e.g. their GPU's read
    failed this tick)."""
    keys = {finding_key("gpu_memory_leak", s) for s in subjects}

    def covers(detector: str, subject: Subject) -> bool:
        return finding_key(detector, subject) not in keys

    return covers


def feed(tracker: ConditionTracker, times: list[float], symptom: Symptom) -> list[Finding]:
    """Evaluate the same symptom at each of `times`; all findings that changed."""
    changed: list[Finding] = []
    for t in times:
        changed += tracker.update([symptom], at(t), covers_all)
    return changed


# --- hold time ------------------------------------------------------------------------------


def test_a_symptom_gone_before_its_hold_time_never_opens_a_condition() -> None:
    tracker = ConditionTracker()

    assert feed(tracker, [0, 10, 30, 59], held_memory(hold_seconds=60)) == []
    assert tracker.update([], at(70), covers_all) == []
    assert tracker.open_findings() == []


def test_a_symptom_with_no_hold_time_opens_on_first_sight() -> None:
    tracker = ConditionTracker()

    [opened] = tracker.update([held_memory(hold_seconds=0)], at(0), covers_all)

    assert opened.opened_at == at(0)


def test_a_persisting_symptom_opens_once_at_the_first_evaluation_past_its_hold_time() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60)

    assert feed(tracker, [0, 30], symptom) == []
    [opened] = tracker.update([symptom], at(60), covers_all)

    assert opened == Finding(
        detector="gpu_memory_leak",
        kind=FindingKind.CONDITION,
        subject=GPU0,
        severity=Severity.WARNING,
        summary="3 GiB held on GPU-0 after its owner ended",
        opened_at=at(60),
        closed_at=None,
        evidence={
            "memory_used_bytes": 3 * GIB,
            "rule": "memory_used_bytes > baseline + 1 GiB while no owner runs",
            "condition_since": at(0).isoformat(),
        },
    )
    assert tracker.open_findings() == [opened]


def test_the_condition_opens_at_the_evaluation_time_not_at_first_seen_plus_hold() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60)

    feed(tracker, [0, 45], symptom)
    [opened] = tracker.update([symptom], at(90), covers_all)

    assert opened.opened_at == at(90)
    assert opened.evidence["condition_since"] == at(0).isoformat()


def test_an_open_condition_is_not_reported_again_while_the_symptom_persists() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60)
    feed(tracker, [0, 60], symptom)

    assert feed(tracker, [90, 120, 3600], symptom) == []
    assert len(tracker.open_findings()) == 1


def test_an_open_condition_closes_on_the_first_evaluation_without_its_symptom() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60)
    [opened] = feed(tracker, [0, 60, 90], symptom)

    [closed] = tracker.update([], at(120), covers_all)

    assert closed.key == opened.key
    assert closed.opened_at == at(60)
    assert closed.closed_at == at(120)
    assert not closed.is_open
    assert tracker.open_findings() == []
    assert tracker.update([], at(150), covers_all) == []


def test_a_symptom_that_returns_after_closing_must_wait_out_its_hold_time_again() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60)
    feed(tracker, [0, 60], symptom)
    tracker.update([], at(90), covers_all)

    assert feed(tracker, [100, 150], symptom) == []
    [reopened] = tracker.update([symptom], at(160), covers_all)

    assert reopened.opened_at == at(160)
    assert reopened.evidence["condition_since"] == at(100).isoformat()


# --- since ----------------------------------------------------------------------------------


def test_a_cause_known_to_predate_first_sight_opens_the_condition_sooner() -> None:
    # The owner ended 5 s before the memory was first seen held; hold time is 2 s.
    tracker = ConditionTracker()
    owner_ended = at(-5)

    [opened] = tracker.update([held_memory(hold_seconds=2, since=owner_ended)], at(0), covers_all)

    assert opened.opened_at == at(0)
    assert opened.evidence["condition_since"] == owner_ended.isoformat()


def test_a_cause_that_predates_first_sight_by_less_than_the_hold_only_shortens_it() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60, since=at(-20))

    assert feed(tracker, [0, 30], symptom) == []
    [opened] = tracker.update([symptom], at(40), covers_all)

    assert opened.opened_at == at(40)
    assert opened.evidence["condition_since"] == at(-20).isoformat()


def test_a_since_later_than_first_sight_does_not_restart_the_hold_time() -> None:
    tracker = ConditionTracker()
    tracker.update([held_memory(hold_seconds=60)], at(0), covers_all)

    [opened] = tracker.update([held_memory(hold_seconds=60, since=at(50))], at(60), covers_all)

    assert opened.evidence["condition_since"] == at(0).isoformat()


# --- evidence -------------------------------------------------------------------------------


def test_the_evidence_names_the_rule_and_when_the_condition_began() -> None:
    tracker = ConditionTracker()

    [opened] = tracker.update([held_memory(hold_seconds=0)], at(0), covers_all)

    assert opened.evidence["rule"] == "memory_used_bytes > baseline + 1 GiB while no owner runs"
    assert opened.evidence["condition_since"] == at(0).isoformat()
    assert opened.evidence["memory_used_bytes"] == 3 * GIB


def test_an_open_conditions_evidence_and_summary_follow_the_latest_symptom() -> None:
    tracker = ConditionTracker()
    tracker.update([held_memory(hold_seconds=0, used_bytes=3 * GIB)], at(0), covers_all)

    assert (
        tracker.update([held_memory(hold_seconds=0, used_bytes=5 * GIB)], at(30), covers_all) == []
    )

    [current] = tracker.open_findings()
    assert current.summary == "5 GiB held on GPU-0 after its owner ended"
    assert current.evidence["memory_used_bytes"] == 5 * GIB
    assert current.evidence["condition_since"] == at(0).isoformat()
    assert current.opened_at == at(0)


def test_a_closed_condition_carries_the_evidence_it_last_had() -> None:
    tracker = ConditionTracker()
    tracker.update([held_memory(hold_seconds=0, used_bytes=3 * GIB)], at(0), covers_all)
    tracker.update([held_memory(hold_seconds=0, used_bytes=5 * GIB)], at(30), covers_all)

    [closed] = tracker.update([], at(60), covers_all)

    assert closed.evidence["memory_used_bytes"] == 5 * GIB
    assert closed.summary == "5 GiB held on GPU-0 after its owner ended"


# --- coverage: silence is not health --------------------------------------------------------


def test_an_evaluation_blind_to_an_open_condition_does_not_close_it() -> None:
    tracker = ConditionTracker()
    tracker.update([held_memory(hold_seconds=0)], at(0), covers_all)

    assert tracker.update([], at(30), covers=blind_to(GPU0)) == []
    assert [f.opened_at for f in tracker.open_findings()] == [at(0)]


def test_the_next_evaluation_that_covers_it_without_the_symptom_closes_it() -> None:
    tracker = ConditionTracker()
    tracker.update([held_memory(hold_seconds=0)], at(0), covers_all)
    tracker.update([], at(30), covers=blind_to(GPU0))
    tracker.update([], at(60), covers=blind_to(GPU0))

    [closed] = tracker.update([], at(90), covers_all)

    assert closed.opened_at == at(0)
    assert closed.closed_at == at(90)
    assert tracker.open_findings() == []


def test_blindness_does_not_restart_the_hold_time_of_a_pending_symptom() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60)
    tracker.update([symptom], at(0), covers_all)
    tracker.update([], at(30), covers=blind_to(GPU0))

    [opened] = tracker.update([symptom], at(60), covers_all)

    assert opened.opened_at == at(60)
    assert opened.evidence["condition_since"] == at(0).isoformat()


def test_a_covering_evaluation_without_a_pending_symptom_restarts_its_hold_time() -> None:
    tracker = ConditionTracker()
    symptom = held_memory(hold_seconds=60)
    tracker.update([symptom], at(0), covers_all)
    tracker.update([], at(30), covers_all)

    assert tracker.update([symptom], at(60), covers_all) == []
    [opened] = tracker.update([symptom], at(120), covers_all)

    assert opened.opened_at == at(120)
    assert opened.evidence["condition_since"] == at(60).isoformat()


def test_blindness_to_one_subject_does_not_stop_another_from_closing() -> None:
    tracker = ConditionTracker()
    tracker.update(
        [held_memory(GPU0, hold_seconds=0), held_memory(GPU1, hold_seconds=0)], at(0), covers_all
    )

    [closed] = tracker.update([], at(30), covers=blind_to(GPU0))

    assert closed.subject == GPU1
    assert [f.subject for f in tracker.open_findings()] == [GPU0]


# --- identity -------------------------------------------------------------------------------


def test_two_subjects_of_one_detector_open_and_close_independently() -> None:
    tracker = ConditionTracker()
    both = [held_memory(GPU0, hold_seconds=60), held_memory(GPU1, hold_seconds=60)]
    tracker.update([held_memory(GPU0, hold_seconds=60)], at(0), covers_all)
    tracker.update(both, at(30), covers_all)

    [gpu0_opened] = tracker.update(both, at(60), covers_all)
    [gpu1_opened] = tracker.update(both, at(90), covers_all)
    [gpu1_closed] = tracker.update([held_memory(GPU0, hold_seconds=60)], at(120), covers_all)

    assert (gpu0_opened.subject, gpu0_opened.opened_at) == (GPU0, at(60))
    assert (gpu1_opened.subject, gpu1_opened.opened_at) == (GPU1, at(90))
    assert (gpu1_closed.subject, gpu1_closed.opened_at, gpu1_closed.closed_at) == (
        GPU1,
        at(90),
        at(120),
    )
    assert [(f.subject, f.opened_at) for f in tracker.open_findings()] == [(GPU0, at(60))]


def test_closing_one_subject_leaves_the_others_condition_open() -> None:
    tracker = ConditionTracker()
    tracker.update(
        [held_memory(GPU0, hold_seconds=0), held_memory(GPU1, hold_seconds=0)], at(0), covers_all
    )

    [closed] = tracker.update([held_memory(GPU1, hold_seconds=0)], at(30), covers_all)

    assert closed.subject == GPU0
    assert [f.subject for f in tracker.open_findings()] == [GPU1]


def test_the_order_of_a_subjects_keys_does_not_make_it_a_different_condition() -> None:
    tracker = ConditionTracker()
    forwards: Subject = {"node": "gpu-node-7", "gpu": "GPU-0"}
    backwards: Subject = {"gpu": "GPU-0", "node": "gpu-node-7"}
    tracker.update([held_memory(forwards, hold_seconds=60)], at(0), covers_all)

    [opened] = tracker.update([held_memory(backwards, hold_seconds=60)], at(60), covers_all)

    assert opened.opened_at == at(60)
    assert opened.evidence["condition_since"] == at(0).isoformat()
    assert opened.key == finding_key("gpu_memory_leak", forwards)
    assert tracker.update([held_memory(forwards, hold_seconds=60)], at(90), covers_all) == []
    assert len(tracker.open_findings()) == 1


def test_a_blind_evaluation_closes_nothing_and_holds_no_time():
    tracker = ConditionTracker()
    both = [held_memory(GPU0, hold_seconds=0), held_memory(GPU1, hold_seconds=60)]
    tracker.update(both, at(0), covers_all)
    tracker.update(both, at(30), covers_all)
    tracker.blind()
    tracker.blind()
    assert [f.subject for f in tracker.open_findings()] == [GPU0]
    # GPU1's hold starts over from the first evaluation that sees it again.
    assert tracker.update(both, at(90), covers_all) == []
    [opened] = tracker.update(both, at(150), covers_all)
    assert opened.subject == GPU1


def test_a_hold_is_timed_on_the_views_so_an_old_view_read_again_confirms_nothing():
    tracker = ConditionTracker()
    for seconds in (0, 30, 60, 90):  # the same view, taken at 0, evaluated again and again
        assert tracker.update([held_memory(hold_seconds=60)], at(seconds), covers_all, at(0)) == []
    [opened] = tracker.update([held_memory(hold_seconds=60)], at(95), covers_all, at(61))
    assert opened.opened_at == at(95)
