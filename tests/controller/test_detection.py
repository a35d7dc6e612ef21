"""The controller's own detectors on its loops: a log canary read back after it ends and its
lost lines counted exactly; silence when nothing was lost or held up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.main import build_backend, build_controller
from observer.metrics import ControllerMetrics
from observer.settings import Settings
from observer.simulation.cluster import SimulatedCluster
from observer.simulation.driver import SteppedSchedule
from observer.storage.store import Store, upgrade

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LAUNCH = START + timedelta(seconds=600)  # the plan entry's first firing


class Soak:
    def __init__(self, tmp_path: Path) -> None:
        self.settings = Settings.model_validate(
            {
                "controller": {
                    "windows": [{"name": "always", "days": "*", "start": "00:00", "end": "00:00"}],
                    "plan": [
                        {
                            "window": "always",
                            "probe": "log-canary",
                            "every_seconds": 600,
                            "tenants": ["research"],
                        },
                        {"window": "always", "probe": "burst", "every_seconds": 300},
                    ],
                    "probes": {"log-canary": {"log_lines": 300, "log_interval_seconds": 0.1}},
                    "log_settle_seconds": 5,
                    "gpus_per_node": 4,
                    "simulation": {"nodes": 2, "gpus_per_node": 4, "pools": ["a"]},
                }
            }
        )
        self.clock = ManualClock(START)
        url = f"sqlite:///{tmp_path / 'observer.db'}"
        upgrade(url)
        self.store = Store(url)
        cluster = build_backend(self.settings.controller, self.clock)
        assert isinstance(cluster, SimulatedCluster)
        self.cluster = cluster
        self.metrics = ControllerMetrics(CollectorRegistry())
        controller = build_controller(self.settings, cluster, self.store, self.clock, self.metrics)
        controller.start()
        cfg = self.settings.controller
        self.schedule = SteppedSchedule(
            controller,
            self.clock,
            self.metrics.loops,
            cfg.follow_interval_seconds,
            cfg.snapshot_interval_seconds,
        )


def test_lines_lost_in_the_pipeline_are_counted_exactly_and_attributed_to_the_run(tmp_path: Path):
    soak = Soak(tmp_path)
    # Lines written from 10 s to 15 s into the canary (seq 100-149) never arrive.
    soak.cluster.faults.log_loss = [
        (LAUNCH + timedelta(seconds=10), LAUNCH + timedelta(seconds=15))
    ]
    soak.schedule.run_for(900)

    [canary] = soak.store.runs(probe="log-canary")
    [finding] = soak.store.findings(detector="log_loss")
    assert finding.kind.value == "event"
    assert finding.severity.value == "critical"
    assert finding.subject["run_id"] == canary.run_id
    assert finding.subject["tenant"] == canary.tenant
    assert finding.evidence["expected_lines"] == 300
    assert finding.evidence["missing_lines"] == 50
    [missing] = finding.evidence["missing_ranges"]
    assert (missing["first_seq"], missing["last_seq"]) == (100, 149)
    total = soak.metrics.findings.total.labels("log_loss", "critical")._value.get()
    assert total == 1


def test_a_clean_soak_raises_no_finding(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.schedule.run_for(1900)
    assert len(soak.store.runs(probe="log-canary")) == 3
    assert len(soak.store.runs(probe="burst")) > 10  # burst saturates the cluster: probes wait
    assert soak.store.findings() == []


def test_gpus_the_scheduler_holds_with_no_job_behind_them_open_a_condition_until_released(
    tmp_path: Path,
):
    soak = Soak(tmp_path)
    soak.schedule.run_for(120)
    soak.cluster.faults.leaked_gpus["node-001"] = 2  # counted allocated, no job holds them
    soak.schedule.run_for(30)
    assert soak.store.findings() == []  # within the 60 s grace
    soak.schedule.run_for(60)
    [leak] = soak.store.findings(open_only=True)
    assert leak.detector == "allocated_without_job"
    assert leak.subject == {"node": "node-001"}
    assert leak.evidence["excess_gpus"] == 2
    assert leak.evidence["layers"] == {"scheduler": "agrees", "node": "unknown"}

    soak.cluster.faults.leaked_gpus.clear()
    soak.schedule.run_for(60)
    assert soak.store.findings(open_only=True) == []
    [closed] = soak.store.findings()
    assert closed.closed_at is not None
