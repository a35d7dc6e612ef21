"""The store keeps every field of a probe run, updates a run in place as it progresses, and
reads runs back by submission period, state, probe and tenant."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from observer.domain import Expectation, Outcome, ProbeRun, RunState
from observer.storage.store import Store

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
BEIJING = timezone(timedelta(hours=8))


def submitted(
    run_id: str, at: datetime, *, probe: str = "smoke", tenant: str = "team-a"
) -> ProbeRun:
    """A run the platform has accepted and not yet started."""
    return ProbeRun(
        run_id=run_id,
        probe=probe,
        tenant=tenant,
        queue="gpu",
        window="weekday-peak",
        expectation=Expectation.SUCCEED,
        gpus=8,
        nodes=1,
        state=RunState.PENDING,
        job_id=f"job-{run_id}",
        submitted_at=at,
    )


def finished(run: ProbeRun, started_after: timedelta, ran_for: timedelta) -> ProbeRun:
    assert run.submitted_at is not None
    started_at = run.submitted_at + started_after
    return replace(
        run,
        state=RunState.DONE,
        started_at=started_at,
        finished_at=started_at + ran_for,
        outcome=Outcome.PASSED,
        exit_code=0,
    )


def test_a_run_comes_back_with_every_field_and_times_in_utc(store: Store) -> None:
    saved = ProbeRun(
        run_id="run-1",
        probe="oom-check",
        tenant="team-b",
        queue=None,
        window=None,
        expectation=Expectation.OOM,
        gpus=16,
        nodes=2,
        state=RunState.DONE,
        job_id="4242",
        submitted_at=datetime(2025, 3, 1, 16, 0, 0, 250000, tzinfo=BEIJING),
        started_at=datetime(2025, 3, 1, 16, 1, 30, 250000, tzinfo=BEIJING),
        finished_at=datetime(2025, 3, 1, 16, 11, 30, 250000, tzinfo=BEIJING),
        outcome=Outcome.FAILED,
        exit_code=137,
        reason="OutOfMemory",
        message="容器因内存超限被终止 (exit 137)",
        pending_reasons={"Resources": 60.0, "Priority": 30.5},
        node_names=("gpu-07", "gpu-08"),
    )

    store.save_runs([saved])
    loaded = store.run("run-1")

    assert loaded == saved
    assert loaded is not None
    assert isinstance(loaded.expectation, Expectation)
    assert isinstance(loaded.state, RunState)
    assert isinstance(loaded.outcome, Outcome)
    assert loaded.submitted_at is not None
    assert loaded.submitted_at.tzinfo is UTC
    assert loaded.submitted_at == datetime(2025, 3, 1, 8, 0, 0, 250000, tzinfo=UTC)
    assert loaded.queue_wait_seconds == 90.0
    assert loaded.run_seconds == 600.0


def test_a_run_not_yet_answered_comes_back_with_its_unknowns_as_none(store: Store) -> None:
    asked = ProbeRun(
        run_id="run-1",
        probe="smoke",
        tenant="team-a",
        queue="gpu",
        window="night",
        expectation=Expectation.SUCCEED,
        gpus=1,
        nodes=1,
        state=RunState.SUBMITTED,
    )

    store.save_runs([asked])

    assert store.run("run-1") == asked
    assert store.run("run-2") is None


def test_saving_a_run_again_updates_it_instead_of_adding_a_second(store: Store) -> None:
    active = replace(submitted("run-1", T0), pending_reasons={"Resources": 30.0})
    store.save_runs([active])

    done = finished(
        replace(active, pending_reasons={"Resources": 45.0}),
        started_after=timedelta(seconds=45),
        ran_for=timedelta(minutes=1),
    )
    store.save_runs([done])

    assert store.runs() == [done]
    assert store.runs(active_only=True) == []


def test_one_batch_may_carry_several_versions_of_a_run_and_the_last_wins(store: Store) -> None:
    active = submitted("run-1", T0)
    done = finished(active, started_after=timedelta(seconds=5), ran_for=timedelta(minutes=1))

    store.save_runs(iter([active, done]))

    assert store.runs() == [done]


def test_saving_no_runs_saves_nothing(store: Store) -> None:
    store.save_runs([])

    assert store.runs() == []


def test_runs_are_ordered_by_submission_with_runs_not_yet_submitted_last(store: Store) -> None:
    minute = timedelta(minutes=1)
    late = submitted("run-a", T0 + 2 * minute)
    early = submitted("run-z", T0)
    tie_b = submitted("run-c", T0 + minute)
    tie_a = submitted("run-b", T0 + minute)
    unsubmitted = replace(submitted("run-0", T0), state=RunState.SUBMITTED, submitted_at=None)
    store.save_runs([unsubmitted, late, tie_b, early, tie_a])

    assert store.runs() == [early, tie_a, tie_b, late, unsubmitted]


def test_the_first_submission_is_the_earliest_of_the_runs_submitted(store: Store) -> None:
    assert store.first_submitted_at() is None
    unsubmitted = replace(submitted("run-0", T0), state=RunState.SUBMITTED, submitted_at=None)
    store.save_runs([unsubmitted])
    assert store.first_submitted_at() is None

    store.save_runs([submitted("run-a", T0 + timedelta(hours=1)), submitted("run-z", T0)])

    assert store.first_submitted_at() == T0


def test_since_and_until_keep_runs_submitted_in_the_half_open_period(store: Store) -> None:
    hour = timedelta(hours=1)
    before, at_since, inside, at_until = (submitted(f"run-{i}", T0 + i * hour) for i in range(4))
    unsubmitted = replace(submitted("run-x", T0), state=RunState.SUBMITTED, submitted_at=None)
    store.save_runs([before, at_since, inside, at_until, unsubmitted])

    since, until = T0 + hour, T0 + 3 * hour
    assert store.runs(since=since, until=until) == [at_since, inside]
    assert store.runs(since=since.astimezone(BEIJING)) == [at_since, inside, at_until]
    assert store.runs(until=until) == [before, at_since, inside]


def test_runs_can_be_read_by_state_probe_and_tenant_together(store: Store) -> None:
    done = finished(
        submitted("run-1", T0), started_after=timedelta(seconds=1), ran_for=timedelta(minutes=1)
    )
    pending = submitted("run-2", T0 + timedelta(minutes=1))
    running = replace(
        submitted("run-3", T0 + timedelta(minutes=2), probe="log-canary", tenant="team-b"),
        state=RunState.RUNNING,
        started_at=T0 + timedelta(minutes=3),
    )
    other_tenant = submitted("run-4", T0 + timedelta(minutes=3), tenant="team-b")
    store.save_runs([done, pending, running, other_tenant])

    assert store.runs(active_only=True) == [pending, running, other_tenant]
    assert store.runs(tenant="team-b") == [running, other_tenant]
    assert store.runs(probe="smoke") == [done, pending, other_tenant]
    assert store.runs(active_only=True, probe="smoke", tenant="team-a") == [pending]
    assert store.runs(tenant="team-c") == []


def test_a_run_with_a_naive_time_is_refused_as_a_programming_error(store: Store) -> None:
    naive = submitted("run-1", datetime(2025, 3, 1, 8))

    with pytest.raises(ValueError, match="naive datetime"):
        store.save_runs([naive])

    assert store.runs() == []
