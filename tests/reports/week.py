"""A week of soak on the simulated cluster through the real controller: probes through a
weekday-peak window (10:00-12:00) and a night window (02:00-04:00) in Shanghai, node agents
sampling every node, and the week's incidents at known local times. Quiet hours pass in
five-minute steps, windows in five-second steps."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from pathlib import Path
from zoneinfo import ZoneInfo

from observer.clock import ManualClock
from observer.controller.compose import Sources
from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    GpuIdentity,
    GpuReading,
    GpuSample,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
)
from observer.fleet.local import LocalFleet
from observer.records import StoredAlert, StoredIntervention
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrate

SHANGHAI = ZoneInfo("Asia/Shanghai")
MONDAY = date(2026, 11, 30)
DAYS = [MONDAY + timedelta(days=i) for i in range(7)]
BUSY_STEP_SECONDS = 5.0
QUIET_STEP_SECONDS = 300.0
SNAPSHOT_SECONDS = 300.0
OBSERVE_SECONDS = 600.0


def local(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=SHANGHAI)


def settings_for(url: str, output_dir: Path, language: str = "en") -> Settings:
    return Settings.model_validate(
        {
            "controller": {
                "timezone": "Asia/Shanghai",
                "windows": [
                    {"name": "weekday-peak", "days": "mon-fri", "start": "10:00", "end": "12:00"},
                    {"name": "night", "days": "*", "start": "02:00", "end": "04:00"},
                ],
                "tenants": [
                    {"name": "research", "weight": 0.7},
                    {"name": "prod", "weight": 0.3, "quota_gpus": 6},
                ],
                "plan": [
                    {"window": "weekday-peak", "probe": "short", "every_seconds": 600},
                    {"window": "weekday-peak", "probe": "multi-gpu", "every_seconds": 1800},
                    {"window": "weekday-peak", "probe": "fail-exit", "every_seconds": 1800},
                    {"window": "weekday-peak", "probe": "fail-image", "every_seconds": 3600},
                    {"window": "weekday-peak", "probe": "log-canary", "every_seconds": 3600},
                    {
                        "window": "weekday-peak",
                        "probe": "quota",
                        "every_seconds": 2700,
                        "tenants": ["prod"],
                    },
                    {"window": "weekday-peak", "probe": "fairness", "every_seconds": 1800},
                    {"window": "night", "probe": "long", "every_seconds": 3600},
                    {"window": "night", "probe": "fairness", "every_seconds": 1800},
                    {"window": "night", "probe": "isolation", "every_seconds": 3600},
                ],
                "probes": {
                    "long": {"duration_seconds": 1500},
                    "log-canary": {"log_lines": 200, "log_interval_seconds": 0.1},
                },
                "gpus_per_node": 4,
                "max_probe_gpus": 32,
                "max_probe_gpus_per_tenant": 16,
                "follow_interval_seconds": BUSY_STEP_SECONDS,
                "snapshot_interval_seconds": SNAPSHOT_SECONDS,
                "observe_interval_seconds": OBSERVE_SECONDS,
                "gpu_sample_interval_seconds": 0,
                "logs": {"settle_seconds": 30},
                "simulation": {"nodes": 3, "gpus_per_node": 4, "pools": ["pool-a", "pool-b"]},
            },
            "storage": {"url": url},
            "reports": {
                "output_dir": str(output_dir),
                "language": language,
                # The week stores its alerts itself, as the alert poller would.
                "alertmanager_url": "http://alertmanager.invalid:9093",
            },
        }
    )


class Week:
    """The controller, its store, the simulated cluster and its agents on one manual clock."""

    def __init__(self, tmp_path: Path) -> None:
        self.url = f"sqlite:///{tmp_path / 'observer.db'}"
        self.settings = settings_for(self.url, tmp_path / "reports")
        migrate(self.url)
        self.store = Store(self.url)
        self.clock = ManualClock(local(MONDAY, 0))
        self.cluster = simulated_cluster(self.settings, self.clock)
        self._allocated_at: datetime | None = None
        self._allocation: dict[str, int] = {}
        self.fleet = LocalFleet({name: self._agent(name) for name in sorted(self.cluster.nodes)})
        self.schedule = SimulatedSoak(
            self.settings, self.clock, self.store, self.cluster, Sources(self.fleet)
        )
        self.controller = self.schedule.controller
        self.metrics = self.schedule.metrics
        # Every job the simulated cluster finished, per local day, as it listed them at the
        # day's end: what the reports' all-jobs figures must agree with.
        self.finished: dict[date, tuple[JobStatus, ...]] = {}

    def _agent(self, name: str) -> Callable[[], NodeSnapshot]:
        """A node agent's snapshot: as many GPUs busy as the scheduler last said were
        allocated on the node, at a utilisation that moves with the minute, each running a
        process of the job the scheduler last placed there."""

        def snapshot() -> NodeSnapshot:
            now = self.clock.now()
            busy = self._allocated(now).get(name, 0)
            minute = now.astimezone(SHANGHAI).minute
            owners = self._owners(name)
            gpus = []
            processes = []
            for i in range(4):
                if i < min(busy, len(owners)):
                    processes.append(
                        AttributedProcess(
                            i,
                            f"GPU-{name}-{i}",
                            1000 + i,
                            None,
                            True,
                            "python probe.py",
                            owners[i],
                            OwnerState(OwnerPhase.RUNNING),
                        )
                    )
                percent = 55 + (i * 13 + minute) % 45 if i < busy else 0
                gpus.append(
                    GpuReading(
                        index=i,
                        identity=GpuIdentity(i, f"GPU-{name}-{i}", "NVIDIA H200", None, None),
                        sample=GpuSample(at=now, index=i, utilization_gpu_percent=percent),
                        counters=None,
                        baseline_memory_bytes=None,
                    )
                )
            return NodeSnapshot(
                name, now, DriverStatus(DriverState.OK), tuple(gpus), tuple(processes), ()
            )

        return snapshot

    def _owners(self, name: str) -> list[Owner]:
        """The job of each GPU allocated on the node, in order, as the scheduler last said."""
        snapshot = self.controller.scheduler.get()
        owners: list[Owner] = []
        for job in snapshot.jobs if snapshot else ():
            if job.phase is JobPhase.RUNNING and name in job.nodes:
                owners += [Owner(OwnerKind.JOB, job.job_id)] * (job.gpus // len(job.nodes))
        return owners

    def _allocated(self, now: datetime) -> dict[str, int]:
        # Every agent is read at the same instant: the scheduler's state is read once.
        if self._allocated_at != now:
            self._allocation = {n.name: n.gpus_allocated for n in self.store.node_states(now)}
            self._allocated_at = now
        return self._allocation

    def _busy(self) -> bool:
        return bool(
            self.controller.calendar.windows_at(self.clock.now()) or self.controller.runner.active()
        )

    def _step(self) -> None:
        self.clock.advance(BUSY_STEP_SECONDS if self._busy() else QUIET_STEP_SECONDS)

    def run_until(self, until: datetime) -> None:
        self.schedule.run_for((until - self.clock.now()).total_seconds(), self._step)

    def play(self) -> None:
        """The whole week, Monday 00:00 to the next Monday 00:00, with its incidents."""
        tz = SHANGHAI
        incidents: list[tuple[datetime, Callable[[], None]]] = [
            # Tuesday: an alert fires in the peak; Watchdog fires every day and is ignored.
            (local(DAYS[1], 10, 30), lambda: self._alert("HighQueueWait", "warning", "q1")),
            # Wednesday: an operator drains node-001 for maintenance, recorded beforehand.
            (local(DAYS[2], 10, 25), lambda: self._record("alice", "PSU swap", "node-001")),
            (local(DAYS[2], 10, 30), lambda: self.cluster.drain("node-001", "PSU swap")),
            (local(DAYS[2], 11, 30), lambda: self.cluster.resume("node-001")),
            # Thursday: node-002 drained and resumed without a record; a probe job cancelled
            # by someone else.
            (local(DAYS[3], 10, 50), lambda: self.cluster.drain("node-002", "firmware")),
            (local(DAYS[3], 11, 20), lambda: self.cluster.resume("node-002")),
            (local(DAYS[3], 11, 0) + timedelta(seconds=30), self._cancel_one),
            # Friday: the scheduler's API is down for 40 minutes of the peak; two alerts.
            (local(DAYS[4], 10, 0), lambda: self._reachable(False)),
            (local(DAYS[4], 10, 5), lambda: self._alert("GPUNodeDown", "critical", "g1")),
            (local(DAYS[4], 10, 6), lambda: self._alert("HighQueueWait", "warning", "q1")),
            (local(DAYS[4], 10, 40), lambda: self._reachable(True)),
            # Saturday night: node-002's agent cannot be read for an hour; node-001's
            # scheduler accounting leaks a GPU for an hour.
            (local(DAYS[5], 2, 0), lambda: self.fleet.unreachable.add("node-002")),
            (local(DAYS[5], 3, 0), lambda: self.fleet.unreachable.discard("node-002")),
            (local(DAYS[5], 2, 30), lambda: self._leak("node-001", 1)),
            (local(DAYS[5], 3, 30), lambda: self._leak("node-001", 0)),
        ]
        incidents += [
            (local(day, 0, 10), lambda: self._alert("Watchdog", "none", "w")) for day in DAYS
        ]
        incidents += [
            (local(day + timedelta(days=1), 0), partial(self._finished_on, day)) for day in DAYS
        ]
        for at, act in sorted(incidents, key=lambda item: item[0]):
            self.run_until(at)
            act()
        self.run_until(datetime.combine(DAYS[-1] + timedelta(days=1), time(0), tzinfo=tz))
        # The listing after midnight that a controller makes long before the 08:00 build.
        self.controller.tally_jobs()

    def _finished_on(self, day: date) -> None:
        listing = self.cluster.finished_jobs(local(day, 0), local(day + timedelta(days=1), 0))
        assert listing.complete
        self.finished[day] = listing.jobs

    def _alert(self, name: str, severity: str, fingerprint: str) -> None:
        now = self.clock.now()
        self.store.save_alerts(
            [
                StoredAlert(
                    fingerprint=fingerprint,
                    name=name,
                    severity=severity,
                    starts_at=now,
                    ends_at=now + timedelta(minutes=15),
                    last_seen_at=now,
                    labels={"alertname": name, "severity": severity},
                    summary=f"{name} fired",
                )
            ]
        )

    def _record(self, by: str, reason: str, node: str) -> None:
        self.store.add_intervention(
            StoredIntervention(at=self.clock.now(), by=by, reason=reason, subject={"node": node})
        )

    def _cancel_one(self) -> None:
        held = [r.job_id for r in self.controller.runner.active() if r.job_id is not None]
        assert held, "a probe must be on the platform to be cancelled"
        self.cluster.cancel(held[0])

    def _reachable(self, up: bool) -> None:
        self.cluster.faults.reachable = up

    def _leak(self, node: str, gpus: int) -> None:
        if gpus:
            self.cluster.faults.leaked_gpus[node] = gpus
        else:
            self.cluster.faults.leaked_gpus.pop(node, None)


def to_utc(at: datetime) -> datetime:
    return at.astimezone(UTC)
