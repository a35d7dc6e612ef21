"""The one composition: every task the controller runs, declared once; a task whose source
is not configured is left out and says why; and no task waits on a submission that hangs."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from observer.alerting.base import FiringAlert
from observer.clock import ManualClock
from observer.controller.compose import Sources, checks_off, freshness_series
from observer.fleet.local import LocalFleet
from observer.monitoring.fake import FakePrometheus
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def _soak(
    tmp_path: Path, clock: ManualClock, sources: Sources | None = None, **simulation: object
) -> SimulatedSoak:
    settings = controller_settings(
        plan=[
            {"window": "always", "probe": "short", "every_seconds": 60},
            {"window": "always", "probe": "log-canary", "every_seconds": 600},
        ],
        simulation={"nodes": 2, "gpus_per_node": 4, **simulation},
        reports={"output_dir": str(tmp_path / "reports")},
    )
    url = migrated_sqlite(tmp_path / "observer.db")
    return SimulatedSoak(settings, clock, Store(url), simulated_cluster(settings, clock), sources)


def test_every_task_is_declared_once_in_the_order_a_step_runs_them(tmp_path: Path):
    clock = ManualClock(T0)
    sources = Sources(LocalFleet({}), FakePrometheus(clock), alerts=_NoAlerts())
    composition = _soak(tmp_path, clock, sources).composition

    assert [(t.name, t.planned) for t in composition.tasks] == [
        ("plan-short", True),
        ("plan-log-canary", True),
        ("alive", False),
        ("follow", False),
        ("detect", False),
        ("scheduler", False),
        ("fleet", False),
        ("monitoring", False),
        ("jobs", False),
        ("reports", False),
        ("store", False),
        ("alerts", False),
    ]
    assert composition.left_out == {}
    intervals = {t.name: t.interval_seconds for t in composition.tasks}
    assert intervals["plan-short"] == 60
    assert intervals["follow"] == intervals["detect"] == 5  # the defaults
    assert intervals["scheduler"] == 30
    assert intervals["fleet"] == 15
    assert intervals["store"] == 3600


def test_a_task_whose_source_is_not_configured_is_left_out_with_the_setting_to_set(
    tmp_path: Path,
):
    composition = _soak(tmp_path, ManualClock(T0)).composition

    names = [t.name for t in composition.tasks]
    assert "monitoring" not in names and "alerts" not in names
    assert set(composition.left_out) == {"monitoring", "alerts"}
    assert "controller.prometheus_url" in composition.left_out["monitoring"]
    assert "reports.alertmanager_url" in composition.left_out["alerts"]


def test_each_run_records_the_sources_it_was_set_up_to_read(tmp_path: Path):
    clock = ManualClock(T0)
    store = _soak(tmp_path, clock, Sources(LocalFleet({}), FakePrometheus(clock))).store
    settings = controller_settings(
        plan=[], logs={"reader": "none"}, reports={"output_dir": str(tmp_path)}
    )
    composed = Sources(LocalFleet({"node-1": _no_snapshot}), alerts=_NoAlerts())
    SimulatedSoak(settings, clock, store, simulated_cluster(settings, clock), composed)

    # The settings' log reader is the pod logs by default; no agent answers in the first.
    assert [r.watching for r in store.controller_runs()] == [
        ("prometheus", "logs"),
        ("agents", "alerts"),
    ]


def _no_snapshot() -> None:
    raise AssertionError("not read at start")


def test_a_hung_submission_holds_up_no_task_but_the_follow_loop(tmp_path: Path):
    clock = ManualClock(T0)
    prometheus = FakePrometheus(clock)
    soak = _soak(tmp_path, clock, Sources(LocalFleet({}), prometheus), submit_hang_seconds=1.5)
    clock.advance(60)
    tasks = {t.name: t for t in soak.composition.tasks}
    tasks["plan-short"].tick()  # the launch is queued for the follow loop
    follow = threading.Thread(target=tasks["follow"].tick, daemon=True)
    follow.start()
    time.sleep(0.3)
    assert follow.is_alive()  # inside the hung submission

    for name in ("detect", "scheduler", "fleet", "monitoring", "jobs", "reports"):
        began = time.monotonic()
        tasks[name].tick()
        assert time.monotonic() - began < 1, name
    assert soak.controller.runner.active() == ()  # what /v1/snapshot serves, at once
    follow.join(10)
    assert not follow.is_alive()
    assert [r.probe for r in soak.controller.runner.active()] == ["short", "short"]


class _NoAlerts:
    def firing(self) -> list[FiringAlert]:
        return []


def test_the_freshness_check_watches_the_agents_series_only_when_agents_are_configured():
    alone = Settings.model_validate({"controller": {"heartbeat_labels": {"job": "observer"}}})
    fleet = Settings.model_validate({"controller": {"agent_urls": ["http://node-001:9400"]}})
    chosen = Settings.model_validate(
        {
            "controller": {"agent_dns_name": "agents.observer.svc"},
            "detectors": {"monitoring_lag": {"freshness_series": ["up"]}},
        }
    )

    assert freshness_series(alone) == ('observer_heartbeat_timestamp_seconds{job="observer"}',)
    assert freshness_series(fleet) == ("observer_heartbeat_timestamp_seconds{}", "observer_gpu_up")
    assert freshness_series(chosen) == ("up",)  # an explicit setting wins
    assert "freshness of agent series" in checks_off(alone)
    assert "freshness of agent series" not in checks_off(fleet)


def test_the_inference_probe_on_a_backend_that_runs_no_services_is_left_out_and_said_so(
    tmp_path: Path,
):
    settings = Settings.model_validate({"controller": {"inference": {"enabled": True}}})
    url = migrated_sqlite(tmp_path / "observer.db")
    clock = ManualClock(T0)
    with Store(url) as store:
        soak = SimulatedSoak(settings, clock, store, simulated_cluster(settings, clock))

    why = "controller.backend simulated cannot run the inference probe's service yet"
    assert soak.composition.left_out["inference"] == why
    assert soak.composition.inference is None
    assert "inference" not in [t.name for t in soak.composition.tasks]
    assert checks_off(settings)["inference"] == why
    for platform in ("kubernetes", "slurm"):
        running = {"backend": platform, "inference": {"enabled": True}}
        assert "inference" not in checks_off(Settings.model_validate({"controller": running}))
    assert "inference" not in checks_off(Settings())  # off by default: nothing to say
