"""GPU health on the agent, on a fake node ticking once per second of fake time: conditions
from the counters it samples (ECC, row remapping, retired pages, clock slowdown, PCIe
replays, NVLink errors), Xid errors from NVML's events and the kernel log as event findings,
and the node blind to Xids while neither source sees every GPU's."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.agent.xids import XidWatch
from observer.clock import ManualClock
from observer.controller.observe import FleetObserver
from observer.domain import Finding, FindingKind, Owner, OwnerKind, OwnerPhase, OwnerState
from observer.fleet.local import LocalFleet
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.gpu.kernel_log import KernelLog
from observer.metrics import AgentMetrics, ControllerMetrics, GpuCollector
from observer.ownership.fake import FakeHost
from observer.settings.detectors import GpuHealthSettings, NodeLeakSettings
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
BOOT = START - timedelta(days=1)
POD = Owner(OwnerKind.POD, "5f0c2a9e-1111-4a4a-9c9c-0123456789ab")
HW_SLOWDOWN, SW_POWER_CAP = 0x8, 0x4
RULES = GpuHealthSettings(
    ecc_window_seconds=600,
    slowdown_hold_seconds=30,
    pcie_replay_max_per_minute=10,
    nvlink_errors_max_per_minute=60,
)


class Node:
    """Four fake GPUs (PCI buses 01-04), counters read every 10 s, an Xid event thread
    stepped by the test, and a kernel log the test writes (or none read)."""

    def __init__(self, tmp_path: Path, gpus: int = 4, kernel_log: bool = True) -> None:
        self.clock = ManualClock(START)
        self.gpus = FakeGpuBackend(
            [
                FakeGpu(f"GPU-fake-{i}", pci_bus_id=f"00000000:{i + 1:02X}:00.0")
                for i in range(gpus)
            ],
            self.clock,
        )
        self.host = FakeHost()
        self.registry = CollectorRegistry()
        metrics = AgentMetrics(self.registry)
        self.kmsg = tmp_path / "kmsg"
        self.kmsg.write_text("")
        self.position = tmp_path / "state" / "kernel-log-position.json"
        self.watch = self._watch(metrics, kernel_log)
        self.agent = NodeAgent(
            node="n1",
            sampler=Sampler(self.gpus, self.clock, metrics, counters_interval_seconds=10),
            attributor=Attributor(self.host, self.host),
            rules=NodeLeakSettings(grace_seconds=5, idle_seconds=3600),
            clock=self.clock,
            metrics=metrics,
            health=RULES,
            xids=self.watch,
        )
        self.registry.register(GpuCollector(self.agent.snapshot))
        self.history: list[Finding] = []
        self.seq = 2000

    def _watch(self, metrics: AgentMetrics, kernel_log: bool) -> XidWatch:
        log = (
            KernelLog(self.kmsg, self.position, "boot-1", BOOT, self.clock) if kernel_log else None
        )
        return XidWatch(
            self.gpus.xid_events(), log, 0.001, threading.Event(), metrics.xid_source_up
        )

    def tick(self, times: int = 1) -> None:
        for _ in range(times):
            self.watch.step()
            self.history += self.agent.tick()
            self.clock.advance(1)

    def open(self) -> dict[str, dict[str, Any]]:
        snap = self.agent.snapshot()
        assert snap is not None
        return {f.detector: dict(f.evidence) for f in snap.findings if f.is_open}

    def open_findings(self) -> dict[str, Finding]:
        snap = self.agent.snapshot()
        assert snap is not None
        return {f.detector: f for f in snap.findings if f.is_open}

    def xids(self) -> list[Finding]:
        snap = self.agent.snapshot()
        assert snap is not None
        return [f for f in snap.findings if f.detector == "gpu_xid"]

    def metric(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def run_job(self, gpu: int, pid: int) -> None:
        self.host.spawn(pid, POD)
        self.host.owners[POD] = OwnerState(OwnerPhase.RUNNING, name="team-a/train-0")
        self.gpus.gpus[gpu].processes[pid] = 20 * GIB
        self.gpus.gpus[gpu].utilization_gpu_percent = 95

    def kernel_xid(self, at: datetime, text: str) -> None:
        self.seq += 1
        usec = int((at - BOOT).total_seconds() * 1_000_000)
        with self.kmsg.open("a") as log:
            log.write(f"4,{self.seq},{usec},-;NVRM: Xid {text}\n")


def test_a_healthy_node_under_load_opens_nothing(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.run_job(0, pid=100)
    node.gpus.gpus[0].clock_event_reasons = SW_POWER_CAP  # the work's own power draw
    node.gpus.gpus[0].pcie_replay_errors = 1

    node.tick(120)

    assert node.history == []


def test_a_row_remap_pending_opens_a_condition_that_a_reset_closes(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick(5)
    node.gpus.gpus[2].remapped_rows_pending = True
    node.tick(11)  # the next counters read

    evidence = node.open()["gpu_row_remap_pending"]
    assert (evidence["gpu_index"], evidence["gpu_uuid"]) == (2, "GPU-fake-2")
    assert node.metric("observer_gpu_remapped_rows_pending", gpu="2", uuid="GPU-fake-2") == 1

    node.gpus.gpus[2].remapped_rows_pending = False  # the GPU was reset
    node.tick(11)
    assert "gpu_row_remap_pending" not in node.open()


def test_a_counter_that_cannot_be_read_neither_opens_nor_closes(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.gpus.gpus[1].remapped_rows_failed = True
    node.tick(2)
    assert set(node.open()) == {"gpu_row_remap_failed"}

    node.gpus.gpus[1].remapped_rows_failed = False
    node.gpus.gpus[1].unsupported.add("remapped_rows")  # from now on it answers nothing
    node.tick(30)

    assert set(node.open()) == {"gpu_row_remap_failed"}


def test_uncorrected_ecc_errors_open_with_the_counts_before_and_after_and_close_after_the_window(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.gpus.gpus[0].ecc_aggregate_uncorrected_errors = 4  # from an earlier life of the GPU
    node.tick(3)
    assert node.open() == {}

    node.gpus.gpus[0].ecc_volatile_uncorrected_errors = 2
    node.gpus.gpus[0].ecc_aggregate_uncorrected_errors = 6
    rose_at = node.clock.now()
    node.tick(11)

    evidence = node.open()["gpu_ecc_uncorrected"]
    assert evidence["counters"]["volatile"]["before"] == 0
    assert evidence["counters"]["volatile"]["after"] == 2
    assert evidence["counters"]["volatile"]["first_increase_at"] == rose_at.isoformat()
    assert (
        evidence["counters"]["aggregate"]["before"],
        evidence["counters"]["aggregate"]["after"],
    ) == (4, 6)
    assert evidence["condition_since"] == rose_at.isoformat()
    assert (
        node.metric("observer_gpu_ecc_aggregate_uncorrected_errors", gpu="0", uuid="GPU-fake-0")
        == 6
    )

    node.tick(int(RULES.ecc_window_seconds))
    assert "gpu_ecc_uncorrected" not in node.open()


def test_hardware_slowdown_counts_only_while_a_job_runs_and_only_once_it_persists(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.gpus.gpus[1].clock_event_reasons = HW_SLOWDOWN
    node.tick(60)
    assert node.open() == {}  # nobody's work is slowed

    node.run_job(1, pid=200)
    node.tick(29)
    assert node.open() == {}
    node.tick(2)
    evidence = node.open()["gpu_clock_slowdown"]
    assert evidence["reasons"] == ["hw_slowdown"]
    assert evidence["owners"] == ["team-a/train-0"]


def test_a_pcie_replay_rate_above_the_threshold_opens(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick(11)
    node.gpus.gpus[3].pcie_replay_errors = 50  # 50 replays in one 10 s counters interval
    node.tick(10)

    evidence = node.open()["gpu_pcie_replay_rate"]
    assert evidence["replays_per_minute"] == 50 * 6
    assert (evidence["pcie_replay_errors_before"], evidence["pcie_replay_errors_after"]) == (0, 50)

    node.tick(10)  # no replay since
    assert "gpu_pcie_replay_rate" not in node.open()


def test_nvlink_replay_and_crc_errors_faster_than_the_rate_open_a_warning_until_they_stop(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    gpu = node.gpus.gpus[2]
    node.tick(11)
    gpu.nvlink_replay_errors, gpu.nvlink_crc_errors = 4, 5  # 9 in 10 s: 54 a minute
    node.tick(10)
    assert node.open() == {}

    gpu.nvlink_replay_errors, gpu.nvlink_crc_errors = 10, 11  # 12 more in 10 s: 72 a minute
    node.tick(10)

    finding = node.open_findings()["gpu_nvlink_errors"]
    assert finding.severity.value == "warning"
    assert finding.subject == {"node": "n1", "gpu_uuid": "GPU-fake-2"}
    evidence = finding.evidence
    assert evidence["replay_and_crc_errors_per_minute"] == 12 * 6
    assert evidence["nvlink_errors"] == {
        "replay": {"before": 4, "after": 10},
        "recovery": {"before": 0, "after": 0},
        "crc": {"before": 5, "after": 11},
    }
    between = datetime.fromisoformat(str(evidence["to"])) - datetime.fromisoformat(
        str(evidence["from"])
    )
    assert between == timedelta(seconds=10)  # the two counter reads the rate is over
    labels = {"gpu": "2", "uuid": "GPU-fake-2"}
    assert node.metric("observer_gpu_nvlink_errors_total", **labels, counter="replay") == 10
    assert node.metric("observer_gpu_nvlink_errors_total", **labels, counter="crc") == 11

    node.tick(10)  # no error since
    assert "gpu_nvlink_errors" not in node.open()


def test_one_nvlink_recovery_error_opens_a_critical_condition(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick(11)
    node.gpus.gpus[0].nvlink_recovery_errors = 1
    node.tick(10)

    finding = node.open_findings()["gpu_nvlink_errors"]
    assert finding.severity.value == "critical"
    assert finding.evidence["nvlink_errors"]["recovery"] == {"before": 0, "after": 1}


def test_nvlink_errors_that_cannot_be_read_neither_open_nor_close(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.gpus.gpus[1].unsupported.add("nvlink_errors")  # a GPU without NVLink
    node.tick(11)
    node.gpus.gpus[1].nvlink_recovery_errors = 3
    node.tick(30)
    assert node.open() == {}

    node.gpus.gpus[0].nvlink_recovery_errors = 1
    node.tick(10)
    node.gpus.gpus[0].unsupported.add("nvlink_errors")  # from now on it answers nothing
    node.tick(30)
    assert set(node.open()) == {"gpu_nvlink_errors"}


def test_nvlink_counts_that_fall_are_no_errors(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.gpus.gpus[3].nvlink_crc_errors = 5000  # before the agent started
    node.tick(11)
    node.gpus.gpus[3].nvlink_crc_errors = 0  # the driver reloaded, or a link went down
    node.tick(20)

    assert node.open() == {}


def test_an_nvml_xid_is_an_event_finding_within_one_tick_with_gpu_code_class_and_owner(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.run_job(3, pid=4242)
    node.tick(2)

    node.gpus.xid(3, 79)
    node.tick()

    [xid] = node.xids()
    assert xid.kind is FindingKind.EVENT
    assert xid.subject == {"node": "n1", "pci_bus_id": "0000:04:00", "xid": "79"}
    e = xid.evidence
    assert (e["gpu_index"], e["gpu_uuid"], e["xid"]) == (3, "GPU-fake-3", 79)
    assert (e["xid_class"], e["fatal"]) == ("bus", True)
    assert e["gpu_owners"] == ["team-a/train-0"]
    assert e["gpu_owner_ids"] == [POD.id]  # the pod's UID, as the scheduler names its jobs
    assert xid.severity.value == "critical"
    assert (
        node.metric("observer_agent_gpu_xid_events_total", gpu="3", uuid="GPU-fake-3", code="79")
        == 1
    )
    assert node.metric("observer_findings_total", detector="gpu_xid", severity="critical") == 1


def test_the_kernel_line_of_the_same_xid_completes_the_nvml_event_rather_than_repeating_it(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.run_job(1, pid=4242)
    node.tick(2)

    node.gpus.xid(1, 43)
    node.kernel_xid(node.clock.now(), "(PCI:0000:02:00): 43, pid=4242, name=python3, Ch 00000010")
    node.tick(3)

    [xid] = node.xids()
    e = xid.evidence
    assert e["sources"] == ["kernel_log", "nvml"]
    assert (e["pid"], e["process_name"], e["owner"], e["owner_name"]) == (
        4242,
        "python3",
        POD.label,
        "team-a/train-0",
    )
    assert (e["xid_class"], e["fatal"]) == ("application", False)
    assert (
        node.metric("observer_agent_gpu_xid_events_total", gpu="1", uuid="GPU-fake-1", code="43")
        == 1
    )


def test_an_xid_on_a_gpu_without_nvml_events_comes_from_the_kernel_log(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.gpus.gpus[0].unsupported.add("xid_events")
    node.tick(2)

    node.kernel_xid(node.clock.now(), "(PCI:0000:01:00): 48, pid=77, name=python3, DBE")
    node.tick()

    [xid] = node.xids()
    assert xid.evidence["sources"] == ["kernel_log"]
    assert (xid.evidence["gpu_index"], xid.evidence["xid_class"]) == (0, "memory")
    assert xid.evidence["owner"] is None  # pid 77 is no process of this host
    assert node.metric("observer_agent_xid_source_up", source="nvml") == 1  # GPUs 1-3


def test_xid_events_that_do_not_open_without_a_kernel_log_leave_the_node_blind_to_xids(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path, kernel_log=False)
    node.gpus.driver_loaded = False
    node.tick(3)

    blind = node.open_findings()["xid_source_unavailable"]
    assert blind.subject == {"node": "n1"}
    assert blind.evidence["nvml"] == "events not opened: Driver Not Loaded"
    assert blind.evidence["kernel_log"] == "not read"

    node.gpus.driver_loaded = True
    node.tick(40)  # the event set is opened again on its retry schedule: NVML alone sees all

    assert "xid_source_unavailable" not in node.open_findings()
    [closed] = [f for f in node.history if f.detector == "xid_source_unavailable" and f.closed_at]
    assert closed.opened_at == START


def test_gpus_without_xid_events_and_an_unreadable_kernel_log_are_blind_until_it_reads(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    for gpu in node.gpus.gpus:
        gpu.unsupported.add("xid_events")
    node.kmsg.unlink()
    node.tick(2)

    evidence = node.open()["xid_source_unavailable"]
    assert evidence["nvml"] == "; ".join(
        f"GPU {i}: NOT_SUPPORTED (Not Supported)" for i in range(4)
    )
    assert str(node.kmsg) in evidence["kernel_log"]

    node.kmsg.write_text("")
    node.tick()

    assert "xid_source_unavailable" not in node.open()  # the kernel log alone sees them all
    assert node.metric("observer_agent_xid_source_up", source="kernel_log") == 1


def test_a_kernel_log_in_no_known_format_does_not_stand_in_for_missing_xid_events(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    node.gpus.gpus[2].unsupported.add("xid_events")
    node.kmsg.write_text("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08\n" * 120)
    node.tick(2)

    evidence = node.open()["xid_source_unavailable"]
    assert evidence["nvml"] == "GPU 2: NOT_SUPPORTED (Not Supported)"
    assert str(evidence["kernel_log"]).startswith("unrecognised format")
    assert node.metric("observer_agent_xid_source_up", source="kernel_log") == 0


def test_the_same_code_again_later_is_another_event(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.tick()
    node.gpus.xid(0, 31)
    node.tick(int(RULES.xid_merge_window_seconds) + 1)
    node.gpus.xid(0, 31)
    node.tick()

    assert len(node.xids()) == 2


def test_the_controller_stores_one_xid_once_with_what_both_sources_said(tmp_path: Path) -> None:
    node = Node(tmp_path)
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    observer = FleetObserver(
        LocalFleet({"n1": node.agent.snapshot}),
        store,
        node.clock,
        ControllerMetrics(CollectorRegistry()),
        unreachable_grace_seconds=30,
    )
    node.run_job(2, pid=4242)
    node.tick(2)

    node.gpus.xid(2, 13)
    node.tick()
    observer.observe()  # the controller reads the NVML event alone
    node.kernel_xid(node.clock.now(), "(PCI:0000:03:00): 13, pid=4242, name=python3, ESR 0x404600")
    for _ in range(5):
        node.tick()
        observer.observe()

    [stored] = store.findings(detector="gpu_xid")
    assert stored.evidence["sources"] == ["kernel_log", "nvml"]
    assert stored.evidence["owner_name"] == "team-a/train-0"
    assert (stored.evidence["xid_class"], stored.severity.value) == ("application", "warning")
