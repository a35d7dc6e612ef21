"""The inference probe on each real Slurm release, driven by the controller's own tasks in real
time: each replica a batch job running the node's `observer probe serve` on a port of its own, ready
once its job runs and its /healthz answers; its time to ready, /infer latency over real HTTP,
a scale-out to more GPUs than prod leaves free that waits in Slurm's words and opens
inference_scale_out_stalled until prod's job is cancelled, a rolling restart that replaces
every replica with none unavailable, and no job left once it stops."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from observer.clock import SystemClock
from observer.controller.compose import inference_spec
from observer.detectors.inference import SCALE_OUT_STALLED, UNAVAILABLE
from observer.records import PhaseKind
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmCluster, SlurmHarness, slurm_harness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings, on_slurm

LATENCY_MS = 20.0
STALL_SECONDS = 6
UNAVAILABLE_SECONDS = 4


def _free_ports(count: int) -> int:
    """The first of `count` free ports in a row: replicas serve on the service's port plus
    their ordinal."""
    for first in range(24000, 30000, count):
        held = [socket.socket() for _ in range(count)]
        try:
            for port, held_one in enumerate(held, first):
                held_one.bind(("0.0.0.0", port))
            return first
        except OSError:
            continue
        finally:
            for held_one in held:
                held_one.close()
    raise AssertionError("no free ports")


def _settings(slurm: SlurmHarness, started: datetime) -> Settings:
    return controller_settings(
        **on_slurm(slurm.settings),
        tenants=[{"name": "research", "queue": "gpu"}, {"name": "prod", "queue": "gpu"}],
        plan=[],
        gpus_per_node=4,
        follow_interval_seconds=1,
        snapshot_interval_seconds=5,
        inference={
            "enabled": True,
            "tenant": "research",
            "replicas": 1,
            "scale_out_replicas": 3,
            "gpus_per_replica": 2,
            "port": _free_ports(6),  # a rolling restart holds up to one more replica
            "latency_ms": LATENCY_MS,
            "warmup_seconds": 1,
            "interval_seconds": 1,
            "scale_out_after_seconds": 2,
            "restart_after_seconds": 2,
            "unavailable_max_seconds": UNAVAILABLE_SECONDS,
            "scale_out_max_wait_seconds": STALL_SECONDS,
        },
        reports={"soak_started_at": started.isoformat()},
    )


def test_a_service_of_slurm_jobs_scales_out_waiting_for_gpus_restarts_and_leaves_nothing(
    slurm_cluster: SlurmCluster, tmp_path: Path
):
    url = migrated_sqlite(tmp_path / "observer.db")
    with slurm_harness(slurm_cluster) as slurm, Store(url) as store:
        started = datetime.now(UTC)
        settings = _settings(slurm, started)
        spec = inference_spec(settings.controller)
        # prod holds two nodes' GPUs: of three replicas of two GPUs, the third has to wait
        prod = [
            slurm.cli(
                "sbatch", "--parsable", "--account=prod", "--gres=gpu:4", "--output=/dev/null",
                "--wrap=sleep 600",
            ).strip()
            for _ in range(2)
        ]  # fmt: skip
        slurm.settle(lambda: all(j.started_at for j in slurm.backend.snapshot().jobs), 20)
        soak = SimulatedSoak(settings, SystemClock(), store, slurm.backend)

        def step() -> None:
            time.sleep(0.25)

        def phase(kind: PhaseKind) -> bool:
            return any(p.kind is kind for p in store.inference_phases(started, datetime.now(UTC)))

        def run_until(done: Callable[[], bool], seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while not done() and time.monotonic() < deadline:
                soak.run_for(1, step)

        run_until(lambda: bool(store.findings(detector=SCALE_OUT_STALLED)), 30)
        waiting = slurm.backend.service_replicas(spec)
        slurm.cli("scancel", prod[0])
        freed_at = datetime.now(UTC)
        run_until(lambda: phase(PhaseKind.RESTART), 45)
        replicas = slurm.backend.service_replicas(spec)
        watch = soak.composition.inference
        assert watch is not None
        watch.stop()  # as the daemon does once its loops have stopped
        slurm.settle(
            lambda: not [j for j in slurm.backend.snapshot().jobs if j.tenant == "research"], 20
        )
        now = datetime.now(UTC)

    phases = {p.kind: p for p in store.inference_phases(started, now)}
    assert set(phases) == {PhaseKind.START, PhaseKind.SCALE_OUT, PhaseKind.RESTART}
    start = phases[PhaseKind.START]
    time_to_ready = (start.ready_at - start.started_at).total_seconds()
    assert 1 <= time_to_ready <= 15  # scheduled, started, warmed up, then its /healthz said so

    scale_out = phases[PhaseKind.SCALE_OUT]
    assert (scale_out.replicas_from, scale_out.replicas_to) == (1, 3)
    assert scale_out.pending_reason == "Resources"  # Slurm's own reason
    assert [r.pending_reason for r in waiting if not r.ready] == ["Resources"]
    waited = (freed_at - scale_out.started_at).total_seconds()
    assert waited > STALL_SECONDS
    assert waited - 2 <= scale_out.pending_seconds <= waited + 4

    [stalled] = [f for f in store.findings() if f.detector == SCALE_OUT_STALLED]
    opened_after = (stalled.opened_at - scale_out.started_at).total_seconds()
    assert STALL_SECONDS <= opened_after <= STALL_SECONDS + 2  # at its bound, to within a look
    assert stalled.closed_at is not None and stalled.closed_at >= freed_at
    assert stalled.evidence["pending_reason"] == "Resources"

    restart = phases[PhaseKind.RESTART]
    assert (restart.replicas_from, restart.replicas_to) == (3, 3)
    assert restart.unavailable_seconds <= UNAVAILABLE_SECONDS
    assert not [f for f in store.findings() if f.detector == UNAVAILABLE]
    # every replica replaced: three of the new revision, none of the jobs that waited
    assert [r.revision for r in replicas] == ["2"] * 3 and all(r.ready for r in replicas)
    assert not {r.name for r in replicas} & {r.name for r in waiting}
    assert len({r.address for r in replicas}) == 3  # one port each, on nodes they share

    samples = store.inference_samples(started, now)
    latencies = [ms for s in samples for ms in s.latencies_ms]
    assert len(latencies) > 10 and min(latencies) >= LATENCY_MS
    assert sum(s.errors for s in samples) == 0
    during_restart = [s for s in samples if restart.started_at <= s.at <= restart.ready_at]
    assert during_restart and all(s.requests > s.errors for s in during_restart)
    assert max(s.ready_replicas for s in during_restart) <= 3 + 1  # one replica of surge
