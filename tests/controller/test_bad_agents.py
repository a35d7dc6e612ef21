"""Bad agents read over real HTTP by the controller: after the grace each is one open
agent_unreachable condition with its reason, the good agents none, and a bad agent fixed
has its condition closed."""

from __future__ import annotations

import json
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.observe import FleetObserver
from observer.fleet.http import HttpFleet
from observer.metrics import ControllerMetrics
from observer.storage.store import Store
from tests.fleet.raw_agents import (
    Agent,
    Answer,
    body,
    endless,
    good,
    serving,
    silent,
    snapshot_json,
    trickled,
)
from tests.support.databases import migrated_sqlite

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
GRACE_SECONDS = 30
DEADLINE_SECONDS = 0.5

BAD: dict[str, tuple[Answer, str]] = {
    "garbage": (body(b"\x00\x01garbage"), "snapshot is not JSON"),
    "endless": (endless, "snapshot larger than 65536 bytes"),
    "trickled": (trickled, "no whole answer within 0.5 s"),
    "silent": (silent, "no whole answer within 0.5 s"),
    "wrong_shape": (
        body(json.dumps({**snapshot_json("n9"), "node": 3}).encode()),
        "snapshot field node: expected string, got int",
    ),
    "server_error": (body(b"", "500 Internal Server Error"), "answered HTTP 500"),
}


def test_each_bad_agent_is_one_open_condition_with_its_reason_until_it_answers_well(
    tmp_path: Path,
) -> None:
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    clock = ManualClock(START)
    with ExitStack() as stack:
        goods = [stack.enter_context(serving(good(f"n{i}"))) for i in range(3)]
        bad: dict[str, Agent] = {
            name: stack.enter_context(serving(answer)) for name, (answer, _) in BAD.items()
        }
        fleet = HttpFleet(
            [a.url for a in [*goods, *bad.values()]],
            read_timeout_seconds=DEADLINE_SECONDS,
            max_snapshot_bytes=65536,
        )
        metrics = ControllerMetrics(CollectorRegistry())
        observer = FleetObserver(fleet, store, clock, metrics, GRACE_SECONDS)
        for _ in range(4):
            observer.observe()
            clock.advance(GRACE_SECONDS / 3)

        open_by_agent = {f.subject["agent"]: f for f in store.findings(open_only=True)}
        assert sorted(open_by_agent) == sorted(a.url for a in bad.values())
        assert all(f.detector == "agent_unreachable" for f in open_by_agent.values())
        for name, agent in bad.items():
            error = open_by_agent[agent.url].evidence["error"]
            assert error.startswith(f"agent {agent.url}: {BAD[name][1]}"), error
        assert len(store.findings()) == len(bad)

        fixed = bad["silent"]
        fixed.answer = good("fixed")
        observer.observe()

    [closed] = [f for f in store.findings() if not f.is_open]
    assert closed.subject == {"agent": fixed.url}
    assert closed.closed_at == clock.now()
    assert len(store.findings(open_only=True)) == len(bad) - 1
    store.close()
