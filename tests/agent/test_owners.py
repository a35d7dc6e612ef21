"""The agent on a Kubernetes node with `agent.owners: kubelet`: the stand-in NVML, a /proc tree
of pods' processes (their cgroups as the kubelet's systemd driver lays them out) and the test
playing the kubelet over a real gRPC unix socket (and its /pods over HTTP), pods coming,
completing and going. The agent is built as `observer agent` builds it and ticked on a manual
clock, one second a tick."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from observer import codec
from observer.agent.main import build_agent, owner_source
from observer.clock import ManualClock
from observer.detectors import unreleased
from observer.domain import (
    Finding,
    JobPhase,
    JobStatus,
    SchedulerNode,
    SchedulerSnapshot,
)
from observer.fleet import wire
from observer.ownership.base import Undetected
from observer.ownership.slurmd import SlurmdOwners
from observer.settings import Settings
from tests.agent.test_snapshot_processes import serving as serving_agent
from tests.backends.slurm_harness import require_slurm
from tests.gpu import fake_nvml
from tests.gpu.test_minors import write_gpu
from tests.ownership.kubelet_stand_in import Pod, StandInKubelet, pods_endpoint, serving
from tests.ownership.test_procfs import write_process

pytestmark = pytest.mark.fake_nvml

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
GRACE = 5
INTERVAL = 3  # agent.owners_interval_seconds
GIB = 2**30
UID_A = "0b7e3c1a-1111-4a4a-9c9c-00000000000a"
UID_B = "0b7e3c1a-2222-4b4b-9c9c-00000000000b"


def gpu_uuid(index: int) -> str:
    return f"GPU-00000000-0000-0000-0000-{index:012d}"  # the stand-in's identity of index


def pod_cgroup(uid: str) -> str:
    return (
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{uid.replace('-', '_')}.slice/cri-containerd-{'e' * 64}.scope\n"
    )


class Node:
    def __init__(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        kubelet: StandInKubelet,
        **settings: object,
    ):
        self.nvml = fake_nvml.install(fake_nvml.require_library(), tmp_path, monkeypatch)
        self.kubelet = kubelet
        self.proc = tmp_path / "proc"
        self.proc.mkdir()
        self.gpus = [fake_nvml.FakeNvmlGpu() for _ in range(2)]
        self.nvml.set(self.gpus)
        self.settings = {
            "node_name": "gpu-node-0",
            "gpu_backend": "nvml",
            "nvml_library_path": self.nvml.library,
            "proc_root": self.proc,
            "owners": "kubelet",
            "pod_resources_socket": kubelet.socket,
            "pod_logs_dir": kubelet.pod_logs_dir,
            "owners_interval_seconds": INTERVAL,
            "owners_timeout_seconds": 1,
            **settings,
        }
        self.clock = ManualClock(T0)
        self.registry = CollectorRegistry()
        self.agent = build_agent(
            Settings.model_validate(
                {
                    "agent": self.settings,
                    "detectors": {"node": {"grace_seconds": GRACE, "idle_seconds": 30}},
                }
            ),
            self.clock,
            self.registry,
        )
        self.history: list[Finding] = []

    def run(self, pid: int, uid: str, gpu: int, used: int = 8 * GIB, util: int = 70) -> None:
        write_process(self.proc, pid, cgroup=pod_cgroup(uid), comm="python3")
        self.set_gpu(gpu, processes=((pid, used),), util=util, memory=used)

    def set_gpu(self, gpu: int, processes: tuple[tuple[int, int], ...], util: int, memory: int):
        self.gpus[gpu] = fake_nvml.FakeNvmlGpu(
            processes=processes,
            utilization_gpu_percent=util,
            memory_used_bytes=fake_nvml.FakeNvmlGpu().memory_used_bytes + memory,
        )
        self.nvml.set(self.gpus)

    def free(self, gpu: int) -> None:
        self.gpus[gpu] = fake_nvml.FakeNvmlGpu()
        self.nvml.set(self.gpus)

    def tick(self, times: int = 1) -> None:
        for _ in range(times):
            self.history += self.agent.tick()
            self.clock.advance(1)

    def open(self) -> dict[str, Finding]:
        snap = self.agent.snapshot()
        assert snap is not None
        return {f.detector: f for f in snap.findings if f.is_open}

    def opened(self, detector: str) -> list[Finding]:
        return [f for f in self.history if f.detector == detector and f.is_open]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    socket = Path(f"/tmp/kubelet-agent-{tmp_path.name[-20:]}.sock")
    stand_in = StandInKubelet(socket, tmp_path / "pods", [gpu_uuid(0), gpu_uuid(1)])
    with serving(stand_in) as kubelet:
        built = Node(tmp_path, monkeypatch, kubelet)
        yield built
        built.agent.close()
    socket.unlink(missing_ok=True)


@pytest.fixture
def pods_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    """A node whose agent also asks the kubelet's /pods for its pods' phases."""
    socket = Path(f"/tmp/kubelet-agent-{tmp_path.name[-20:]}.sock")
    token = tmp_path / "token"
    token.write_text("agent-token")
    stand_in = StandInKubelet(socket, tmp_path / "pods", [gpu_uuid(0), gpu_uuid(1)])
    with serving(stand_in) as kubelet, pods_endpoint(kubelet, "agent-token", tmp_path) as endpoint:
        settings = {"kubelet_pods_url": endpoint.url, "kubelet_token_file": token}
        built = Node(tmp_path, monkeypatch, kubelet, kubelet_ca_file=None, **settings)
        yield built
        built.agent.close()
    socket.unlink(missing_ok=True)


def train_pod(uid: str = UID_A, gpu: int = 0) -> Pod:
    return Pod("team-a", "train-0", uid, {"trainer": [("nvidia.com/gpu", [gpu_uuid(gpu)])]})


def test_a_process_that_outlives_its_pod_opens_unreleased_memory_naming_the_pod_and_its_end(
    node: Node,
) -> None:
    node.kubelet.start_pod(train_pod())
    node.run(4242, UID_A, gpu=0)
    node.tick(10)
    assert node.open() == {}

    node.kubelet.delete_pod(UID_A)  # the pod is gone, its process is not
    deleted_at = node.clock.now()
    for _ in range(GRACE + INTERVAL + 1):
        node.tick()
        if node.opened("unreleased_memory"):
            break

    [finding] = node.opened("unreleased_memory")
    ended_at = datetime.fromisoformat(finding.evidence["owner_ended_at"])
    # Ended at the first reading after the deletion; opened one grace after that, on a tick.
    assert deleted_at <= ended_at < deleted_at + timedelta(seconds=INTERVAL + 1)
    assert finding.opened_at - ended_at <= timedelta(seconds=GRACE + 1)
    # The summary names the pod; its end is in the evidence (read beside local-time columns,
    # a summary carries no UTC instant).
    assert "team-a/train-0" in finding.summary and "+00:00" not in finding.summary
    assert finding.evidence["owner_name"] == "team-a/train-0"
    assert finding.evidence["gpu_assigned_to"] == []
    assert finding.subject == {"node": "gpu-node-0", "gpu_uuid": gpu_uuid(0), "pid": "4242"}

    node.free(0)  # the driver lets the memory go at last
    node.tick()
    assert "unreleased_memory" not in node.open()
    assert [f.closed_at for f in node.history if f.detector == "unreleased_memory"][-1]


def test_a_completed_pod_the_kubelet_still_lists_leaves_its_process_as_a_leak(
    pods_node: Node,
) -> None:
    node = pods_node
    node.kubelet.start_pod(train_pod())
    node.run(4242, UID_A, gpu=0)
    node.tick(10)
    assert node.open() == {}

    node.kubelet.complete_pod(UID_A)  # Succeeded, still listed by List, its process stuck
    completed_at = node.clock.now()
    node.tick(GRACE + INTERVAL + 1)

    [finding] = node.opened("unreleased_memory")
    assert finding.evidence["owner_name"] == "team-a/train-0"
    assert finding.evidence["gpu_assigned_to"] == []
    ended_at = datetime.fromisoformat(finding.evidence["owner_ended_at"])
    assert completed_at <= ended_at < completed_at + timedelta(seconds=INTERVAL + 1)


def test_a_gpu_given_by_dra_is_its_pods_and_not_another_pods(node: Node) -> None:
    """NVIDIA's DRA driver names GPUs by device minor, which need not follow NVML's order."""
    write_gpu(node.proc, "0000:00:01.0", gpu_uuid(0), minor=1)
    write_gpu(node.proc, "0000:00:02.0", gpu_uuid(1), minor=0)
    node.kubelet.allocatable = []
    claim = ("gpu", [("gpu.nvidia.com", "gpu-node-0", "gpu-0")])
    node.kubelet.start_pod(Pod("team-a", "dra", UID_A, claims={"trainer": [claim]}))
    node.kubelet.start_pod(Pod("team-b", "notebook", UID_B))
    node.run(4242, UID_A, gpu=1)
    write_process(node.proc, 5151, cgroup=pod_cgroup(UID_B))
    node.set_gpu(1, processes=((4242, 8 * GIB), (5151, GIB)), util=60, memory=9 * GIB)

    node.tick(GRACE + 2)

    [finding] = node.opened("gpu_not_assigned")
    assert finding.subject == {"node": "gpu-node-0", "gpu_uuid": gpu_uuid(1), "pid": "5151"}
    assert finding.evidence["gpu_assigned_to"] == ["team-a/dra"]


def test_a_pod_whose_process_exits_with_it_opens_nothing(node: Node) -> None:
    node.kubelet.start_pod(train_pod())
    node.run(4242, UID_A, gpu=0)
    node.tick(5)

    node.free(0)
    node.kubelet.delete_pod(UID_A)
    node.tick(GRACE + 2 * INTERVAL)

    assert node.history == []


def test_a_process_on_a_gpu_its_pod_was_not_given_opens_the_isolation_finding(node: Node) -> None:
    node.kubelet.start_pod(train_pod(UID_A, gpu=0))
    node.kubelet.start_pod(
        Pod("team-b", "notebook", UID_B, {"lab": [("nvidia.com/gpu", [gpu_uuid(1)])]})
    )
    node.run(4242, UID_A, gpu=0)
    write_process(node.proc, 5151, cgroup=pod_cgroup(UID_A))  # it also sees team-b's GPU
    node.set_gpu(1, processes=((5151, 2 * GIB),), util=40, memory=2 * GIB)

    node.tick(GRACE + 2)

    [finding] = node.opened("gpu_not_assigned")
    assert finding.subject == {"node": "gpu-node-0", "gpu_uuid": gpu_uuid(1), "pid": "5151"}
    assert finding.evidence["gpu_assigned_to"] == ["team-b/notebook"]
    assert finding.evidence["owner_gpus"] == [gpu_uuid(0)]
    assert "team-a/train-0" in finding.summary and "team-b/notebook" in finding.summary
    assert node.opened("unreleased_memory") == []


def test_a_gpu_given_to_a_pod_that_runs_nothing_on_it_is_allocated_idle(node: Node) -> None:
    node.kubelet.start_pod(train_pod(UID_A, gpu=1))
    node.tick(31)

    [finding] = node.opened("allocated_idle")
    assert finding.subject == {
        "node": "gpu-node-0",
        "gpu_uuid": gpu_uuid(1),
        "owner": "team-a/train-0",
    }
    assert finding.evidence["owner_id"] == UID_A


def test_an_unreadable_socket_opens_owner_state_unknown_and_guesses_nothing(node: Node) -> None:
    node.kubelet.start_pod(train_pod())
    node.run(4242, UID_A, gpu=0)
    node.tick(3)
    node.kubelet.stop()  # the kubelet is gone
    node.kubelet.delete_pod(UID_A)

    node.tick(GRACE + 2 * INTERVAL)

    assert set(node.open()) == {"owner_state_unknown"}
    finding = node.open()["owner_state_unknown"]
    assert str(node.kubelet.socket) in finding.evidence["reason"]
    snap = node.agent.snapshot()
    assert snap is not None and snap.allocation is not None and not snap.allocation.up
    assert {p.owner_state.phase.value for p in snap.processes} == {"unknown"}
    assert (
        node.registry.get_sample_value("observer_agent_owner_directory_up", {"source": "kubelet"})
        == 0
    )


def test_the_snapshot_carries_the_node_allocation_layer(node: Node) -> None:
    node.kubelet.start_pod(train_pod(UID_A, gpu=0))
    node.run(4242, UID_A, gpu=0)
    node.tick()
    snap = node.agent.snapshot()
    assert snap is not None

    data: dict[str, Any] = codec.snapshot_to_json(snap)

    assert data["allocation"]["assignments"] == [
        {
            "gpu_uuid": gpu_uuid(0),
            "owner": {"kind": "pod", "id": UID_A},
            "owner_name": "team-a/train-0",
            "parts": [],
        }
    ]
    assert data["allocation"]["allocatable"] == [gpu_uuid(0), gpu_uuid(1)]
    assert data["processes"][0]["owner_name"] == "team-a/train-0"
    assert wire.snapshot_from_bytes(json.dumps(data).encode()) == snap
    assert (
        node.registry.get_sample_value("observer_agent_owner_directory_up", {"source": "kubelet"})
        == 1
    )


def test_auto_without_kubelet_or_scontrol_says_why_owners_are_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol
    settings = Settings.model_validate(
        {"agent": {"owners": "auto", "pod_resources_socket": tmp_path / "none.sock"}}
    )

    source = owner_source(settings.agent, ManualClock(T0), dict)

    assert isinstance(source, Undetected)
    assert str(tmp_path / "none.sock") in source.reason and "scontrol" in source.reason


def test_owners_none_opens_owner_state_unknown_saying_it_was_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvml = fake_nvml.install(fake_nvml.require_library(), tmp_path, monkeypatch)
    nvml.set([fake_nvml.FakeNvmlGpu()])
    clock = ManualClock(T0)
    registry = CollectorRegistry()
    settings = {
        "node_name": "gpu-node-0",
        "nvml_library_path": nvml.library,
        "proc_root": tmp_path,
        "owners": "none",
    }
    agent = build_agent(Settings.model_validate({"agent": settings}), clock, registry)

    opened = agent.tick()

    assert [(f.detector, dict(f.subject)) for f in opened] == [
        ("owner_state_unknown", {"node": "gpu-node-0"})
    ]
    assert "agent.owners is none" in str(opened[0].evidence["reason"])
    assert registry.get_sample_value("observer_agent_owner_directory_up", {"source": "none"}) == 0


@pytest.mark.slurm
def test_auto_on_a_slurm_node_without_a_kubelet_asks_slurmd(tmp_path: Path) -> None:
    require_slurm()  # this machine's Slurm: scontrol on PATH, as on a compute node
    settings = Settings.model_validate(
        {"agent": {"owners": "auto", "pod_resources_socket": tmp_path / "none.sock"}}
    )

    source = owner_source(settings.agent, ManualClock(T0), dict)

    assert isinstance(source, SlurmdOwners)
    assert source.name == "slurm"


def test_the_running_agent_reports_its_owner_directory_in_healthz(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvml = fake_nvml.install(fake_nvml.require_library(), tmp_path, monkeypatch)
    agent = {
        "node_name": "gpu-node-0",
        "nvml_library_path": nvml.library,
        "proc_root": tmp_path,
        "owners": "kubelet",
        "pod_resources_socket": tmp_path / "absent.sock",
        "interval_seconds": 0.05,
        "counters_interval_seconds": 0.5,
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "shutdown_deadline_seconds": 2,
    }
    with serving_agent(agent) as base:
        deadline = datetime.now(UTC) + timedelta(seconds=10)
        while True:
            health = httpx.get(f"{base}/healthz")
            body = health.json()
            if body.get("owner_directory") or datetime.now(UTC) > deadline:
                break

    assert health.status_code == 200
    assert body["owner_directory"]["up"] is False
    assert str(tmp_path / "absent.sock") in body["owner_directory"]["reason"]


def test_the_controller_compares_three_layers_with_the_kubelets_assignment_over_the_wire(
    node: Node,
) -> None:
    """A pod stuck Terminating: the scheduler still shows it ending; its process is gone from
    the GPU; the kubelet still gives it the GPU until the pod object goes."""
    node.kubelet.start_pod(train_pod(UID_A, gpu=0))
    node.run(4242, UID_A, gpu=0)
    node.tick()
    node.free(0)
    ending = JobStatus(
        job_id="team-a/train-0",
        run_id=None,
        tenant="team-a",
        queue=None,
        phase=JobPhase.RUNNING,
        gpus=1,
        nodes=("gpu-node-0",),
        owner_ids=(UID_A,),
        ending_since=T0,
    )

    def layers_seen_by_the_controller() -> Any:
        node.tick()
        snap = node.agent.snapshot()
        assert snap is not None
        read = wire.snapshot_from_bytes(json.dumps(codec.snapshot_to_json(snap)).encode())
        scheduler = SchedulerSnapshot(
            read.at,
            (),
            (SchedulerNode("gpu-node-0", "a", 2, 1, "mixed", None),),
            (ending,),
        )
        [stuck] = unreleased.evaluate(
            scheduler,
            {"gpu-node-0": read},
            read.at,
            grace_seconds=60,
            stuck_grace_seconds=120,
            snapshot_max_age_seconds=60,
            memory_tolerance_bytes=256 * 2**20,
        )
        return stuck.evidence["layers"]

    assert layers_seen_by_the_controller() == {
        "scheduler": "held",
        "allocation": "held",
        "nvml": "released",
        "agree": ["scheduler", "allocation"],
        "disagree": ["nvml"],
    }

    node.kubelet.delete_pod(UID_A)
    node.clock.advance(INTERVAL)  # the next owner read

    assert layers_seen_by_the_controller()["allocation"] == "released"
