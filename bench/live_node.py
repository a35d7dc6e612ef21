"""A node for bench/agent_sampling.py's real-path figures: the stand-in NVML listing live
processes of this machine, and an owner directory that knows them.

8 stand-in GPUs each list 4 live `sleep` processes, which the agent reads through the real
/proc (stat, cmdline, status, exe, cgroup, environ). Two owner directories:

- `kubelet`: the stand-in gRPC kubelet of tests/ownership/kubelet_stand_in.py, served from
  this process, one pod per GPU whose container was given that GPU; the processes are put in
  their pod's cgroup (a `pod<uid>/<container>` directory of the cgroup v1 `pids` hierarchy),
  which takes root.
- `slurm`: this machine's Slurm (`SLURM_CONF`), four one-GPU jobs held on node n1; the
  processes carry their job's `SLURM_JOB_ID` in their environment (GPU i's, job i mod 4).
  Its gres.conf gives a node 4 GPUs: GPUs 4-7 are ones Slurm does not know, whose processes
  the gpu_not_assigned rule leaves alone.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.ownership.kubelet_stand_in import Pod, StandInKubelet, serving

GPUS = 8
PROCESSES_PER_GPU = 4
_PIDS_CGROUP = Path("/sys/fs/cgroup/pids")
_SLURM_NODE = "n1"
_SLURM_GPUS = 4


class Unavailable(Exception):
    """This machine cannot provide the owner directory; the message says why."""


@dataclass(frozen=True)
class LiveNode:
    owner_directory: str  # what answers for the owners, in words
    agent: dict[str, Any]  # the `agent` settings group, as a config file holds it
    env: dict[str, str]  # the agent's process environment
    reads: Callable[[], int] | None  # the owner directory's reads so far, where it counts them


def gpu_uuid(index: int) -> str:
    return f"GPU-00000000-0000-0000-0000-{index:012d}"  # the stand-in library's identity


@contextmanager
def live_node(owners: str, lib: Path, work: Path) -> Iterator[LiveNode]:
    """`owners`: `kubelet` or `slurm`. Raises Unavailable when this machine cannot provide
    that owner directory. `work`: a scratch directory."""
    setup = _kubelet if owners == "kubelet" else _slurm
    with setup(work) as (by_gpu, node):
        state = work / "nvml-state"
        state.write_text(_nvml_state(by_gpu))
        agent = {"nvml_library_path": str(lib), "interval_seconds": 1.0, **node.agent}
        yield LiveNode(
            node.owner_directory, agent, {**node.env, "FAKE_NVML_STATE": str(state)}, node.reads
        )


@contextmanager
def _sleepers(env_of_gpu: Callable[[int], dict[str, str]]) -> Iterator[list[list[int]]]:
    """PROCESSES_PER_GPU live processes for each GPU, by GPU index."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for index in range(GPUS):
            env = {**os.environ, **env_of_gpu(index)}
            started += [
                subprocess.Popen(["sleep", "3600"], env=env) for _ in range(PROCESSES_PER_GPU)
            ]
        pids = [p.pid for p in started]
        yield [pids[i : i + PROCESSES_PER_GPU] for i in range(0, len(pids), PROCESSES_PER_GPU)]
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def _nvml_state(by_gpu: list[list[int]]) -> str:
    lines = []
    for pids in by_gpu:
        procs = ",".join(f"{pid}:{5 * 2**30}" for pid in pids)
        lines.append(
            f"gpu utilization_gpu_percent=90 utilization_memory_percent=40 "
            f"memory_used_bytes={len(pids) * 5 * 2**30} memory_total_bytes={141 * 2**30} "
            f"power_milliwatts=650000 temperature_celsius=60 sm_clock_mhz=1980 "
            f"performance_state=0 energy_millijoules=123456 processes={procs}"
        )
    return "\n".join(lines) + "\n"


@contextmanager
def _kubelet(work: Path) -> Iterator[tuple[list[list[int]], LiveNode]]:
    if not os.access(_PIDS_CGROUP, os.W_OK):
        raise Unavailable(f"putting processes in pod cgroups takes root ({_PIDS_CGROUP})")
    base = _PIDS_CGROUP / f"observer-bench-{os.getpid()}"
    # AF_UNIX paths are short (108 bytes): the socket stays directly under /tmp.
    socket = Path(f"/tmp/observer-bench-{os.getpid()}.sock")
    kubelet = StandInKubelet(socket, work / "pods", [gpu_uuid(i) for i in range(GPUS)])
    try:
        with _sleepers(lambda _: {}) as by_gpu, serving(kubelet):
            for index, pids in enumerate(by_gpu):
                pod = Pod("bench", f"train-{index}", str(uuid.uuid4()))
                pod.containers["worker"] = [("nvidia.com/gpu", [gpu_uuid(index)])]
                kubelet.start_pod(pod)
                cgroup = base / f"pod{pod.uid}" / secrets.token_hex(32)
                cgroup.mkdir(parents=True)
                for pid in pids:
                    (cgroup / "cgroup.procs").write_text(str(pid))
            yield (
                by_gpu,
                LiveNode(
                    "kubelet: the stand-in gRPC kubelet (tests/ownership/kubelet_stand_in.py) "
                    "served from the benchmark's process; each process in its pod's cgroup",
                    {
                        "node_name": "bench",
                        "owners": "kubelet",
                        "pod_resources_socket": str(socket),
                        "pod_logs_dir": str(kubelet.pod_logs_dir),
                    },
                    {},
                    lambda: kubelet.calls.count("List"),
                ),
            )
    finally:
        # deepest first; a cgroup empties once its processes are reaped
        for cgroup in sorted(base.glob("**/"), key=lambda p: len(p.parts), reverse=True):
            cgroup.rmdir()


@contextmanager
def _slurm(work: Path) -> Iterator[tuple[list[list[int]], LiveNode]]:
    conf = os.environ.get("SLURM_CONF")
    if not conf or not shutil.which("sbatch"):
        raise Unavailable("no Slurm here: SLURM_CONF unset or sbatch not on PATH")
    jobs: list[str] = []
    try:
        for _ in range(_SLURM_GPUS):
            submitted = _slurm_command(
                "sbatch",
                "--parsable",
                "-w",
                _SLURM_NODE,
                "--gres=gpu:1",
                "-J",
                "agent-sampling-bench",  # "observer-" marks probe jobs, which controllers cancel
                "-o",
                "/dev/null",
                "--wrap",
                "sleep 3600",
            )
            jobs.append(submitted.split(";")[0])
        _wait_running(jobs)
        with _sleepers(lambda index: {"SLURM_JOB_ID": jobs[index % len(jobs)]}) as by_gpu:
            yield (
                by_gpu,
                LiveNode(
                    f"slurm: this machine's Slurm ({conf}), {len(jobs)} one-GPU jobs on node "
                    f"{_SLURM_NODE}; each process names its job in its environ",
                    {"node_name": _SLURM_NODE, "owners": "slurm"},
                    {"SLURM_CONF": conf},
                    None,
                ),
            )
    finally:
        if jobs:
            subprocess.run(["scancel", *jobs], check=False)


def _slurm_command(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise Unavailable(f"{argv[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def _wait_running(jobs: list[str], timeout_seconds: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while True:
        states = _slurm_command("squeue", "-h", "-o", "%T", "-j", ",".join(jobs)).split()
        if states.count("RUNNING") == len(jobs):
            return
        if time.monotonic() > deadline:
            raise Unavailable(f"the benchmark's jobs did not start on {_SLURM_NODE}: {states}")
        time.sleep(0.5)
