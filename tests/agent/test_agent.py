"""The agent's tick on a fake node: two-tier sampling, read failures as data, and the
node-local conditions opening and closing with their evidence."""

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.clock import ManualClock
from observer.domain import (
    DriverState,
    Finding,
    GpmActivity,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
)
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.metrics import AgentMetrics, GpuCollector
from observer.ownership.fake import FakeHost
from observer.settings.detectors import NodeLeakSettings

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
POD = Owner(OwnerKind.POD, "5f0c2a9e-1111-4a4a-9c9c-0123456789ab")


class Node:
    """A fake GPU node and an agent watching it, ticking once per second of fake time."""

    def __init__(
        self,
        gpus: int = 2,
        grace: float = 5,
        idle: float = 30,
        idle_sm_active_ratio: float | None = None,
    ) -> None:
        self.clock = ManualClock(START)
        self.gpus = FakeGpuBackend([FakeGpu(f"GPU-fake-{i}") for i in range(gpus)], self.clock)
        self.host = FakeHost()
        self.registry = CollectorRegistry()
        metrics = AgentMetrics(self.registry)
        self.agent = NodeAgent(
            node="n1",
            sampler=Sampler(self.gpus, self.clock, metrics, counters_interval_seconds=10),
            attributor=Attributor(self.host, self.host),
            rules=NodeLeakSettings(
                grace_seconds=grace,
                idle_seconds=idle,
                idle_sm_active_ratio=idle_sm_active_ratio,
            ),
            clock=self.clock,
            metrics=metrics,
        )
        self.registry.register(GpuCollector(self.agent.snapshot))
        self.history: list[Finding] = []

    def tick(self, times: int = 1) -> None:
        for _ in range(times):
            self.history += self.agent.tick()
            self.clock.advance(1)

    def open(self) -> dict[str, dict[str, str]]:
        snap = self.agent.snapshot()
        assert snap is not None
        return {f.detector: dict(f.subject) for f in snap.findings if f.is_open}

    def metric(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def run_job(self, gpu: int, pid: int, used: int = 20 * GIB, util: int = 90) -> None:
        self.host.spawn(pid, POD)
        self.host.owners[POD] = OwnerState(OwnerPhase.RUNNING)
        self.gpus.gpus[gpu].processes[pid] = used
        self.gpus.gpus[gpu].memory_used_bytes += used
        self.gpus.gpus[gpu].utilization_gpu_percent = util


def test_lean_tier_every_tick_and_expensive_tier_on_its_own_cadence():
    node = Node(gpus=8)
    node.tick(25)
    assert node.gpus.calls["utilization"] == 8 * 25
    assert node.gpus.calls["processes"] == 8 * 25
    # counters every 10 s: at t=0, 10, 20
    assert node.gpus.calls["energy"] == 8 * 3
    assert node.gpus.calls["pcie_tx_throughput"] == 8 * 3
    assert node.metric("observer_agent_sample_duration_seconds_count", tier="lean") == 25
    assert node.metric("observer_agent_sample_duration_seconds_count", tier="counters") == 3


def test_a_call_not_supported_is_recorded_once_and_not_made_again():
    node = Node(gpus=2)
    node.gpus.gpus[1].unsupported.add("power")
    node.tick(5)
    assert node.gpus.calls["power"] == 2 + 4  # GPU 1 asked once, GPU 0 every tick
    assert (
        node.metric("observer_gpu_read_errors_total", gpu="1", call="power", error="not_supported")
        == 1
    )
    snap = node.agent.snapshot()
    assert snap is not None
    sample = snap.gpus[1].sample
    assert sample is not None
    assert sample.power_milliwatts is None
    assert sample.memory_used_bytes == 600 * 2**20
    assert node.metric("observer_gpu_power_watts", gpu="1", uuid="GPU-fake-1") is None
    assert node.metric("observer_gpu_power_watts", gpu="0", uuid="GPU-fake-0") == 70.0


def test_gpu_series_carry_gpu_uuid_and_owner_labels():
    node = Node(gpus=1)
    node.run_job(0, pid=4242, used=3 * GIB, util=55)
    node.tick()
    labels = {"gpu": "0", "uuid": "GPU-fake-0"}
    assert node.metric("observer_gpu_utilization_ratio", **labels) == 0.55
    assert node.metric("observer_gpu_memory_used_bytes", **labels) == 3 * GIB + 600 * 2**20
    assert (
        node.metric(
            "observer_gpu_process_memory_used_bytes",
            **labels,
            pid="4242",
            owner_kind="pod",
            owner=POD.id,
        )
        == 3 * GIB
    )
    assert node.metric("observer_gpu_owner_info", **labels, owner_kind="pod", owner=POD.id) == 1
    assert node.metric("observer_nvml_up") == 1


def test_memory_held_after_the_owner_ended_opens_once_and_closes_when_freed():
    node = Node(gpus=1, grace=5)
    node.run_job(0, pid=77)
    node.tick(3)
    ended = node.clock.now()
    node.host.owners[POD] = OwnerState(OwnerPhase.ENDED, ended)
    node.tick(4)
    assert "unreleased_memory" not in node.open()  # still within grace
    node.tick(5)
    assert node.open()["unreleased_memory"] == {"node": "n1", "gpu_uuid": "GPU-fake-0", "pid": "77"}
    assert (
        node.metric("observer_gpu_unreleased_memory_bytes", gpu="0", uuid="GPU-fake-0") == 20 * GIB
    )
    assert (
        node.metric("observer_findings_open", detector="unreleased_memory", severity="critical")
        == 1
    )

    node.gpus.gpus[0].processes.clear()
    node.gpus.gpus[0].memory_used_bytes = 600 * 2**20
    freed = node.clock.now()
    node.tick()
    opened = [f for f in node.history if f.detector == "unreleased_memory"]
    assert len(opened) == 2  # opened once, closed once
    assert opened[0].is_open and not opened[1].is_open
    assert opened[1].opened_at == ended + timedelta(seconds=5)
    assert opened[1].closed_at == freed
    assert opened[1].evidence["owner"] == f"pod/{POD.id}"
    # the program, not its command line, unless the agent is told to expose it
    assert (opened[1].evidence["executable"], opened[1].evidence["command"]) == ("python", None)
    assert (
        node.metric("observer_findings_open", detector="unreleased_memory", severity="critical")
        == 0
    )
    assert (
        node.metric("observer_findings_total", detector="unreleased_memory", severity="critical")
        == 1
    )


def test_a_process_with_no_owner_and_a_pid_that_no_longer_exists():
    node = Node(gpus=2, grace=3)
    node.host.spawn(500)  # a shell on the host, in no pod or job
    node.gpus.gpus[0].processes[500] = 1 * GIB
    node.gpus.gpus[1].processes[600] = 2 * GIB  # NVML lists it, /proc has no such pid
    node.tick(4)
    assert node.open() == {
        "orphan_process": {"node": "n1", "gpu_uuid": "GPU-fake-0", "pid": "500"},
        "vanished_process": {"node": "n1", "gpu_uuid": "GPU-fake-1", "pid": "600"},
    }


def test_memory_above_the_learned_baseline_with_no_process():
    node = Node(gpus=1, grace=3)
    node.tick(2)  # learns the 600 MiB driver baseline
    node.gpus.gpus[0].memory_used_bytes = 10 * GIB
    node.tick(4)
    snap = node.agent.snapshot()
    assert snap is not None
    [finding] = [f for f in snap.findings if f.detector == "memory_without_process"]
    assert finding.evidence["baseline_memory_bytes"] == 600 * 2**20
    assert finding.evidence["excess_bytes"] == 10 * GIB - 600 * 2**20


def test_allocated_but_idle_needs_a_running_owner_and_zero_utilisation_for_the_whole_stretch():
    node = Node(gpus=1, idle=30)
    node.run_job(0, pid=90, util=0)
    node.tick(20)
    node.gpus.gpus[0].utilization_gpu_percent = 3  # a blip of work restarts the clock
    node.tick()
    node.gpus.gpus[0].utilization_gpu_percent = 0
    node.tick(29)
    assert "allocated_idle" not in node.open()
    node.tick(2)
    assert "allocated_idle" in node.open()


def test_asked_to_judge_on_sm_activity_a_job_spinning_one_sm_is_idle_at_full_utilisation():
    node = Node(gpus=3, idle=30, idle_sm_active_ratio=0.05)
    for gpu in range(3):
        node.run_job(gpu, pid=90 + gpu, util=100)
    node.gpus.gpus[0].activity = GpmActivity(0.01, 0.002, 0.0, 0.0)  # one warp spinning
    node.gpus.gpus[1].activity = GpmActivity(0.92, 0.48, 0.61, 0.35)  # training
    # GPU 2 has no GPM: its utilisation, 100 %, is all there is to judge it by.
    node.tick(29)
    assert "allocated_idle" not in node.open()

    node.tick(2)

    snap = node.agent.snapshot()
    assert snap is not None
    idle = [f for f in snap.findings if f.detector == "allocated_idle" and f.is_open]
    assert [(f.subject["pid"], f.evidence["sm_active_ratio"]) for f in idle] == [("90", 0.01)]
    assert idle[0].evidence["utilization_gpu_percent"] == 100
    assert idle[0].summary.endswith("while its SMs are 1% active")


def test_without_the_sm_setting_utilisation_alone_judges_a_gpu_with_gpm():
    node = Node(gpus=1, idle=30)
    node.run_job(0, pid=90, util=100)
    node.gpus.gpus[0].activity = GpmActivity(0.01, 0.002, 0.0, 0.0)

    node.tick(32)

    assert "allocated_idle" not in node.open()


def test_a_lost_gpu_opens_a_condition_and_blinds_only_that_gpu():
    node = Node(gpus=2, grace=2)
    node.host.spawn(500)
    node.gpus.gpus[1].processes[500] = 1 * GIB
    node.tick(3)
    assert set(node.open()) == {"orphan_process"}

    node.gpus.gpus[1].lost = True
    node.tick(3)
    # While GPU 1 cannot be read its orphan is neither confirmed nor taken for gone.
    assert set(node.open()) == {"orphan_process", "gpu_lost"}
    assert node.metric("observer_gpu_up", gpu="1", uuid="") == 0
    assert node.metric("observer_gpu_up", gpu="0", uuid="GPU-fake-0") == 1
    assert (
        node.metric("observer_gpu_read_errors_total", gpu="1", call="identify", error="gpu_lost")
        or 0
    ) >= 2

    node.gpus.gpus[1].lost = False
    node.gpus.gpus[1].processes.clear()
    node.tick()
    assert node.open() == {}


def test_driver_not_loaded_is_a_blind_state_that_keeps_conditions_open_until_it_returns():
    node = Node(gpus=1, grace=2)
    node.host.spawn(500)
    node.gpus.gpus[0].processes[500] = 1 * GIB
    node.tick(3)
    node.gpus.driver_loaded = False  # unloaded under a running agent
    node.tick(3)
    snap = node.agent.snapshot()
    assert snap is not None
    assert snap.driver.state is DriverState.NOT_LOADED
    assert snap.gpus == ()
    assert set(node.open()) == {"orphan_process", "nvml_unavailable"}
    assert node.metric("observer_nvml_up") == 0
    # noticed on the first tick's reads, then two failed initialisations
    assert node.metric("observer_nvml_init_errors_total", state="not_loaded") == 3

    node.gpus.driver_loaded = True
    node.tick()
    assert set(node.open()) == {"orphan_process"}


@pytest.mark.parametrize("used", [None, 0])
def test_a_process_without_memory_figures_is_still_attributed(used):
    node = Node(gpus=1)
    node.run_job(0, pid=31, used=0)
    node.gpus.gpus[0].processes[31] = used
    node.tick()
    snap = node.agent.snapshot()
    assert snap is not None
    [proc] = snap.processes
    assert proc.owner == POD
    assert proc.used_memory_bytes == used


def test_with_no_scheduler_to_ask_an_idle_allocation_is_still_found_but_never_an_ended_owner():
    node = Node(gpus=1, grace=5, idle=10)
    node.run_job(0, pid=90, util=0)
    del node.host.owners[POD]  # the directory cannot tell: state unknown
    node.tick(12)
    assert set(node.open()) == {"allocated_idle"}
    snap = node.agent.snapshot()
    assert snap is not None
    assert snap.findings[0].evidence["owner_phase"] == "unknown"
