"""The kubelet pod-resources adapter against a real gRPC server on a unix socket (the test
plays the kubelet): the pods it lists become pod UIDs through the pod log directory, each with
the GPUs its containers were given; a pod the node cannot name by UID is not guessed; every
failure is an OwnerSourceError naming the socket and why."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.clock import ManualClock
from observer.domain import OwnerKind
from observer.errors import OwnerSourceError
from observer.ownership.kubelet import KubeletPodResources
from tests.ownership.kubelet_stand_in import Pod, StandInKubelet, serving

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
UID_A = "0b7e3c1a-1111-4a4a-9c9c-00000000000a"
UID_B = "0b7e3c1a-2222-4b4b-9c9c-00000000000b"
UID_B_BEFORE = "0b7e3c1a-3333-4c4c-9c9c-00000000000c"
GPU = [f"GPU-5d2a{i}e1c-0000-4000-8000-00000000000{i}" for i in range(4)]


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[StandInKubelet]:
    # AF_UNIX paths are short (108 bytes): pytest's tmp_path may not fit.
    socket = Path(f"/tmp/kubelet-{tmp_path.name[-20:]}.sock")
    with serving(StandInKubelet(socket, tmp_path / "pods", GPU)) as stand_in:
        yield stand_in
    socket.unlink(missing_ok=True)


def adapter(kubelet: StandInKubelet, timeout: float = 2.0) -> KubeletPodResources:
    return KubeletPodResources(ManualClock(T0), kubelet.socket, kubelet.pod_logs_dir, timeout)


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


def test_mig_devices_and_time_sliced_replicas_are_named_by_their_uuid(kubelet):
    mig = "MIG-8a1b2c3d-0000-4000-8000-000000000001"
    kubelet.start_pod(
        Pod(
            "team-a",
            "mig",
            UID_A,
            {"c": [("nvidia.com/mig-1g.18gb", [mig]), ("nvidia.com/gpu", [f"{GPU[3]}::2"])]},
        )
    )

    assert adapter(kubelet).read().gpus == {UID_A: {mig, GPU[3]}}


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
