"""The running agent over the stand-in libnvidia-ml.so.1, read over HTTP: an Xid queued in
the library's state file reaches /v1/snapshot and /metrics, a row remap pending opens its
condition, a kernel-log Xid is reported once across a restart, and a node whose GPUs do not
support Xid events is blind to Xids until its kernel log is read."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.agent.test_owners import pod_cgroup
from tests.agent.test_snapshot_processes import processes, serving
from tests.gpu import fake_nvml
from tests.ownership.test_procfs import write_process
from tests.support.waiting import wait_until

pytestmark = pytest.mark.fake_nvml

UID = "0b7e3c1a-3333-4c4c-9c9c-00000000000c"
GIB = 2**30


class Host:
    """Four stand-in GPUs, a /proc tree, a kernel log and the agent's state directory."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nvml = fake_nvml.install(fake_nvml.require_library(), tmp_path, monkeypatch)
        self.gpus = [fake_nvml.FakeNvmlGpu() for _ in range(4)]
        self.xids: list[fake_nvml.FakeXid] = []
        self.proc = tmp_path / "proc"
        boot_id = self.proc / "sys" / "kernel" / "random" / "boot_id"
        boot_id.parent.mkdir(parents=True)
        boot_id.write_text("3f1c0d2e-boot-0001\n")
        self.kmsg = tmp_path / "kmsg"
        self.kmsg.write_text("")
        self.seq = 500
        self.settings = {
            "node_name": "gpu-node-3",
            "gpu_backend": "nvml",
            "nvml_library_path": self.nvml.library,
            "proc_root": self.proc,
            "owners": "none",
            "kernel_log_path": self.kmsg,
            "state_dir": tmp_path / "state",
            "xid_wait_seconds": 0.05,
            "interval_seconds": 0.1,
            "counters_interval_seconds": 0.2,
            "listen_host": "127.0.0.1",
            "listen_port": 0,
            "shutdown_deadline_seconds": 2,
        }
        self.sync()

    def sync(self) -> None:
        self.nvml.set(self.gpus, xids=self.xids)

    def run(self, pid: int, gpu: int) -> None:
        write_process(self.proc, pid, cgroup=pod_cgroup(UID), comm="python3")
        self.gpus[gpu] = fake_nvml.FakeNvmlGpu(
            processes=((pid, 8 * GIB),), utilization_gpu_percent=80
        )
        self.sync()

    def xid(self, gpu: int, code: int) -> None:
        self.xids.append(fake_nvml.FakeXid(id=len(self.xids) + 1, gpu=gpu, code=code))
        self.sync()

    def kernel_xid(self, text: str) -> None:
        self.seq += 1
        usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1_000_000)
        with self.kmsg.open("a") as log:
            log.write(f"4,{self.seq},{usec},-;NVRM: Xid {text}\n")


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Host:
    return Host(tmp_path, monkeypatch)


def snapshot(base: str) -> dict[str, Any]:
    """The agent's snapshot, once its first tick has made one (a 503 until then)."""

    def made() -> dict[str, Any]:
        response = httpx.get(f"{base}/v1/snapshot")
        body: dict[str, Any] = response.json()
        return body if response.status_code == 200 else {}

    return wait_until(made, "the agent never completed a tick", seconds=10, poll_seconds=0.01)


def xids(base: str) -> list[dict[str, Any]]:
    return [f for f in snapshot(base)["findings"] if f["detector"] == "gpu_xid"]


def metric(base: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def test_an_xid_queued_on_gpu_3_is_an_event_finding_naming_gpu_code_class_and_owner(
    host: Host,
) -> None:
    host.run(4242, gpu=3)
    with serving(host.settings) as base:
        processes(base)
        wait_until(
            lambda: metric(base, "observer_agent_xid_source_up", source="nvml") == 1,
            "no events",
            seconds=10,
            poll_seconds=0.01,
        )

        queued = time.monotonic()
        host.xid(gpu=3, code=79)
        [xid] = wait_until(
            lambda: xids(base), "the Xid never reached the snapshot", seconds=10, poll_seconds=0.01
        )
        seen_after = time.monotonic() - queued

        e = xid["evidence"]
        assert (e["gpu_index"], e["gpu_uuid"], e["pci_bus_id"]) == (
            3,
            "GPU-00000000-0000-0000-0000-000000000003",
            "0000:04:00",
        )
        assert (e["xid"], e["xid_class"], e["fatal"], e["sources"]) == (79, "bus", True, ["nvml"])
        assert e["gpu_owners"] == [f"pod/{UID}"]
        assert xid["kind"] == "event"
        assert metric(base, "observer_agent_gpu_xid_events_total", gpu="3", code="79") == 1
        # The event thread polls the library every 2 ms; the next tick (0.1 s) takes it.
        assert seen_after < 1.0, seen_after


def test_a_row_remap_pending_opens_a_condition_on_the_running_agent(host: Host) -> None:
    with serving(host.settings) as base:
        wait_until(lambda: snapshot(base).get("gpus"), "no GPUs", seconds=10, poll_seconds=0.01)
        host.gpus[2] = fake_nvml.FakeNvmlGpu(
            remapped_rows_pending=True, remapped_rows_correctable=1
        )
        host.sync()

        [finding] = wait_until(
            lambda: [
                f for f in snapshot(base)["findings"] if f["detector"] == "gpu_row_remap_pending"
            ],
            "the row remap pending never opened",
            seconds=10,
            poll_seconds=0.01,
        )
        assert finding["closed_at"] is None
        assert finding["evidence"]["gpu_index"] == 2
        assert finding["evidence"]["remapped_rows_correctable"] == 1


def test_an_agent_restarted_after_a_kernel_log_xid_reports_it_once(host: Host) -> None:
    host.gpus[1] = fake_nvml.FakeNvmlGpu(unsupported=frozenset({"xid_events"}))
    host.sync()
    host.kernel_xid("(PCI:0000:02:00): 31, pid=9001, name=python3, Ch 00000008, MMU Fault")
    with serving(host.settings) as base:
        [first] = wait_until(
            lambda: xids(base),
            "the kernel-log Xid never reached the snapshot",
            seconds=10,
            poll_seconds=0.01,
        )
        assert (first["evidence"]["xid"], first["evidence"]["gpu_index"]) == (31, 1)
    host.kernel_xid("(PCI:0000:02:00): 43, pid=9001, name=python3, Ch 00000008")  # while down

    with serving(host.settings) as base:
        [second] = wait_until(
            lambda: xids(base), "the Xid written while down was lost", seconds=10, poll_seconds=0.01
        )
        time.sleep(0.5)  # several ticks and kernel-log reads

        assert [f["evidence"]["xid"] for f in xids(base)] == [43]
        assert second["evidence"]["sources"] == ["kernel_log"]
        assert metric(base, "observer_agent_gpu_xid_events_total", code="31") is None
        assert metric(base, "observer_agent_gpu_xid_events_total", code="43") == 1


def xid_blind(base: str) -> list[dict[str, Any]]:
    return [f for f in snapshot(base)["findings"] if f["detector"] == "xid_source_unavailable"]


def test_gpus_not_supporting_xid_events_and_no_kernel_log_leave_the_node_blind_until_it_reads(
    host: Host,
) -> None:
    host.gpus = [fake_nvml.FakeNvmlGpu(unsupported=frozenset({"xid_events"})) for _ in range(4)]
    host.sync()
    host.kmsg.unlink()  # the kernel log is not there (not mounted)
    with serving(host.settings) as base:
        [blind] = wait_until(
            lambda: xid_blind(base), "the blindness was never said", seconds=10, poll_seconds=0.01
        )
        assert blind["subject"] == {"node": "gpu-node-3"}
        assert str(blind["evidence"]["nvml"]).count("NOT_SUPPORTED") == 4
        assert "cannot be opened" in str(blind["evidence"]["kernel_log"])
        assert blind["closed_at"] is None

        host.kmsg.write_text("")
        [closed] = wait_until(
            lambda: [f for f in xid_blind(base) if f["closed_at"]],
            "the blindness never ended once the kernel log was read",
            seconds=10,
            poll_seconds=0.01,
        )
        assert closed["opened_at"] == blind["opened_at"]
        assert metric(base, "observer_agent_xid_source_up", source="kernel_log") == 1
