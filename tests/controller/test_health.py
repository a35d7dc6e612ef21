"""The controller's /healthz in words: each part's state (the follow loop, the scheduler, its
accounting, the store), a status that names each part not ok, and 503 only when the
controller can neither follow its probes nor keep what it sees."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from observer.controller.main import health_body

LIMITS = {"follow": 15.0, "scheduler": 90.0, "jobs": 1800.0}
FRESH = {"follow": 1.0, "scheduler": 10.0, "jobs": 100.0}
NONE: dict[str, None] = {"store": None, "scheduler": None, "accounting": None}


@dataclass(frozen=True)
class Down:
    error: str
    since: datetime = datetime(2026, 12, 7, tzinfo=UTC)


def test_every_part_fresh_is_ok():
    ok, body = health_body(FRESH, LIMITS, 3600, NONE)
    assert ok
    assert body["status"] == "ok"
    assert body["parts"] == {
        "follow": "ok",
        "scheduler": "ok",
        "accounting": "ok",
        "store": "ok",
    }
    assert body["blind"] == [] and body["errors"] == {}


def test_a_full_store_under_fresh_loops_says_the_store_is_failing_not_stale():
    ok, body = health_body(FRESH, LIMITS, 3600, {**NONE, "store": Down("database or disk is full")})
    assert not ok
    assert body["status"] == "store failing"
    assert body["blind"] == ["store"]
    assert body["errors"] == {"store": "database or disk is full"}
    assert body["store_error"] == "database or disk is full"


def test_an_accounting_outage_is_named_and_the_controller_still_serves():
    refused = "finished_jobs: sacct: error: Problem talking to the database: Connection refused"
    ok, body = health_body(FRESH, LIMITS, 3600, {**NONE, "accounting": Down(refused)})
    assert ok
    assert body["status"] == "accounting failing"
    assert body["parts"]["accounting"] == "failing"
    assert body["errors"] == {"accounting": refused}
    assert body["blind"] == ["accounting"]


def test_the_scheduler_is_named_itself_failing_or_stale_and_a_stuck_follow_loop_as_a_loop():
    ok, body = health_body(
        {**FRESH, "follow": 60.0}, LIMITS, 3600, {**NONE, "scheduler": Down("snapshot: timed out")}
    )
    assert not ok
    assert body["status"] == "follow loop stale, scheduler failing"
    assert body["blind"] == ["follow", "scheduler"]

    ok, body = health_body({**FRESH, "scheduler": 200.0}, LIMITS, 3600, NONE)  # a hang
    assert not ok
    assert body["status"] == "scheduler stale"


def test_the_first_accounting_listing_has_three_intervals_from_the_start():
    before_first = {**FRESH, "jobs": None}
    assert health_body(before_first, LIMITS, 60, NONE)[1]["parts"]["accounting"] == "ok"
    ok, body = health_body(before_first, LIMITS, 1801, NONE)
    assert ok and body["status"] == "accounting stale"


def test_loops_that_never_ticked_are_stale():
    ok, body = health_body({"follow": None, "scheduler": None, "jobs": None}, LIMITS, 0, NONE)
    assert not ok
    assert body["parts"]["follow"] == body["parts"]["scheduler"] == "stale"


def test_a_scheduler_hiding_other_users_jobs_is_named_partly_blind_and_still_serves():
    hidden = "slurmctld shows observer only its own jobs (PrivateData=jobs, AdminLevel None)"
    ok, body = health_body(FRESH, LIMITS, 3600, NONE, Down(hidden))
    assert ok
    assert body["status"] == "scheduler partly blind"
    assert body["parts"]["scheduler"] == "partly blind"
    assert body["errors"] == {"scheduler": hidden}

    ok, body = health_body(
        FRESH, LIMITS, 3600, {**NONE, "scheduler": Down("timed out")}, Down(hidden)
    )
    assert not ok
    assert body["status"] == "scheduler failing"
