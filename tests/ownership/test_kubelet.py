"""The kubelet pod-resources adapter against a real gRPC server on a unix socket (the test
plays the kubelet): the pods it lists become pod UIDs through the pod log directory, each with
the GPUs its containers were given by a device plugin or DRA, whatever the plugin calls them;
a listed pod the kubelet's /pods says completed is not running; a pod the node cannot name by
UID is not guessed; every failure is an OwnerSourceError naming the socket or URL and why."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.clock import ManualClock
from observer.domain import OwnerKind
from observer.errors import OwnerSourceError
from observer.ownership.devices import NodeGpus
from observer.ownership.kubelet import KubeletPodResources
from observer.ownership.kubelet_pods import KubeletPods
from observer.ownership.tracked import TrackedOwners
from tests.ownership.kubelet_stand_in import (
    Pod,
    StandInKubelet,
    pods_endpoint,
    self_signed_certificate,
    serving,
)

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
UID_A = "0b7e3c1a-1111-4a4a-9c9c-00000000000a"
UID_B = "0b7e3c1a-2222-4b4b-9c9c-00000000000b"
UID_B_BEFORE = "0b7e3c1a-3333-4c4c-9c9c-00000000000c"
GPU = [f"GPU-5d2a{i}e1c-0000-4000-8000-00000000000{i}" for i in range(4)]
# The device minor numbers (/dev/nvidiaN) need not follow NVML's order.
BY_MINOR = {0: GPU[1], 1: GPU[0], 2: GPU[2], 3: GPU[3]}
MIG = "MIG-8a1b2c3d-0000-4000-8000-000000000001"
TOKEN = "agent-service-account-token"


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[StandInKubelet]:
    # AF_UNIX paths are short (108 bytes): pytest's tmp_path may not fit.
    socket = Path(f"/tmp/kubelet-{tmp_path.name[-20:]}.sock")
    with serving(StandInKubelet(socket, tmp_path / "pods", GPU)) as stand_in:
        yield stand_in
    socket.unlink(missing_ok=True)


def adapter(
    kubelet: StandInKubelet,
    timeout: float = 2.0,
    pods: KubeletPods | None = None,
    mig_parents: dict[str, str] | None = None,
) -> KubeletPodResources:
    return KubeletPodResources(
        ManualClock(T0),
        kubelet.socket,
        kubelet.pod_logs_dir,
        timeout,
        gpus=lambda: NodeGpus(BY_MINOR, mig_parents or {}),
        pods=pods,
    )


def pods_of(url: str, token_file: Path, ca_file: Path | None = None) -> KubeletPods:
    """The kubelet's /pods; its certificate unchecked (`ca_file` None), as by default."""
    return KubeletPods(url, token_file, ca_file, 2.0)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_listed_pods_are_their_uids_with_the_gpus_their_containers_were_given(kubelet):
    kubelet.start_pod(
        Pod(
            "team-a",
            "train-0",
            UID_A,
            {
                "trainer": [("nvidia.com/gpu", [GPU[0], GPU[1]]), ("example.com/nic", ["eth3"])],
                "sidecar": [],
            },
        )
    )
    kubelet.start_pod(Pod("team-b", "notebook", UID_B, {"lab": [("nvidia.com/gpu", [GPU[2]])]}))

    read = adapter(kubelet).read()

    assert read.kind is OwnerKind.POD and read.at == T0
    assert read.running == {UID_A, UID_B}
    assert read.gpus == {UID_A: {GPU[0], GPU[1]}, UID_B: {GPU[2]}}
    assert read.names == {UID_A: "team-a/train-0", UID_B: "team-b/notebook"}
    assert read.allocatable == frozenset(GPU)
    assert read.unmatched == {}


def test_time_sliced_replicas_are_the_gpu_they_share(kubelet):
    kubelet.start_pod(Pod("team-a", "shared", UID_A, {"c": [("nvidia.com/gpu", [f"{GPU[3]}::2"])]}))

    read = adapter(kubelet).read()

    assert read.gpus == {UID_A: {GPU[3]}} and read.parts == {}


def test_mig_devices_are_the_gpu_they_are_part_of_and_the_owner_names_them(kubelet):
    old_style = f"MIG-{GPU[2]}/1/0"  # drivers before R470
    kubelet.start_pod(
        Pod("team-a", "mig", UID_A, {"c": [("nvidia.com/mig-1g.18gb", [f"{old_style}::1"])]})
    )
    kubelet.start_pod(Pod("team-b", "mig", UID_B, {"c": [("nvidia.com/gpu", ["nvidia3/gi2"])]}))
    source = adapter(kubelet)

    read = source.read()

    assert read.gpus == {UID_A: {GPU[2]}, UID_B: {GPU[3]}}
    assert read.parts == {UID_A: {GPU[2]: {old_style}}, UID_B: {GPU[3]: {"nvidia3/gi2"}}}
    owners = TrackedOwners(source, 10)
    owners.refresh(T0)
    assert {(a.gpu_uuid, a.label) for a in owners.allocation().assignments} == {
        (GPU[2], f"team-a/mig ({old_style})"),
        (GPU[3], "team-b/mig (nvidia3/gi2)"),
    }


def test_mig_uuids_are_the_gpus_nvml_enumerates_them_on(kubelet):
    """NVIDIA's device plugin (mig-strategy mixed or single, R470+) lists MIG devices by UUID:
    two pods share GPU 1 through one MIG device each, and GPU 2's MIG device is free."""
    mig = [f"MIG-8a1b2c3d-0000-4000-8000-00000000000{i}" for i in range(3)]
    kubelet.allocatable = [GPU[0], *mig]
    kubelet.start_pod(Pod("team-a", "infer", UID_A, {"c": [("nvidia.com/mig-1g.18gb", [mig[0]])]}))
    kubelet.start_pod(Pod("team-b", "infer", UID_B, {"c": [("nvidia.com/mig-3g.71gb", [mig[1]])]}))
    parents = {mig[0]: GPU[1], mig[1]: GPU[1], mig[2]: GPU[2]}

    source = adapter(kubelet, mig_parents=parents)
    read = source.read()

    assert read.gpus == {UID_A: {GPU[1]}, UID_B: {GPU[1]}}
    assert read.parts == {UID_A: {GPU[1]: {mig[0]}}, UID_B: {GPU[1]: {mig[1]}}}
    assert read.allocatable == frozenset({GPU[0], GPU[1], GPU[2]})
    owners = TrackedOwners(source, 10)
    owners.refresh(T0)
    assert {(a.gpu_uuid, a.label) for a in owners.allocation().assignments} == {
        (GPU[1], f"team-a/infer ({mig[0]})"),
        (GPU[1], f"team-b/infer ({mig[1]})"),
    }


def test_a_mig_uuid_on_no_gpu_the_agent_has_read_is_kept_as_it_is_listed(kubelet):
    kubelet.allocatable = [MIG]
    kubelet.start_pod(Pod("team-a", "mig", UID_A, {"c": [("nvidia.com/mig-1g.18gb", [MIG])]}))

    read = adapter(kubelet).read()

    assert read.gpus == {UID_A: {MIG}} and read.allocatable == frozenset({MIG})


def test_device_ids_by_minor_number_are_the_gpus_the_driver_gives_those_minors(kubelet):
    kubelet.allocatable = ["nvidia0", "nvidia1", "nvidia2", "nvidia3"]
    kubelet.start_pod(
        Pod("team-a", "train-0", UID_A, {"c": [("nvidia.com/gpu", ["nvidia0", "nvidia2/vgpu1"])]})
    )

    read = adapter(kubelet).read()

    assert read.gpus == {UID_A: {BY_MINOR[0], BY_MINOR[2]}}
    assert read.allocatable == frozenset(GPU)


def test_a_gpu_given_by_a_dra_claim_is_assigned_and_spoken_of(kubelet):
    kubelet.allocatable = []  # no device plugin: DRA alone gives this node's GPUs
    kubelet.start_pod(
        Pod(
            "team-a",
            "dra",
            UID_A,
            claims={
                "trainer": [
                    ("gpu", [("gpu.nvidia.com", "gpu-node-0", "gpu-1")]),
                    ("mig", [("gpu.nvidia.com", "gpu-node-0", "gpu-3-mig-19-2-1")]),
                    ("nic", [("dra.example.com", "gpu-node-0", "gpu-2")]),
                ]
            },
        )
    )

    read = adapter(kubelet).read()

    assert read.gpus == {UID_A: {BY_MINOR[1], BY_MINOR[3]}}
    assert read.parts == {UID_A: {BY_MINOR[3]: {"gpu-3-mig-19-2-1"}}}
    assert read.allocatable == frozenset({BY_MINOR[1], BY_MINOR[3]})


def test_a_completed_pod_still_listed_is_not_running_and_holds_no_gpu(
    kubelet, token_file, tmp_path
):
    kubelet.start_pod(Pod("team-a", "train-0", UID_A, {"c": [("nvidia.com/gpu", [GPU[0]])]}))
    kubelet.start_pod(Pod("team-b", "notebook", UID_B, {"c": [("nvidia.com/gpu", [GPU[1]])]}))
    kubelet.complete_pod(UID_A)

    with pods_endpoint(kubelet, TOKEN, tmp_path) as endpoint:
        read = adapter(kubelet, pods=pods_of(endpoint.url, token_file)).read()

    assert read.running == {UID_B} and read.gpus == {UID_B: {GPU[1]}}
    assert read.names[UID_A] == "team-a/train-0"
    assert endpoint.requests == ["/pods"]


def test_without_the_kubelets_pods_every_listed_pod_runs(kubelet):
    kubelet.start_pod(Pod("team-a", "train-0", UID_A))
    kubelet.complete_pod(UID_A, "Failed")

    assert adapter(kubelet).read().running == {UID_A}


def test_a_kubelet_refusing_the_token_is_an_error_naming_its_url_and_answer(
    kubelet, token_file, tmp_path
):
    kubelet.start_pod(Pod("team-a", "train-0", UID_A))

    with (
        pods_endpoint(kubelet, "another-token", tmp_path) as endpoint,
        pytest.raises(OwnerSourceError) as error,
    ):
        adapter(kubelet, pods=pods_of(endpoint.url, token_file)).read()

    assert endpoint.url in str(error.value) and "HTTP 401" in str(error.value)


def test_the_kubelets_certificate_is_checked_against_the_ca_it_is_given(
    kubelet, token_file, tmp_path
):
    kubelet.start_pod(Pod("team-a", "train-0", UID_A))
    kubelet.complete_pod(UID_A)
    other = tmp_path / "other"
    other.mkdir()
    other_ca, _ = self_signed_certificate(other)

    with pods_endpoint(kubelet, TOKEN, tmp_path) as endpoint:
        signed = pods_of(endpoint.url, token_file, endpoint.certificate).ended()
        with pytest.raises(OwnerSourceError) as error:
            pods_of(endpoint.url, token_file, other_ca).ended()

    assert signed == {UID_A}
    assert endpoint.url in str(error.value) and "CERTIFICATE_VERIFY_FAILED" in str(error.value)


def test_a_missing_token_is_an_error_naming_the_file(kubelet, tmp_path):
    with (
        pods_endpoint(kubelet, TOKEN, tmp_path) as endpoint,
        pytest.raises(OwnerSourceError) as error,
    ):
        adapter(kubelet, pods=pods_of(endpoint.url, tmp_path / "no-token")).read()

    assert str(tmp_path / "no-token") in str(error.value)


def test_a_deleted_pod_is_no_longer_running_and_its_name_is_kept_while_its_logs_are(kubelet):
    kubelet.start_pod(Pod("team-a", "train-0", UID_A))
    kubelet.start_pod(Pod("team-b", "notebook", UID_B))
    kubelet.delete_pod(UID_A, collect_logs=False)

    read = adapter(kubelet).read()

    assert read.running == {UID_B}
    assert read.names[UID_A] == "team-a/train-0"
    assert read.unmatched == {}


def test_a_replaced_statefulset_pod_whose_logs_remain_is_unmatched_not_guessed(kubelet):
    kubelet.start_pod(Pod("team-b", "db-0", UID_B_BEFORE))
    kubelet.delete_pod(UID_B_BEFORE, collect_logs=False)
    kubelet.start_pod(Pod("team-b", "db-0", UID_B, {"db": [("nvidia.com/gpu", [GPU[1]])]}))

    read = adapter(kubelet).read()

    assert read.running == set()
    assert read.unmatched == {"team-b/db-0": {GPU[1]}}


def test_a_listed_pod_without_a_log_directory_yet_is_unmatched(kubelet):
    kubelet.pods[UID_A] = Pod("team-a", "pending", UID_A)  # admitted, no sandbox yet

    read = adapter(kubelet).read()

    assert read.running == set() and set(read.unmatched) == {"team-a/pending"}


def test_a_kubelet_that_does_not_say_what_it_can_assign_gives_no_allocatable_set(kubelet):
    kubelet.allocatable_implemented = False
    kubelet.start_pod(Pod("team-a", "train-0", UID_A))

    read = adapter(kubelet).read()

    assert read.allocatable is None and read.running == {UID_A}


def test_no_socket_is_an_error_naming_the_socket(tmp_path):
    missing = tmp_path / "kubelet.sock"
    source = KubeletPodResources(ManualClock(T0), missing, tmp_path, 1.0)

    with pytest.raises(OwnerSourceError) as error:
        source.read()

    assert str(missing) in str(error.value) and "List failed: UNAVAILABLE" in str(error.value)


def test_a_kubelet_that_does_not_answer_in_time_is_an_error_naming_the_deadline(kubelet):
    kubelet.hang.set()

    with pytest.raises(OwnerSourceError) as error:
        adapter(kubelet, timeout=0.3).read()

    assert str(kubelet.socket) in str(error.value)
    assert "DEADLINE_EXCEEDED" in str(error.value)


def test_an_unreadable_pod_log_directory_is_an_error_naming_it(kubelet):
    kubelet.pod_logs_dir.rmdir()

    with pytest.raises(OwnerSourceError) as error:
        adapter(kubelet).read()

    assert str(kubelet.pod_logs_dir) in str(error.value) and str(kubelet.socket) in str(error.value)
