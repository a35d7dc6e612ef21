"""The demo's GPU faults through the whole product: the real agents over the demo nodes, the
real controller over the simulated cluster. A GPU that falls off the bus is an Xid and a lost
GPU on its node's next tick, fails the job on it, and leaves its node in service for the
controller to find; an ECC burst and a thermal slowdown open their GPU's conditions; a
stretch without faults opens none of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.demo.nodes import DemoNodes
from observer.domain import Behaviour, Finding, GpmActivity, JobPhase, NodeSnapshot, Workload
from observer.fleet.local import LocalFleet
from observer.reports.compute.causes import Cause, classify
from observer.reports.compute.notes import Note
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
NODE = "node-000"
STEP_SECONDS = 5.0  # the demo's busy step, and its agents' tick
GPU_FAULT_DETECTORS = {
    "gpu_xid",
    "gpu_lost",
    "gpu_ecc_uncorrected",
    "gpu_row_remap_pending",
    "gpu_clock_slowdown",
    "unhealthy_gpu_in_service",
}


class World:
    """One node of four GPUs, a gpu-busy probe every five minutes (the first at 300 s)."""

    def __init__(self, tmp_path: Path) -> None:
        self.settings = controller_settings(
            plan=[{"window": "always", "probe": "gpu-busy", "every_seconds": 300}],
            gpus_per_node=4,
            simulation={"nodes": 1, "gpus_per_node": 4, "pools": ["a"]},
        )
        self.clock = ManualClock(START)
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        self.cluster = simulated_cluster(self.settings, self.clock)
        self.nodes = DemoNodes(
            self.cluster,
            self.clock,
            4,
            self.settings.detectors.node,
            self.settings.detectors.gpu_health,
        )
        self.soak = SimulatedSoak(
            self.settings,
            self.clock,
            self.store,
            self.cluster,
            Sources(LocalFleet(self.nodes.snapshots)),
            agents=[Task("nodes", STEP_SECONDS, self.nodes.tick)],
        )

    def run_for(self, seconds: float) -> None:
        self.soak.run_for(seconds, partial(self.clock.advance, STEP_SECONDS))

    def snapshot(self) -> NodeSnapshot:
        snapshot = self.nodes.snapshots[NODE]()
        assert snapshot is not None
        return snapshot

    def agent_findings(self, detector: str) -> list[Finding]:
        return [f for f in self.snapshot().findings if f.detector == detector]

    def training(self, gpus: int = 2) -> str:
        """A tenant's training job for the rest of the test."""
        work = Workload(gpus_per_node=gpus, duration_seconds=6 * 3600, behaviour=Behaviour.SLEEP)
        return self.cluster.submit_background("research", work)


def _fallen(tmp_path: Path) -> tuple[World, int, str | None]:
    """A world whose first gpu-busy probe's GPU fell off the bus 10 s into the probe, and the
    agents ticked once since."""
    world = World(tmp_path)
    world.run_for(310)
    gpu = world.nodes.busy_gpu(NODE, probe=True)
    assert gpu is not None
    failed = world.nodes.gpu_fall_off(NODE, gpu)
    world.run_for(STEP_SECONDS)
    return world, gpu, failed


def test_a_gpu_that_falls_off_the_bus_is_an_xid_79_and_a_lost_gpu_within_one_tick(
    tmp_path: Path,
):
    world, gpu, _ = _fallen(tmp_path)

    [xid] = world.agent_findings("gpu_xid")
    assert xid.evidence["xid"] == 79
    assert xid.evidence["fatal"] is True
    assert xid.evidence["gpu_index"] == gpu
    assert xid.evidence["gpu_uuid"] == f"GPU-{NODE}-{gpu}"
    [lost] = world.agent_findings("gpu_lost")
    assert lost.is_open
    assert lost.subject == {"node": NODE, "gpu": str(gpu)}


def test_the_nodes_exporter_shows_the_fallen_gpu_down_and_no_utilisation_of_it(tmp_path: Path):
    world, gpu, _ = _fallen(tmp_path)

    series = world.nodes.exposition(NODE, world.clock.now())

    up = {labels["gpu"]: value for name, labels, value in series if name == "observer_gpu_up"}
    assert up == {str(i): (0.0 if i == gpu else 1.0) for i in range(4)}
    used = {labels["gpu"] for name, labels, _ in series if name == "observer_gpu_utilization_ratio"}
    assert str(gpu) not in used and len(used) == 3


def test_the_gpu_busy_probe_shows_sm_activity_beside_utilisation_and_idle_gpus_none(
    tmp_path: Path,
):
    world = World(tmp_path)
    world.run_for(310)  # the first probe runs

    running = {g.index: g for g in world.snapshot().gpus if g.sample and g.sample.processes}
    idle = [g.activity for g in world.snapshot().gpus if g.index not in running]

    assert running and idle
    for gpu in running.values():
        assert gpu.sample is not None and gpu.sample.utilization_gpu_percent == 99
        assert isinstance(gpu.activity, GpmActivity) and gpu.activity.sm_active_ratio > 0.9
    assert all(a == GpmActivity(0.0, 0.0, 0.0, 0.0) for a in idle)


def test_the_probe_on_the_fallen_gpu_fails_as_a_gpu_fault_and_the_node_stays_in_service(
    tmp_path: Path,
):
    world, _, failed = _fallen(tmp_path)

    assert failed is not None
    job = world.cluster.jobs([failed])[failed]
    assert job.phase is JobPhase.FAILED
    assert job.exit_code not in (0, None)
    [node] = world.cluster.snapshot().nodes
    assert node.state != "drained"


def test_a_fall_under_a_training_job_fails_it_and_frees_all_its_gpus(tmp_path: Path):
    world = World(tmp_path)
    training = world.training(gpus=2)
    world.run_for(60)
    gpu = world.nodes.busy_gpu(NODE)
    assert gpu is not None

    failed = world.nodes.gpu_fall_off(NODE, gpu)
    world.run_for(STEP_SECONDS)

    assert failed == training
    job = world.cluster.jobs([training])[training]
    assert (job.phase, job.reason) == (JobPhase.FAILED, "Error")
    assert world.snapshot().processes == ()


def test_a_gpu_with_nothing_on_it_falls_off_failing_no_job(tmp_path: Path):
    world = World(tmp_path)
    world.run_for(60)

    assert world.nodes.gpu_fall_off(NODE, 3) is None
    world.run_for(STEP_SECONDS)

    [lost] = world.agent_findings("gpu_lost")
    assert lost.subject == {"node": NODE, "gpu": "3"}


def test_the_failed_probe_is_classed_a_gpu_driver_fault_with_the_xid_as_evidence(
    tmp_path: Path,
):
    world, _, failed = _fallen(tmp_path)
    world.run_for(60)

    [run] = [r for r in world.store.runs(probe="gpu-busy") if r.job_id == failed]
    findings = world.store.findings()
    classified = classify(run, findings, world.store.node_changes(START, world.clock.now()))

    assert classified is not None
    assert classified.cause is Cause.GPU_DRIVER
    # The Xid's GPU ran the probe's job: the run's own GPU, named.
    xid = {"xid": "79", "node": NODE, "xid_meaning": "79", "gpu": "0"}
    assert Note("cause.ev.xid.gpu", xid) in classified.evidence


def test_a_node_kept_in_service_past_the_grace_after_its_gpu_fell_off_is_found(
    tmp_path: Path,
):
    world, _, _ = _fallen(tmp_path)
    grace = world.settings.detectors.gpu_in_service.grace_seconds
    fell_off = world.clock.now() - timedelta(seconds=STEP_SECONDS)

    world.run_for(grace - 60)
    assert world.store.findings(detector="unhealthy_gpu_in_service") == []
    world.run_for(120)

    [found] = world.store.findings(detector="unhealthy_gpu_in_service", open_only=True)
    assert found.subject == {"node": NODE}
    placed = found.evidence["jobs_placed_since"]
    assert placed and all(datetime.fromisoformat(j["started_at"]) > fell_off for j in placed)


def test_new_probes_on_the_node_run_on_its_other_gpus_until_the_lost_one_is_reset(
    tmp_path: Path,
):
    world, gpu, _ = _fallen(tmp_path)
    world.run_for(300)  # the next probe starts on the node while the GPU is lost
    [lost] = world.agent_findings("gpu_lost")
    assert lost.is_open

    world.nodes.gpu_recover(NODE, gpu)
    world.run_for(STEP_SECONDS)

    assert not any(f.is_open for f in world.agent_findings("gpu_lost"))
    busy = {p.gpu_index for p in world.snapshot().processes}
    assert busy and gpu not in busy


def test_an_ecc_burst_opens_uncorrected_errors_and_a_pending_remap_until_the_gpu_is_reset(
    tmp_path: Path,
):
    world = World(tmp_path)
    world.run_for(60)
    world.nodes.ecc_burst(NODE, 1, errors=8)
    world.run_for(STEP_SECONDS)

    [ecc] = world.agent_findings("gpu_ecc_uncorrected")
    assert ecc.subject == {"node": NODE, "gpu_uuid": f"GPU-{NODE}-1"}
    assert ecc.evidence["counters"]["volatile"]["after"] == 8
    world.run_for(300)  # the counters tier is read every 300 s
    [pending] = world.agent_findings("gpu_row_remap_pending")
    assert pending.is_open and pending.subject == ecc.subject

    world.nodes.ecc_clear(NODE, 1)
    world.run_for(300)

    [remapped] = world.store.findings(detector="gpu_row_remap_pending")
    assert remapped.closed_at is not None
    [ecc_stored] = world.store.findings(detector="gpu_ecc_uncorrected")
    assert ecc_stored.closed_at is None  # open for the window after the last rise


def test_a_thermal_slowdown_on_a_busy_gpu_past_the_hold_opens_a_clock_slowdown(
    tmp_path: Path,
):
    world = World(tmp_path)
    world.training()
    world.run_for(60)
    gpu = world.nodes.busy_gpu(NODE)
    assert gpu is not None
    hold = world.settings.detectors.gpu_health.slowdown_hold_seconds

    world.nodes.thermal_slowdown(NODE, gpu, on=True)
    world.run_for(hold - 2 * STEP_SECONDS)
    assert world.agent_findings("gpu_clock_slowdown") == []
    world.run_for(4 * STEP_SECONDS)

    [slow] = world.agent_findings("gpu_clock_slowdown")
    assert slow.is_open
    assert slow.evidence["reasons"] == ["hw_thermal_slowdown"]
    assert slow.evidence["temperature_celsius"] > 90

    world.nodes.thermal_slowdown(NODE, gpu, on=False)
    world.run_for(STEP_SECONDS)

    assert not any(f.is_open for f in world.agent_findings("gpu_clock_slowdown"))


def test_a_stretch_without_faults_opens_no_gpu_fault_finding(tmp_path: Path):
    world = World(tmp_path)
    world.training()
    world.run_for(1800)

    assert len(world.store.runs(probe="gpu-busy")) >= 5
    assert [f for f in world.store.findings() if f.detector in GPU_FAULT_DETECTORS] == []


# The confounders: what a real node does that the rules must see through, as its agent sees it.


def _seen(world: World) -> dict[int, tuple[str, str]]:
    """pid -> (owner id, owner state) of every GPU process the node's agent lists."""
    return {p.pid: (p.owner.id, p.owner_state.phase.value) for p in world.snapshot().processes}


def test_a_slow_memory_release_keeps_an_ended_jobs_process_for_its_seconds(tmp_path: Path):
    world = World(tmp_path)
    world.nodes.release_delay = timedelta(seconds=12)
    job = world.cluster.submit_background("research", Workload(1, duration_seconds=60))
    world.run_for(70)  # it ended at 60 s
    assert world.cluster.jobs([job])[job].phase is JobPhase.SUCCEEDED
    assert list(_seen(world).values()) == [(job, "ended")]
    world.run_for(10)
    assert _seen(world) == {}
    assert world.store.findings() == []


def test_a_reused_pid_names_the_new_job(tmp_path: Path):
    world = World(tmp_path)
    first = world.cluster.submit_background("research", Workload(1, duration_seconds=30))
    world.run_for(20)
    [(pid, (owner, _))] = _seen(world).items()
    assert owner == first
    world.run_for(20)
    assert world.nodes.reuse_pid(NODE) == pid
    second = world.cluster.submit_background("prod", Workload(1, duration_seconds=600))
    world.run_for(10)
    assert _seen(world) == {pid: (second, "running")}
    world.run_for(300)
    assert world.store.findings() == []


def test_an_owner_flap_answers_unknown_for_its_ticks_then_knows_the_job_again(tmp_path: Path):
    world = World(tmp_path)
    assert world.nodes.flap_owners(NODE, 3) is False  # nothing runs there yet
    job = world.training(1)
    world.run_for(10)
    assert world.nodes.flap_owners(NODE, 3) is True
    states = []
    for _ in range(4):
        world.run_for(STEP_SECONDS)
        states.append(sorted({state for _, state in _seen(world).values()}))
    assert states == [["unknown"], ["unknown"], ["unknown"], ["running"]]
    world.run_for(300)
    assert world.cluster.jobs([job])[job].phase is JobPhase.RUNNING
    assert world.store.findings() == []
