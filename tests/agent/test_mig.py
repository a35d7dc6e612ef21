"""The agent on a Kubernetes node whose GPU 1 is partitioned by MIG: the stand-in NVML serves
the MIG devices, the stand-in kubelet gives pods MIG UUIDs (NVIDIA's device plugin with
mig-strategy mixed), and every finding about a process on a MIG instance names the instance."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from observer import codec
from observer.fleet import wire
from tests.agent.test_owners import GIB, GRACE, INTERVAL, UID_A, UID_B, Node, gpu_uuid, pod_cgroup
from tests.gpu.fake_nvml import FakeMigDevice, FakeNvmlGpu
from tests.ownership.kubelet_stand_in import Pod, StandInKubelet, serving
from tests.ownership.test_procfs import write_process

pytestmark = pytest.mark.fake_nvml

GI_A, GI_B = 7, 8  # GPU 1's two 1g.18gb MIG devices, by GPU instance id
MIG_A, MIG_B = FakeMigDevice(GI_A).uuid(1, 0), FakeMigDevice(GI_B).uuid(1, 1)


def partitioned(*on: tuple[tuple[int, int], ...]) -> FakeNvmlGpu:
    """GPU 1 in MIG mode, each MIG device with its processes (pid, bytes)."""
    return FakeNvmlGpu(
        mig_mode=True,
        mig=tuple(
            FakeMigDevice(gi, memory_used_bytes=sum(b for _, b in procs), processes=procs)
            for gi, procs in zip((GI_A, GI_B), on, strict=True)
        ),
    )


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Node]:
    socket = Path(f"/tmp/kubelet-mig-{tmp_path.name[-20:]}.sock")
    stand_in = StandInKubelet(socket, tmp_path / "pods", [gpu_uuid(0), MIG_A, MIG_B])
    with serving(stand_in) as kubelet:
        built = Node(tmp_path, monkeypatch, kubelet)
        built.gpus[1] = partitioned((), ())
        built.nvml.set(built.gpus)
        yield built
        built.agent.close()
    socket.unlink(missing_ok=True)


def serving_pod(uid: str, name: str, mig: str) -> Pod:
    return Pod("team-a", name, uid, {"server": [("nvidia.com/mig-1g.18gb", [mig])]})


def serve(node: Node, *on: tuple[tuple[int, int], ...]) -> None:
    for procs in on:
        for pid, _ in procs:
            uid = UID_A if pid < 5000 else UID_B
            write_process(node.proc, pid, cgroup=pod_cgroup(uid), comm="python3")
    node.gpus[1] = partitioned(*on)
    node.nvml.set(node.gpus)


def test_a_process_that_outlives_its_pod_on_a_mig_instance_names_the_instance(
    node: Node,
) -> None:
    node.kubelet.start_pod(serving_pod(UID_A, "llm-a", MIG_A))
    node.kubelet.start_pod(serving_pod(UID_B, "llm-b", MIG_B))
    serve(node, ((4242, 6 * GIB),), ((5151, 3 * GIB),))
    node.tick(10)
    assert node.open() == {}  # each pod on the MIG device it was given: nothing to say

    node.kubelet.delete_pod(UID_A)  # the pod is gone, its process on MIG_A is not
    node.tick(GRACE + INTERVAL + 2)

    [finding] = node.opened("unreleased_memory")
    assert finding.subject == {
        "node": "gpu-node-0",
        "gpu_uuid": gpu_uuid(1),
        "pid": "4242",
        "mig_uuid": MIG_A,
    }
    assert finding.evidence["mig_uuid"] == MIG_A
    assert finding.evidence["used_memory_bytes"] == 6 * GIB  # the MIG device's count of it
    assert f"MIG instance {MIG_A} of GPU 1" in finding.summary
    assert finding.evidence["gpu_assigned_to"] == [f"team-a/llm-b ({MIG_B})"]
    assert node.opened("gpu_not_assigned") == []


def test_a_process_on_another_pods_mig_device_of_the_same_gpu_opens_the_isolation_finding(
    node: Node,
) -> None:
    node.kubelet.start_pod(serving_pod(UID_A, "llm-a", MIG_A))
    node.kubelet.start_pod(serving_pod(UID_B, "llm-b", MIG_B))
    write_process(node.proc, 4343, cgroup=pod_cgroup(UID_A), comm="python3")
    serve(node, ((4242, 6 * GIB),), ((5151, 3 * GIB), (4343, GIB)))  # llm-a's 4343 on MIG_B

    node.tick(GRACE + 2)

    [finding] = node.opened("gpu_not_assigned")
    assert finding.subject == {
        "node": "gpu-node-0",
        "gpu_uuid": gpu_uuid(1),
        "pid": "4343",
        "mig_uuid": MIG_B,
    }
    assert finding.evidence["gpu_assigned_to"] == [f"team-a/llm-b ({MIG_B})"]
    assert f"MIG instance {MIG_B} of GPU 1" in finding.summary
    assert "team-a/llm-a" in finding.summary


def test_an_unknown_process_on_a_mig_instance_names_the_instance(node: Node) -> None:
    node.kubelet.start_pod(serving_pod(UID_B, "llm-b", MIG_B))
    write_process(node.proc, 777, cgroup="0::/system.slice/stray.service\n", comm="miner")
    node.gpus[1] = partitioned(((777, GIB),), ())
    node.nvml.set(node.gpus)

    node.tick(GRACE + 2)

    [finding] = node.opened("orphan_process")
    assert finding.subject["mig_uuid"] == MIG_A
    assert f"MIG instance {MIG_A} of GPU 1" in finding.summary


def test_the_snapshot_carries_each_mig_instance_and_reads_back_the_same(node: Node) -> None:
    node.kubelet.start_pod(serving_pod(UID_A, "llm-a", MIG_A))
    serve(node, ((4242, 6 * GIB),), ())
    node.tick()
    snap = node.agent.snapshot()
    assert snap is not None

    data = codec.snapshot_to_json(snap)

    sample = data["gpus"][1]["sample"]
    assert [(m["uuid"], m["gpu_instance_id"]) for m in sample["mig_instances"]] == [
        (MIG_A, GI_A),
        (MIG_B, GI_B),
    ]
    assert sum(m["memory_used_bytes"] for m in sample["mig_instances"]) == 6 * GIB
    assert data["gpus"][0]["sample"]["mig_instances"] is None  # MIG off
    assert [(p["pid"], p["mig_uuid"]) for p in data["processes"]] == [(4242, MIG_A)]
    assert data["allocation"]["assignments"][0]["gpu_uuid"] == gpu_uuid(1)
    assert wire.snapshot_from_bytes(json.dumps(data).encode()) == snap


def test_a_repartition_is_an_event_naming_the_gpu_and_its_mig_devices_before_and_after(
    node: Node,
) -> None:
    node.tick(2)
    assert node.history == []  # the first layout read is no change

    whole = FakeMigDevice(GI_A, memory_total_bytes=36 * GIB)  # the two slices merged
    node.gpus[1] = FakeNvmlGpu(mig_mode=True, mig=(whole,))
    node.nvml.set(node.gpus)
    node.tick()

    [event] = [f for f in node.history if f.detector == "mig_reconfigured"]
    assert event.subject == {"node": "gpu-node-0", "gpu_uuid": gpu_uuid(1)}
    assert event.closed_at == event.opened_at  # an event: it happened
    assert event.evidence["mig_uuids_before"] == [MIG_A, MIG_B]
    assert event.evidence["mig_uuids_after"] == [whole.uuid(1, 0)]
    assert (event.evidence["mig_devices_before"], event.evidence["mig_devices_after"]) == (2, 1)
    assert "repartitioned" in event.summary and "GPU 1" in event.summary
    snap = node.agent.snapshot()
    assert snap is not None and event in snap.findings  # kept for the controller to read

    node.gpus[1] = FakeNvmlGpu()  # MIG mode off
    node.nvml.set(node.gpus)
    node.tick(2)

    events = [f for f in node.history if f.detector == "mig_reconfigured"]
    assert [e.evidence["mig_devices_after"] for e in events] == [1, None]
    assert "turned off" in events[-1].summary
