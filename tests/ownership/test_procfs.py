"""ProcFs reads the host's /proc: a pid's start time (which tells a reused pid apart), its
command line, its executable, its uid and user name, and its owner (cgroup first, then
SLURM_JOB_ID in its environ). These tests
build a fake /proc tree on disk and read it the way the agent reads the real one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from observer.domain import NO_OWNER, Owner, OwnerKind
from observer.ownership.base import ProcessInfo
from observer.ownership.procfs import ProcFs

POD_UID = "3f1c9a2e-7b4d-4e8f-9a01-5c6d7e8f9a0b"
CONTAINER_ID = "4c7a1f0e9b2d3c8a5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d"
POD_CGROUP = (
    "0::/kubepods.slice/kubepods-burstable.slice/"
    f"kubepods-burstable-pod{POD_UID.replace('-', '_')}.slice/"
    f"cri-containerd-{CONTAINER_ID}.scope\n"
)
SESSION_CGROUP = "0::/user.slice/user-1000.slice/session-3.scope\n"
SLURM_STEPD_CGROUP = "0::/system.slice/slurmd.service\n"


def stat_line(pid: int, comm: str, starttime: int) -> str:
    """A /proc/<pid>/stat line laid out as proc(5) documents it: starttime is field 22."""
    after_comm = [
        "S",  # 3 state
        "1",  # 4 ppid
        str(pid),  # 5 pgrp
        str(pid),  # 6 session
        "0",  # 7 tty_nr
        "-1",  # 8 tpgid
        "4194560",  # 9 flags
        "1200",  # 10 minflt
        "0",  # 11 cminflt
        "3",  # 12 majflt
        "0",  # 13 cmajflt
        "530",  # 14 utime
        "77",  # 15 stime
        "0",  # 16 cutime
        "0",  # 17 cstime
        "20",  # 18 priority
        "0",  # 19 nice
        "12",  # 20 num_threads
        "0",  # 21 itrealvalue
        str(starttime),  # 22 starttime
        "8589934592",  # 23 vsize
        "40960",  # 24 rss
    ]
    return f"{pid} ({comm}) " + " ".join(after_comm) + " 0" * 28 + "\n"


def write_process(
    root: Path,
    pid: int,
    *,
    comm: str = "python3",
    starttime: int = 123_456,
    cmdline: list[str] | None = None,
    cgroup: str = SESSION_CGROUP,
    environ: dict[str, str] | None = None,
    uid: int = 1000,
    exe: str | None = None,
) -> Path:
    """A process as /proc shows it; `exe` None: its exe link cannot be read, as for a process
    of another user without ptrace rights over it."""
    base = root / str(pid)
    base.mkdir(parents=True, exist_ok=True)
    (base / "stat").write_text(stat_line(pid, comm, starttime))
    (base / "comm").write_text(comm[:15] + "\n")
    (base / "status").write_text(
        f"Name:\t{comm[:15]}\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t{pid}\n"
        f"Pid:\t{pid}\nPPid:\t1\nUid:\t{uid}\t{uid + 1}\t{uid + 1}\t{uid + 1}\n"
        f"Gid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
    )
    if exe is not None:
        (base / "exe").symlink_to(exe)
    argv = ["python3", "train.py"] if cmdline is None else cmdline
    (base / "cmdline").write_bytes(b"".join(a.encode() + b"\x00" for a in argv))
    (base / "cgroup").write_text(cgroup)
    env = {"HOME": "/root", "PATH": "/usr/bin"} if environ is None else environ
    (base / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\x00" for k, v in env.items()))
    return base


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    root.mkdir()
    return root


# --- inspect --------------------------------------------------------------------------------


def test_a_pod_process_is_described_by_its_start_time_command_and_pod(proc: Path) -> None:
    write_process(
        proc,
        4242,
        starttime=987_654,
        cmdline=["python3", "-m", "torch.distributed.run", "--nproc-per-node=8", "train.py"],
        cgroup=POD_CGROUP,
    )

    assert ProcFs(proc).inspect(4242) == ProcessInfo(
        pid=4242,
        start_ticks=987_654,
        command="python3 -m torch.distributed.run --nproc-per-node=8 train.py",
        owner=Owner(OwnerKind.POD, POD_UID, CONTAINER_ID),
        executable="python3",
        uid=1000,
        user=None,
    )


def test_the_executable_is_the_programs_file_name_from_its_exe_link(proc: Path) -> None:
    write_process(proc, 10, cmdline=["python3", "train.py"], exe="/usr/bin/python3.11")
    write_process(proc, 11, cmdline=["./a.out"], exe="/scratch/build/gpu_burn (deleted)")

    infos = [ProcFs(proc).inspect(pid) for pid in (10, 11)]

    assert [info.executable if info else None for info in infos] == ["python3.11", "gpu_burn"]


@pytest.mark.parametrize(
    ("cmdline", "comm", "executable"),
    [
        (["/opt/conda/bin/torchrun", "--nproc-per-node=8", "train.py"], "torchrun", "torchrun"),
        # a title rewritten by setproctitle is no program name, and may hold arguments
        (["ray::Trainer.train --token=s3cr3t"], "ray::Trainer", "ray::Trainer"),
        ([], "kworker/0:1", "kworker/0:1"),
    ],
)
def test_without_the_exe_link_the_executable_is_argv0_or_else_comm(
    proc: Path, cmdline: list[str], comm: str, executable: str
) -> None:
    write_process(proc, 12, cmdline=cmdline, comm=comm)

    info = ProcFs(proc).inspect(12)

    assert info is not None and info.executable == executable


def test_the_uid_is_the_real_one_and_named_from_the_hosts_passwd_file(
    proc: Path, tmp_path: Path
) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text(
        "root:x:0:0:root:/root:/bin/bash\n"
        "alice:x:1000:1000:Alice:/home/alice:/bin/bash\n"
        "bob:x:1001:1001::/home/bob:/bin/sh\n"
    )
    write_process(proc, 20, uid=1000)  # effective uid 1001, as after a setuid
    write_process(proc, 21, uid=4242)

    procfs = ProcFs(proc, passwd)
    named, unnamed = procfs.inspect(20), procfs.inspect(21)

    assert named is not None and (named.uid, named.user) == (1000, "alice")
    assert unnamed is not None and (unnamed.uid, unnamed.user) == (4242, None)


def test_without_a_passwd_file_or_a_status_file_the_name_or_the_uid_is_unknown(
    proc: Path, tmp_path: Path
) -> None:
    write_process(proc, 30, uid=0)
    (write_process(proc, 31) / "status").unlink()

    unnamed = ProcFs(proc).inspect(30)
    unreadable = ProcFs(proc, tmp_path / "no-passwd").inspect(31)

    assert unnamed is not None and (unnamed.uid, unnamed.user) == (0, None)
    assert unreadable is not None and (unreadable.uid, unreadable.user) == (None, None)


@pytest.mark.parametrize(
    "comm",
    ["python3 (x) y", "a) S 1 2 3", "(((", ")", "pt_main_thread", "my proc"],
)
def test_the_start_time_is_read_past_a_command_name_with_spaces_and_parentheses(
    proc: Path, comm: str
) -> None:
    write_process(proc, 77, comm=comm, starttime=31_337)

    info = ProcFs(proc).inspect(77)

    assert info is not None
    assert info.start_ticks == 31_337


def test_a_slurm_task_outside_its_jobs_cgroup_is_owned_by_the_job_in_its_environ(
    proc: Path,
) -> None:
    write_process(
        proc,
        5150,
        cgroup=SLURM_STEPD_CGROUP,
        environ={"HOME": "/home/a", "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0"},
    )

    info = ProcFs(proc).inspect(5150)

    assert info is not None
    assert info.owner == Owner(OwnerKind.SLURM_JOB, "42")


def test_the_cgroup_owner_wins_over_a_slurm_job_id_in_the_environ(proc: Path) -> None:
    write_process(proc, 5151, cgroup=POD_CGROUP, environ={"SLURM_JOB_ID": "42"})

    info = ProcFs(proc).inspect(5151)

    assert info is not None
    assert info.owner == Owner(OwnerKind.POD, POD_UID, CONTAINER_ID)


def test_a_process_whose_environ_cannot_be_read_has_no_owner_rather_than_failing(
    proc: Path,
) -> None:
    base = write_process(proc, 6000, cgroup=SESSION_CGROUP)
    (base / "environ").unlink()
    (base / "environ").mkdir()  # reading it raises IsADirectoryError, an OSError

    info = ProcFs(proc).inspect(6000)

    assert info is not None
    assert info.owner == NO_OWNER
    assert info.command == "python3 train.py"


def test_a_process_whose_cgroup_cannot_be_read_falls_back_to_its_environ(proc: Path) -> None:
    base = write_process(proc, 6001, environ={"SLURM_JOB_ID": "77"})
    (base / "cgroup").unlink()
    (base / "cgroup").mkdir()

    info = ProcFs(proc).inspect(6001)

    assert info is not None
    assert info.owner == Owner(OwnerKind.SLURM_JOB, "77")


def test_a_process_with_no_cgroup_or_environ_file_has_no_owner(proc: Path) -> None:
    base = write_process(proc, 6002)
    (base / "cgroup").unlink()
    (base / "environ").unlink()

    info = ProcFs(proc).inspect(6002)

    assert info is not None
    assert info.owner == NO_OWNER


def test_a_process_with_an_empty_command_line_has_no_command(proc: Path) -> None:
    # Kernel threads and zombies have an empty cmdline.
    write_process(proc, 2, comm="kthreadd", cmdline=[])

    info = ProcFs(proc).inspect(2)

    assert info is not None
    assert info.command is None


def test_a_pid_with_no_directory_is_no_process(proc: Path) -> None:
    write_process(proc, 100)

    assert ProcFs(proc).inspect(101) is None


# --- alive ----------------------------------------------------------------------------------


def test_a_process_is_alive_while_its_pid_directory_holds_the_same_start_time(
    proc: Path,
) -> None:
    write_process(proc, 4242, starttime=1000)
    procfs = ProcFs(proc)
    info = procfs.inspect(4242)
    assert info is not None

    assert procfs.alive(info) is True


def test_a_process_is_not_alive_once_its_pid_directory_is_gone(proc: Path) -> None:
    base = write_process(proc, 4242, starttime=1000)
    procfs = ProcFs(proc)
    info = procfs.inspect(4242)
    assert info is not None

    shutil.rmtree(base)

    assert procfs.alive(info) is False


def test_a_reused_pid_is_not_the_process_that_was_inspected(proc: Path) -> None:
    write_process(proc, 4242, starttime=1000, cmdline=["python3", "train.py"])
    procfs = ProcFs(proc)
    info = procfs.inspect(4242)
    assert info is not None

    write_process(proc, 4242, starttime=2000, cmdline=["bash"])

    assert procfs.alive(info) is False


def test_a_reused_pid_whose_new_command_name_has_parentheses_is_still_told_apart(
    proc: Path,
) -> None:
    write_process(proc, 4242, comm="python3", starttime=1000)
    procfs = ProcFs(proc)
    info = procfs.inspect(4242)
    assert info is not None

    write_process(proc, 4242, comm="python3 (x) y", starttime=2000)

    assert procfs.alive(info) is False
