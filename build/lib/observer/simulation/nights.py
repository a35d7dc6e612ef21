"""Contended nights on the simulated cluster, the fairness detector's scenario: two tenants
(weights 0.7 and 0.3) on 3 x 4 GPUs, a night window 22:00-01:00 in Shanghai with fairness
probes every quarter of an hour, and each tenant topping its queue of one-GPU training jobs
back up to six once a minute inside the window, so that demand stays above capacity all
night. Played one night at a time through the production composition."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from observer.clock import ManualClock
from observer.domain import Finding, JobPhase, Workload
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.database import upgrade
from observer.storage.store import Store

FIRST_EVENING = datetime(2026, 11, 30, 13, 55, tzinfo=UTC)  # Monday 21:55 in Shanghai
BACKLOG_JOBS = 6
STEP_SECONDS = 5.0
# From 21:55: five minutes before the window, its three hours, half an hour for the last
# probes to start.
NIGHT_SECONDS = 5 * 60 + 3 * 3600 + 30 * 60


def night_settings(reports: Path) -> Settings:
    """`reports`: where the controller's daily summaries of the nights go."""
    return Settings.model_validate(
        {
            "controller": {
                "timezone": "Asia/Shanghai",
                "windows": [{"name": "night", "days": "*", "start": "22:00", "end": "01:00"}],
                "tenants": [
                    {"name": "research", "weight": 0.7},
                    {"name": "prod", "weight": 0.3},
                ],
                "plan": [{"window": "night", "probe": "fairness", "every_seconds": 900}],
                "gpus_per_node": 4,
                "max_probe_gpus": 8,
                "max_probe_gpus_per_tenant": 4,
                "follow_interval_seconds": 15,
                "snapshot_interval_seconds": 60,
                "simulation": {"nodes": 3, "gpus_per_node": 4, "pools": ["a"]},
            },
            "reports": {"output_dir": str(reports)},
        }
    )


class ContendedNights:
    def __init__(self, folder: Path, training: Callable[[], Workload]) -> None:
        """The store and reports in `folder`; `training` makes each training job."""
        self.settings = night_settings(folder / "reports")
        self.clock = ManualClock(FIRST_EVENING)
        url = f"sqlite:///{folder / 'observer.db'}"
        upgrade(url)
        self.store = Store(url, self.clock)
        self.cluster = simulated_cluster(self.settings, self.clock)
        self.soak = SimulatedSoak(self.settings, self.clock, self.store, self.cluster)
        self.controller = self.soak.controller
        self._training = training

    def night(self) -> list[Finding]:
        """One night from 21:55, then on to 21:55 the next evening (the quiet day between
        is skipped: the controller's tasks are due again from then). The findings that
        opened during the night."""
        evening = self.clock.now()
        self.soak.runner.restart()
        self.soak.run_for(NIGHT_SECONDS, self._step)
        self.clock.set(evening + timedelta(days=1))
        return [f for f in self.store.findings() if f.opened_at >= evening]

    def _step(self) -> None:
        self.clock.advance(STEP_SECONDS)
        in_window = self.controller.calendar.windows_at(self.clock.now())
        if int(self.clock.monotonic()) % 60 or not in_window:
            return
        queued = {"research": 0, "prod": 0}
        for job in self.cluster.snapshot().jobs:
            if job.run_id is None and job.phase is JobPhase.PENDING:
                queued[job.tenant] += 1
        for tenant, count in queued.items():
            for _ in range(BACKLOG_JOBS - count):
                self.cluster.submit_background(tenant, self._training())
