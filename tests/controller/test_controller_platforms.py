"""The same plan on the real platforms: Slurm for real, Kubernetes over the API emulator.
Short, multi-GPU, failing and burst probes for two tenants run through a window; the runs
carry the platform's waits, reasons and outcomes; a controller that dies in the middle and
starts again loses, leaks and double-counts nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from observer.clock import Clock, SystemClock
from observer.controller.work import Controller
from observer.domain import Outcome, ProbeRun, RunState
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests import components
from tests.backends.k8s_harness import KubernetesHarness
from tests.backends.slurm_harness import SlurmHarness, slurm_harness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

PLAN = [
    {"window": "always", "probe": "short", "every_seconds": 6},
    {"window": "always", "probe": "multi-gpu", "every_seconds": 12},
    {"window": "always", "probe": "fail-exit", "every_seconds": 15},
    {"window": "always", "probe": "burst", "every_seconds": 20},
]
PROBES = {
    "short": {"duration_seconds": 3},
    "multi-gpu": {"duration_seconds": 5},
    "fail-exit": {"duration_seconds": 1},
    "burst": {"duration_seconds": 4, "copies": 3},
}


def _settings(backend: str, queue: str | None) -> Settings:
    tenants = [
        {"name": "research", "weight": 0.7, "queue": queue},
        {"name": "prod", "weight": 0.3, "queue": queue},
    ]
    return controller_settings(
        backend=backend,
        tenants=tenants,
        plan=PLAN,
        probes=PROBES,
        gpus_per_node=4,
        max_probe_gpus=24,
        max_probe_gpus_per_tenant=12,
        follow_interval_seconds=1,
        snapshot_interval_seconds=5,
    )


class Platform:
    """A scheduler backend to drive, its clock, what one step of time is, and the platform's
    own record of a job's submit and start times, read independently of the backend."""

    name: str
    waiting_reasons: frozenset[str]
    harness: Any
    clock: Clock
    step: Callable[[], object]

    def platform_times(self, job_ids: list[str]) -> dict[str, tuple[datetime, datetime | None]]:
        raise NotImplementedError


class SlurmPlatform(Platform):
    name = "slurm"
    waiting_reasons = frozenset({"Resources", "Priority"})

    def __init__(self, harness: SlurmHarness) -> None:
        self.harness = harness
        self.clock = SystemClock()
        self.step = lambda: time.sleep(0.5)

    def platform_times(self, job_ids: list[str]) -> dict[str, tuple[datetime, datetime | None]]:
        out = self.harness.cli(
            "sacct",
            "-X",
            "-n",
            "-P",
            "--format=JobIDRaw,Submit,Start",
            "-j",
            ",".join(job_ids),
            env={"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"},
        )
        times = {}
        for line in out.splitlines():
            job, submit, start = line.split("|")
            started = datetime.fromtimestamp(int(start), UTC) if start.isdigit() else None
            times[job] = (datetime.fromtimestamp(int(submit), UTC), started)
        return times


class KubernetesPlatform(Platform):
    name = "kubernetes"
    waiting_reasons = frozenset({"Unschedulable"})

    def __init__(self, harness: KubernetesHarness) -> None:
        self.harness = harness
        self.clock = harness.clock
        self.step = harness.step

    def platform_times(self, job_ids: list[str]) -> dict[str, tuple[datetime, datetime | None]]:
        times = {}
        for job_id in job_ids:
            namespace, name = job_id.split("/", 1)
            job = self.harness.batch.read_namespaced_job(name, namespace)
            starts = [
                s.state.running.started_at
                if s.state.running
                else s.state.terminated.started_at
                if s.state.terminated
                else None
                for pod in self.harness.pods_of(job_id)
                for s in pod.status.container_statuses or []
            ]
            started = max((s for s in starts if s), default=None)
            times[job_id] = (job.metadata.creation_timestamp, started)
        return times


@contextmanager
def _platform(name: str) -> Iterator[Platform]:
    if name == "slurm":
        with slurm_harness() as slurm:
            yield SlurmPlatform(slurm)
    else:
        with KubernetesHarness(overrides={"ttl_seconds_after_finished": 3600}) as k8s:
            yield KubernetesPlatform(k8s)


@pytest.fixture(params=components.params("slurm", "kubernetes"))
def platform(request: pytest.FixtureRequest) -> Iterator[Platform]:
    with _platform(request.param) as p:
        yield p


def _start(
    platform: Platform, store: Store, settings: Settings
) -> tuple[Controller, SimulatedSoak]:
    """The production composition over the real platform, stepped in real time."""
    soak = SimulatedSoak(settings, platform.clock, store, platform.harness.backend)
    return soak.controller, soak


def _drain(platform: Platform, controller: Controller, seconds: float) -> None:
    deadline = platform.clock.monotonic() + seconds
    while controller.runner.active() and platform.clock.monotonic() < deadline:
        controller.follow()
        platform.step()


def test_a_plan_runs_through_a_window_and_survives_a_restart(platform: Platform, tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    settings = _settings(platform.name, platform.harness.queue)

    controller, schedule = _start(platform, store, settings)
    schedule.run_for(25, platform.step)
    in_flight = {r.run_id for r in controller.runner.active()}
    # The controller dies without shutting down; a new one takes over the same store.
    controller, schedule = _start(platform, store, settings)
    schedule.run_for(25, platform.step)
    _drain(platform, controller, 90)

    runs = store.runs()
    by_probe: dict[str, list[ProbeRun]] = {}
    for run in runs:
        by_probe.setdefault(run.probe, []).append(run)
    assert set(by_probe) == {"short", "multi-gpu", "fail-exit", "burst"}
    assert len({r.run_id for r in runs}) == len(runs)
    assert all(r.state is RunState.DONE for r in runs), [
        r for r in runs if r.state is not RunState.DONE
    ]
    assert not [r for r in runs if r.outcome in (Outcome.LOST, Outcome.TIMED_OUT)]
    assert platform.harness.backend.probe_jobs() == []
    assert in_flight <= {r.run_id for r in runs}

    for probe in ("short", "multi-gpu", "burst"):
        assert {r.outcome for r in by_probe[probe]} == {Outcome.PASSED}, by_probe[probe]
    for run in by_probe["fail-exit"]:
        assert run.outcome is Outcome.PASSED
        assert run.exit_code == 3
        assert run.reason  # the platform's own word for the failure

    # The runs' waits are the platform's: submit and start as the platform recorded them.
    started = [r for r in runs if r.started_at and r.job_id]
    truth = platform.platform_times([r.job_id for r in started if r.job_id])
    for run in started:
        submitted, began = truth[run.job_id or ""]
        assert run.submitted_at == submitted
        assert run.started_at == began
    # Saturation made some probe wait, and the platform's reason was captured with a duration.
    waited = [r for r in runs if r.pending_reasons and sum(r.pending_reasons.values()) > 0]
    assert waited, "burst and multi-GPU probes on 12 GPUs must make some probe wait"
    reasons = {reason for r in waited for reason in r.pending_reasons}
    assert reasons & platform.waiting_reasons, reasons
    store.close()
