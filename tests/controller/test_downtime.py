"""The observer's own downtime: a controller that dies (or stops) and starts again over the
same store is a restart event in the daily summary, down from its last sign of life up to
the next start, with its cause, and every second in between is the controller's blind time;
and with no agents configured the freshness check watches only the controller's heartbeat,
so a healthy Prometheus opens nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from observer.clock import ManualClock
from observer.controller.compose import Sources
from observer.fleet.local import LocalFleet
from observer.metrics import HEARTBEAT_METRIC
from observer.monitoring.fake import FakePrometheus
from observer.records import ControllerRestart, RestartCause
from observer.reports.compute.daily import DailyReport, build_daily
from observer.reports.inputs import load_daily
from observer.reports.publish import write_daily
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
NEXT_DAY = T0 + timedelta(days=1)
DAY_END = datetime(2026, 12, 1, tzinfo=UTC)  # the daily summary's, in UTC
STEP_SECONDS = 5.0


class Platform:
    """The simulated cluster with no node agent and a scripted Prometheus scraping the
    controller's heartbeat, which outlive the controllers started over them."""

    def __init__(self, tmp_path: Path) -> None:
        self.settings = controller_settings(
            plan=[{"window": "always", "probe": "fairness", "every_seconds": 300}],
            simulation={"nodes": 3, "gpus_per_node": 4, "pools": ["a"]},
            prometheus_url="http://prometheus.invalid:9090",
            alive_interval_seconds=STEP_SECONDS,
            reports={"output_dir": str(tmp_path / "reports"), "soak_started_at": T0},
        )
        self.clock = ManualClock(T0)
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        self.cluster = simulated_cluster(self.settings, self.clock)
        self.prometheus = FakePrometheus(self.clock)
        self.prometheus.add_target(
            "observer-controller",
            "controller:9401",
            lambda at: [(HEARTBEAT_METRIC, {}, at.timestamp())],
        )

    def controller(self) -> SimulatedSoak:
        """A controller process started over the platform: nothing kept in memory."""
        return SimulatedSoak(
            self.settings,
            self.clock,
            self.store,
            self.cluster,
            Sources(LocalFleet({}), self.prometheus),
        )

    def run(self, soak: SimulatedSoak, seconds: float) -> None:
        soak.run_for(seconds, partial(self.clock.advance, STEP_SECONDS))

    def down_for(self, seconds: float) -> datetime:
        """Let the clock run on until `seconds` after the last run's last sign of life;
        returns that instant."""
        last = self.store.controller_runs()[-1].last_alive_at
        self.clock.advance(seconds - (self.clock.now() - last).total_seconds())
        return last

    def daily(self) -> DailyReport:
        return build_daily(load_daily(self.store, self.settings, T0.date(), NEXT_DAY))


def test_a_killed_controller_is_a_restart_event_and_its_downtime_blind_time(tmp_path: Path):
    platform = Platform(tmp_path)
    first = platform.controller()
    platform.run(first, 120)
    down_from = platform.down_for(54)  # the first one is simply never stepped again
    up_at = platform.clock.now()
    second = platform.controller()
    platform.run(second, 120)

    blind = platform.daily().figures.blind
    assert blind.restarts == (ControllerRestart(down_from, up_at, RestartCause.KILLED),)
    assert up_at - down_from == timedelta(seconds=54)  # under the snapshot-gap rule
    # The second is never stepped again either: not running from its last sign of life on,
    # to the end of the day, without a restart.
    gone = platform.store.controller_runs()[-1].ended_at
    assert [(p.start, p.end, p.cause) for p in blind.periods if p.source == "controller"] == [
        (down_from, up_at, "killed_or_crashed"),
        (gone, DAY_END, "killed_or_crashed"),
    ]
    assert blind.by_source["controller"] == 54 + (DAY_END - gone).total_seconds()

    markdown = write_daily(platform.store, platform.settings, T0.date(), NEXT_DAY)[0]
    text = markdown.read_text()
    assert "Observer restarts" in text
    assert "killed or crashed" in text


def test_a_clean_stop_then_a_start_is_a_restart_that_stopped(tmp_path: Path):
    platform = Platform(tmp_path)
    first = platform.controller()
    platform.run(first, 120)
    first.controller.stop()  # what the daemon does on SIGTERM
    stopped = platform.store.controller_runs()[-1].stopped_at
    assert stopped is not None
    platform.clock.advance(30)
    second = platform.controller()
    platform.run(second, 60)

    blind = platform.daily().figures.blind
    assert blind.restarts == (
        ControllerRestart(stopped, stopped + timedelta(seconds=30), RestartCause.STOPPED),
    )
    gone = platform.store.controller_runs()[-1].ended_at
    assert blind.by_source["controller"] == 30 + (DAY_END - gone).total_seconds()


def test_with_no_agents_configured_a_healthy_prometheus_opens_no_freshness_condition(
    tmp_path: Path,
):
    platform = Platform(tmp_path)
    soak = platform.controller()
    platform.run(soak, 600)

    assert [f for f in platform.store.findings() if f.detector == "monitoring_lag"] == []
    assert soak.composition.lag is not None
    readings = platform.prometheus
    assert readings.query(f"time() - timestamp({HEARTBEAT_METRIC}{{}})")  # watched, and fresh
