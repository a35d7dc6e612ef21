"""The controller's own runs: each start a row, alive and stopped recorded on it, and the
downtime between two runs read back with its cause."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from observer.records import ControllerRestart, ControllerRun, RestartCause, controller_restarts
from observer.storage.database import upgrade
from observer.storage.store import Store
from tests.support.times import seconds_after

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
at = seconds_after(T0)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    upgrade(db_url)
    with Store(db_url) as opened:
        yield opened


def test_runs_are_kept_in_start_order_with_their_last_sign_of_life_and_clean_stop(store: Store):
    killed = store.start_controller_run(at(0), "host-a", 11, ("agents", "prometheus"))
    store.controller_alive(killed.id, at(50))
    stopped = store.start_controller_run(at(104), "host-a", 12, ())
    store.controller_stopped(stopped.id, at(200))
    running = store.start_controller_run(at(230), "host-b", 13, ("agents",))

    runs = store.controller_runs()
    assert runs == [
        ControllerRun(killed.id, at(0), at(50), "host-a", 11, watching=("agents", "prometheus")),
        ControllerRun(stopped.id, at(104), at(200), "host-a", 12, stopped_at=at(200), watching=()),
        ControllerRun(running.id, at(230), at(230), "host-b", 13, watching=("agents",)),
    ]
    assert store.controller_runs(until=at(104)) == runs[:1]
    assert controller_restarts(runs) == [
        ControllerRestart(at(50), at(104), RestartCause.KILLED),
        ControllerRestart(at(200), at(230), RestartCause.STOPPED),
    ]
