"""The owner of a process is read from its /proc/<pid>/cgroup file (Kubernetes pods under
either cgroup driver and either cgroup version, Slurm jobs under v1 and v2) and, for a Slurm
task launched outside its job's cgroup, from SLURM_JOB_ID in its environ block."""

from __future__ import annotations

import pytest

from observer.domain import NO_OWNER, Owner, OwnerKind
from observer.ownership.cgroup import owner_from_cgroup, owner_from_environ

POD_UID = "3f1c9a2e-7b4d-4e8f-9a01-5c6d7e8f9a0b"
POD_UID_UNDERSCORED = POD_UID.replace("-", "_")
CONTAINER_ID = "4c7a1f0e9b2d3c8a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d"
OTHER_ID = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"


def v1_file(path: str) -> str:
    """A cgroup v1 /proc/<pid>/cgroup: one line per hierarchy, every controller at `path`,
    as the kubelet's cgroupfs driver lays it out."""
    controllers = [
        "hugetlb",
        "perf_event",
        "net_cls,net_prio",
        "pids",
        "freezer",
        "cpu,cpuacct",
        "devices",
        "blkio",
        "cpuset",
        "rdma",
        "memory",
    ]
    lines = [f"{n}:{c}:{path}" for n, c in zip(range(12, 1, -1), controllers, strict=True)]
    lines.append(f"1:name=systemd:{path}")
    lines.append("0::/")
    return "\n".join(lines) + "\n"


def pod(container: str = CONTAINER_ID) -> Owner:
    return Owner(OwnerKind.POD, POD_UID, container)


def slurm_job(job_id: str, step: str = "") -> Owner:
    return Owner(OwnerKind.SLURM_JOB, job_id, step)


# --- Kubernetes, cgroupfs driver ------------------------------------------------------------


@pytest.mark.parametrize("qos", ["burstable", "besteffort"])
def test_a_v1_cgroupfs_pod_container_is_owned_by_its_pod_and_names_its_container(
    qos: str,
) -> None:
    text = v1_file(f"/kubepods/{qos}/pod{POD_UID}/{CONTAINER_ID}")

    assert owner_from_cgroup(text) == pod()


def test_a_guaranteed_pod_sits_directly_under_kubepods_and_is_still_found() -> None:
    text = v1_file(f"/kubepods/pod{POD_UID}/{CONTAINER_ID}")

    assert owner_from_cgroup(text) == pod()


def test_the_memory_line_alone_is_enough_to_name_the_pod() -> None:
    text = f"12:memory:/kubepods/burstable/pod{POD_UID}/{CONTAINER_ID}\n"

    assert owner_from_cgroup(text) == pod()


def test_an_owner_on_a_later_line_is_found_after_lines_that_name_none() -> None:
    text = "\n".join(
        [
            "13:misc:/",
            "12:rdma:/",
            f"11:memory:/kubepods/besteffort/pod{POD_UID}/{CONTAINER_ID}",
        ]
    )

    assert owner_from_cgroup(text) == pod()


def test_a_v2_cgroupfs_pod_container_is_owned_by_its_pod() -> None:
    text = f"0::/kubepods/burstable/pod{POD_UID}/{CONTAINER_ID}\n"

    assert owner_from_cgroup(text) == pod()


def test_a_pod_level_cgroup_without_a_container_names_the_pod_and_no_container() -> None:
    text = f"0::/kubepods/burstable/pod{POD_UID}\n"

    assert owner_from_cgroup(text) == Owner(OwnerKind.POD, POD_UID, "")


# --- Kubernetes, systemd driver -------------------------------------------------------------


@pytest.mark.parametrize("runtime_prefix", ["cri-containerd-", "crio-", "docker-"])
def test_a_v2_systemd_pod_container_is_owned_by_its_pod_with_the_uid_given_back_dashed(
    runtime_prefix: str,
) -> None:
    text = (
        "0::/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{POD_UID_UNDERSCORED}.slice/"
        f"{runtime_prefix}{CONTAINER_ID}.scope\n"
    )

    owner = owner_from_cgroup(text)

    assert owner == pod()
    assert "_" not in owner.id


@pytest.mark.parametrize("runtime_prefix", ["cri-containerd-", "crio-", "docker-"])
def test_a_v1_systemd_pod_container_is_owned_by_its_pod(runtime_prefix: str) -> None:
    text = v1_file(
        "/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{POD_UID_UNDERSCORED}.slice/"
        f"{runtime_prefix}{CONTAINER_ID}.scope"
    )

    assert owner_from_cgroup(text) == pod()


def test_a_guaranteed_systemd_pod_has_no_qos_slice_and_is_still_found() -> None:
    text = (
        f"0::/kubepods.slice/kubepods-pod{POD_UID_UNDERSCORED}.slice/"
        f"cri-containerd-{CONTAINER_ID}.scope\n"
    )

    assert owner_from_cgroup(text) == pod()


def test_a_path_seen_from_inside_another_cgroup_namespace_still_names_the_pod() -> None:
    # The agent runs in its own cgroup namespace: other pods' paths start with "/../..".
    text = (
        "0::/../../kubepods-burstable-pod"
        f"{POD_UID_UNDERSCORED}.slice/cri-containerd-{CONTAINER_ID}.scope\n"
    )

    assert owner_from_cgroup(text) == pod()


def test_the_container_id_is_the_one_on_the_pods_line_not_a_neighbours() -> None:
    text = f"0::/kubepods/burstable/pod{POD_UID}/{OTHER_ID}\n"

    assert owner_from_cgroup(text) == pod(OTHER_ID)


# --- Slurm ----------------------------------------------------------------------------------
# The layouts of proctrack/cgroup: src/plugins/cgroup/v1/xcgroup.c and v2/cgroup_v2.c, the step
# named as log_build_step_id_str writes it without its job (what listpids prints as STEPID).


def test_a_v1_slurm_task_is_owned_by_its_job_and_step() -> None:
    text = "\n".join(
        [
            "11:memory:/slurm/uid_1000/job_42/step_0/task_0",
            "5:cpuset:/slurm/uid_1000/job_42/step_0",
            "4:devices:/slurm/uid_1000/job_42/step_0/task_0",
            "1:name=systemd:/system.slice/slurmd.service",
            "",
        ]
    )

    assert owner_from_cgroup(text) == slurm_job("42", "0")


def test_the_devices_line_alone_is_enough_to_name_the_slurm_job() -> None:
    text = "4:devices:/slurm/uid_1000/job_42/step_batch/task_0\n"

    assert owner_from_cgroup(text) == slurm_job("42", "batch")


@pytest.mark.parametrize(
    ("path", "step"),
    [
        ("/system.slice/slurmstepd.scope/job_42/step_batch/user/task_0", "batch"),
        ("/system.slice/slurmstepd.scope/job_42/step_0/user/task_3", "0"),
        ("/system.slice/n1_slurmstepd.scope/job_42/step_3+1/user/task_0", "3+1"),
        ("/system.slice/slurmstepd.scope/job_42/step_extern/user/task_special", "extern"),
        ("/system.slice/slurmstepd.scope/job_42", ""),
    ],
)
def test_a_v2_slurm_task_is_owned_by_its_job_and_step(path: str, step: str) -> None:
    assert owner_from_cgroup(f"0::{path}\n") == slurm_job("42", step)


def test_a_slurm_job_id_is_kept_whole_not_truncated() -> None:
    text = "0::/system.slice/slurmstepd.scope/job_1234567/step_0/user/task_0\n"

    assert owner_from_cgroup(text) == slurm_job("1234567", "0")


# --- no owner -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("0::/system.slice/sshd.service\n", id="v2 systemd service"),
        pytest.param(
            "0::/user.slice/user-1000.slice/session-3.scope\n", id="v2 user login session"
        ),
        pytest.param(
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
            "app-gnome-python3-4242.scope\n",
            id="v2 user service",
        ),
        pytest.param(v1_file("/system.slice/nvidia-persistenced.service"), id="v1 service"),
        pytest.param(v1_file("/user.slice/user-0.slice/session-c1.scope"), id="v1 session"),
        pytest.param(f"0::/system.slice/docker-{CONTAINER_ID}.scope\n", id="v2 docker"),
        pytest.param(v1_file(f"/docker/{CONTAINER_ID}"), id="v1 docker cgroupfs"),
        pytest.param("0::/\n", id="root cgroup"),
        pytest.param("", id="empty file"),
    ],
)
def test_a_process_outside_kubernetes_and_slurm_has_no_owner(text: str) -> None:
    assert owner_from_cgroup(text) == NO_OWNER


def test_a_job_like_path_segment_outside_slurm_names_no_job() -> None:
    text = "0::/system.slice/cron.service/job_42\n"

    assert owner_from_cgroup(text) == NO_OWNER


# --- environ --------------------------------------------------------------------------------


def environ(*pairs: str) -> bytes:
    """A /proc/<pid>/environ block: NUL-terminated KEY=value entries."""
    return b"".join(p.encode() + b"\x00" for p in pairs)


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(environ("SLURM_JOB_ID=42", "HOME=/home/a", "PATH=/usr/bin"), id="first"),
        pytest.param(environ("HOME=/home/a", "SLURM_JOB_ID=42", "PATH=/usr/bin"), id="middle"),
        pytest.param(environ("HOME=/home/a", "PATH=/usr/bin", "SLURM_JOB_ID=42"), id="last"),
        pytest.param(
            environ("HOME=/home/a", "SLURM_JOB_ID=42")[:-1], id="last, without a final NUL"
        ),
        pytest.param(environ("SLURM_JOB_ID=42"), id="alone"),
    ],
)
def test_slurm_job_id_in_the_environ_names_the_job_wherever_it_sits(block: bytes) -> None:
    assert owner_from_environ(block) == slurm_job("42")


def test_an_environ_without_slurm_job_id_names_no_owner() -> None:
    block = environ("HOME=/home/a", "SLURM_CONF=/etc/slurm/slurm.conf", "CUDA_VISIBLE_DEVICES=0")

    assert owner_from_environ(block) == NO_OWNER


def test_an_empty_environ_names_no_owner() -> None:
    assert owner_from_environ(b"") == NO_OWNER


@pytest.mark.parametrize(
    "decoy",
    [
        "XSLURM_JOB_ID=9",
        "SLURM_JOB_ID_OLD=9",
        "SLURM_JOB_ID_OLD=",
        "OLD_SLURM_JOB_ID=9",
        "NOTE=SLURM_JOB_ID=9",
        "SLURM_JOB_ID=",
        "SLURM_JOB_ID=abc",
    ],
)
def test_a_variable_that_only_looks_like_slurm_job_id_names_no_owner(decoy: str) -> None:
    block = environ("HOME=/home/a", decoy, "PATH=/usr/bin")

    assert owner_from_environ(block) == NO_OWNER


@pytest.mark.parametrize("decoy", ["XSLURM_JOB_ID=9", "SLURM_JOB_ID_OLD=9", "SLURM_JOB_ID_OLD="])
def test_a_decoy_next_to_the_real_variable_does_not_hide_or_replace_it(decoy: str) -> None:
    assert owner_from_environ(environ(decoy, "SLURM_JOB_ID=42")) == slurm_job("42")
    assert owner_from_environ(environ("SLURM_JOB_ID=42", decoy)) == slurm_job("42")
