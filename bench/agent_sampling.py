"""What the node agent costs a node, over the stand-in libnvidia-ml.so.1 with 8 GPUs.

Prints one JSON line. The sampler alone, against a fake host: observer_us_per_gpu (the lean
tier with GPM's activity, per GPU), raw_nvml_us_per_gpu (the same NVML calls in a bare loop),
ratio, agent_tick_us (a whole tick) and cpu_percent_of_one_core_at_1hz; `gpm`, the part of
both that GPM's two calls per GPU and tick are (nvmlGpmSampleGet, nvmlGpmMetricsGet):
observer_us_per_gpu through the adapter's `activity`, raw_nvml_us_per_gpu in a bare loop.
The stand-in's GPM answers from memory: what the real driver's counter reads cost is not in
these figures.

Then `live`, per owner directory (bench/live_node.py: `kubelet`, `slurm`; one this machine
cannot provide says why): 8 GPUs x 4 live processes read through the real /proc, the agent
as `observer agent` builds it, measured twice at 1 Hz for `--seconds`:
- in_process: build_agent ticked here; time.process_time() of this process per tick, which
  holds the stand-in kubelet's serving when it is the owner directory, and apart the commands
  it ran (getrusage of the children that ended: scontrol and squeue on Slurm);
- running_agent: `observer agent --config <tmp>` started as a subprocess, utime+stime from its
  /proc/<pid>/stat after its start-up, and apart the commands it ran (cutime+cstime), its Xid
  event thread (the stand-in's event wait polls; NVML's blocks), and the stand-in kubelet's
  serving in this process meanwhile; its resident set at the end (rss_bytes);
and how often the owner directory was read, where it counts its reads (the stand-in
kubelet counts its List calls; Slurm's are not counted), against the most TrackedOwners
allows. processes_by_owner_phase is all `running` on an undisturbed run: anything else
means an owner ended during it (on a shared Slurm, someone's scancel).

With `--nvitop-exporter PATH`, `nvitop_exporter` on each live node: that exporter over the
same stand-in library (LD_LIBRARY_PATH) and the same live processes, at its 1 s interval,
measured as the running agent is; processes_seen counts the pids its /metrics listed.

    OBSERVER_TEST_FAKE_NVML_LIB=.build/fake-nvml/libnvidia-ml.so.1 PYTHONPATH=. \
        SLURM_CONF=/tmp/observer-infra/slurm/etc/slurm.conf python bench/agent_sampling.py \
        [--nvitop-exporter /tmp/nvitop-venv/bin/nvitop-exporter]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
from live_node import GPUS, PROCESSES_PER_GPU, LiveNode, Unavailable, live_node
from prometheus_client import CollectorRegistry

from observer import codec
from observer.agent.attribution import Attributor
from observer.agent.main import build_agent
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.clock import SystemClock
from observer.gpu.nvml import NvmlGpuBackend
from observer.metrics import AgentMetrics
from observer.ownership.fake import FakeHost
from observer.settings import Settings
from observer.settings.detectors import NodeLeakSettings

ROUNDS = 2000
REPO = Path(__file__).resolve().parent.parent


def _state() -> str:
    lines = []
    for i in range(GPUS):
        procs = f"{1000 + i}:{20 * 2**30},{2000 + i}:{2**30}"
        lines.append(
            f"gpu utilization_gpu_percent=90 utilization_memory_percent=40 "
            f"memory_used_bytes={22 * 2**30} memory_total_bytes={141 * 2**30} "
            f"power_milliwatts=650000 temperature_celsius=60 sm_clock_mhz=1980 "
            f"performance_state=0 energy_millijoules=123456 processes={procs} "
            f"sm_active_percent=70 sm_occupancy_percent=35 tensor_active_percent=40 "
            f"dram_active_percent=55"
        )
    return "\n".join(lines) + "\n"


class _RawGpm:
    """GPM in a bare loop: per GPU two sample buffers, one metrics request for GpmActivity's
    four metrics, a sample taken and the metrics of the last two asked each round."""

    def __init__(self, handles: list[pynvml.c_nvmlDevice_t]) -> None:
        self.handles = handles
        self.samples = [[pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()] for _ in handles]
        self.request = pynvml.c_nvmlGpmMetricsGet_t()
        self.request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        self.request.numMetrics = 4
        for metric, metric_id in zip(
            self.request.metrics,
            (
                pynvml.NVML_GPM_METRIC_SM_UTIL,
                pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
                pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
            ),
            strict=False,
        ):
            metric.metricId = metric_id
        for h, (first, _) in zip(handles, self.samples, strict=True):
            pynvml.nvmlGpmSampleGet(h, first)

    def round(self) -> None:
        for h, pair in zip(self.handles, self.samples, strict=True):
            pynvml.nvmlGpmSampleGet(h, pair[1])
            self.request.sample1, self.request.sample2 = pair
            pynvml.nvmlGpmMetricsGet(self.request)
            pair.reverse()

    def close(self) -> None:
        for pair in self.samples:
            for sample in pair:
                pynvml.nvmlGpmSampleFree(sample)


def _raw_round(handles: list[pynvml.c_nvmlDevice_t], gpm: _RawGpm | None) -> None:
    """The sampler's lean calls; GPM's too where the GPUs have it (`gpm`)."""
    if gpm is not None:
        gpm.round()
    for h in handles:
        pynvml.nvmlDeviceGetUtilizationRates(h)
        pynvml.nvmlDeviceGetMemoryInfo(h)
        pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        pynvml.nvmlDeviceGetPowerUsage(h)
        pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
        pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        pynvml.nvmlDeviceGetPerformanceState(h)
        pynvml.nvmlDeviceGetTotalEccErrors(
            h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC
        )
        address = ctypes.cast(h, ctypes.c_void_p).value
        if address not in _NO_MIG:
            try:
                pynvml.nvmlDeviceGetMigMode(h)
            except pynvml.NVMLError:  # a GPU without MIG: the sampler asks it once, as here
                _NO_MIG.add(address)


# The handles (by address) whose GPU answered that it has no MIG.
_NO_MIG: set[int | None] = set()


def _per_gpu_us(run: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(5):  # best of five: the least disturbed by the rest of the machine
        started = time.perf_counter()
        for _ in range(rounds):
            run()
        best = min(best, time.perf_counter() - started)
    return best / rounds / GPUS * 1e6


def _snapshot_summary(snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """What the agent made of the node: its processes' owner phases and its open findings."""
    if snapshot is None:
        return {"snapshot": None}
    allocation = snapshot["allocation"]
    return {
        "processes_by_owner_phase": dict(Counter(p["owner_phase"] for p in snapshot["processes"])),
        "open_findings_by_detector": dict(
            Counter(f["detector"] for f in snapshot["findings"] if f["closed_at"] is None)
        ),
        "owner_directory_up": allocation["up"] if allocation else None,
    }


def _owner_reads(node: LiveNode, before: int | None, seconds: int) -> dict[str, Any]:
    """The owner directory's reads over `seconds`, and the most TrackedOwners may make then
    while no new owner appears: one per owners_interval_seconds, the window's two ends
    included."""
    interval = Settings.model_validate({"agent": node.agent}).agent.owners_interval_seconds
    at_most = math.floor(seconds / interval) + 1
    if node.reads is None or before is None:
        return {"reads": None, "at_most": at_most}
    return {"reads": node.reads() - before, "at_most": at_most}


def _in_process(node: LiveNode, seconds: int) -> dict[str, Any]:
    os.environ.update(node.env)
    agent = build_agent(
        Settings.model_validate({"agent": node.agent}), SystemClock(), CollectorRegistry()
    )
    try:
        agent.tick()  # the first tick inspects every process and reads the owners: start-up
        reads = node.reads() if node.reads else None
        started_cpu, started = time.process_time(), time.monotonic()
        started_commands = _commands_cpu_seconds()
        for tick in range(1, seconds + 1):
            agent.tick()
            time.sleep(max(0.0, started + tick - time.monotonic()))
        cpu = time.process_time() - started_cpu
        commands = _commands_cpu_seconds() - started_commands
        snapshot = agent.snapshot()
    finally:
        agent.close()
    return {
        "ticks": seconds,
        "cpu_seconds_per_tick": round(cpu / seconds, 6),
        "cpu_percent_of_one_core_at_1hz": round(cpu / seconds * 100, 3),
        "commands_cpu_percent_of_one_core": round(commands / seconds * 100, 3),
        "owner_reads": _owner_reads(node, reads, seconds),
        **_snapshot_summary(codec.snapshot_to_json(snapshot) if snapshot else None),
    }


def _commands_cpu_seconds() -> float:
    """CPU of this process's children that ended (the live node's own run to the end)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime+stime, cutime+cstime) of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    # fields[0] is the state, field 3 of proc(5): utime is field 14
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime) / tick, (cutime + cstime) / tick


def _rss_bytes(pid: int) -> int:
    """The resident set of a process now (VmRSS of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # in kB
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return str(answer.read().decode())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until(
    ready: Callable[[], bool], proc: subprocess.Popen[bytes], what: str, log: Path
) -> None:
    """Until `ready()` (its server answers as started), or RuntimeError when the process ended
    or a minute passed."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if ready():
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: see {log}")
        time.sleep(0.2)


def _running_agent(node: LiveNode, seconds: int, work: Path) -> dict[str, Any]:
    port = _free_port()
    config = work / "agent.yaml"
    config.write_text(
        json.dumps({"agent": {**node.agent, "listen_host": "127.0.0.1", "listen_port": port}})
    )
    observer = Path(sys.executable).parent / "observer"
    env = {**os.environ, **node.env, "PYTHONPATH": str(REPO)}
    with (work / "agent.log").open("wb") as log:
        agent = subprocess.Popen(
            [str(observer), "agent", "--config", str(config)], env=env, stdout=log, stderr=log
        )
    try:
        _wait_until(
            lambda: _get(f"http://127.0.0.1:{port}/healthz")["status"] == "ok",
            agent,
            "observer agent",
            work / "agent.log",
        )
        time.sleep(2)  # past its start-up: imports, NVML, the first reads
        reads = node.reads() if node.reads else None
        bench_cpu = time.process_time()
        cost = _whole_process(agent.pid, seconds, xid_thread=True)
        bench_cpu = time.process_time() - bench_cpu
        snapshot = _get(f"http://127.0.0.1:{port}/v1/snapshot")
        reads_summary = _owner_reads(node, reads, seconds)
    finally:
        agent.terminate()
        agent.wait(30)
    result = {**cost, "owner_reads": reads_summary, **_snapshot_summary(snapshot)}
    if node.reads is not None:  # the owner directory served from here: what that cost
        result["stand_in_cpu_percent_of_one_core"] = round(bench_cpu / seconds * 100, 3)
    return result


def _whole_process(pid: int, seconds: int, xid_thread: bool = False) -> dict[str, Any]:
    """A running process over `seconds`: its CPU (utime+stime), apart the commands it ran
    (cutime+cstime), and its resident set at the end. With `xid_thread` (an agent), also its
    Xid event thread's CPU: the thread found in nanosleep(2), inside the stand-in's
    nvmlEventSetWait_v2, which polls its state file every 2 ms where NVML blocks in the
    driver (the agent's other threads wait on locks); None when none was found."""
    own, children = _cpu_seconds(pid)
    threads = _threads_cpu_seconds(pid)
    time.sleep(seconds)
    own_after, children_after = _cpu_seconds(pid)
    result: dict[str, Any] = {
        "seconds": seconds,
        "cpu_percent_of_one_core": round((own_after - own) / seconds * 100, 3),
        "commands_cpu_percent_of_one_core": round((children_after - children) / seconds * 100, 3),
    }
    if xid_thread:
        threads_after = _threads_cpu_seconds(pid)
        sleeper = _nanosleeping_thread(pid)
        result["xid_thread_cpu_percent_of_one_core"] = (
            round((threads_after[sleeper] - threads.get(sleeper, 0.0)) / seconds * 100, 3)
            if sleeper is not None and sleeper in threads_after
            else None
        )
    return {**result, "rss_bytes": _rss_bytes(pid)}


def _threads_cpu_seconds(pid: int) -> dict[str, float]:
    """utime+stime of each thread of a process, by thread id, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = (task / "stat").read_text().rpartition(")")[2].split()
        cpu[task.name] = (int(fields[11]) + int(fields[12])) / tick
    return cpu


_NANOSLEEP_SYSCALLS = {"35", "230"}  # x86-64 nanosleep, clock_nanosleep


def _nanosleeping_thread(pid: int) -> str | None:
    """The thread of a process found in nanosleep(2) most often over 20 looks, 10 ms apart
    (/proc/<pid>/task/<tid>/syscall: the number of the call it is blocked in)."""
    seen: Counter[str] = Counter()
    for _ in range(20):
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                call = (task / "syscall").read_text().split()[0]
            except (OSError, IndexError):
                continue
            if call in _NANOSLEEP_SYSCALLS:
                seen[task.name] += 1
        time.sleep(0.01)
    return seen.most_common(1)[0][0] if seen else None


def _nvitop_exporter(
    exporter: Path, node: LiveNode, lib: Path, seconds: int, work: Path
) -> dict[str, Any]:
    """nvitop-exporter over the same stand-in library and the same live processes, at its
    1 s interval, measured as the running agent is. processes_seen: the pids its /metrics
    listed (every one of the node's, when it read them all)."""
    port = _free_port()
    env = {**os.environ, **node.env, "LD_LIBRARY_PATH": str(lib.parent)}
    argv = [str(exporter), "--bind-address", "127.0.0.1", "--port", str(port), "--interval", "1"]
    with (work / "nvitop-exporter.log").open("wb") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    try:
        _wait_until(
            lambda: "gpu_utilization" in _get_text(f"http://127.0.0.1:{port}/metrics"),
            proc,
            "nvitop-exporter",
            work / "nvitop-exporter.log",
        )
        time.sleep(2)  # past its start-up, as for the agent
        cost = _whole_process(proc.pid, seconds)
        metrics = _get_text(f"http://127.0.0.1:{port}/metrics")
    finally:
        proc.terminate()
        proc.wait(30)
    pids = {
        line.partition('pid="')[2].partition('"')[0]
        for line in metrics.splitlines()
        if line.startswith("process_gpu_memory_")
    }
    return {"argv": argv, **cost, "processes_seen": len(pids)}


def _live(owners: str, lib: Path, seconds: int, exporter: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            with live_node(owners, lib, work) as node:
                result = {
                    "owner_directory": node.owner_directory,
                    "gpus": GPUS,
                    "processes": GPUS * PROCESSES_PER_GPU,
                    "in_process": _in_process(node, seconds),
                    "running_agent": _running_agent(node, seconds, work),
                }
                if exporter is not None:
                    result["nvitop_exporter"] = _nvitop_exporter(exporter, node, lib, seconds, work)
                return result
        except Unavailable as exc:
            return {"unavailable": str(exc)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60, help="each live run, at 1 Hz")
    parser.add_argument("--owners", default="kubelet,slurm", help="live owner directories")
    parser.add_argument(
        "--nvitop-exporter",
        type=Path,
        help="an nvitop-exporter executable: measure it on each live node too",
    )
    args = parser.parse_args()
    lib = Path(
        os.environ.get("OBSERVER_TEST_FAKE_NVML_LIB", REPO / ".build/fake-nvml/libnvidia-ml.so.1")
    )
    if not lib.exists():
        print(
            f"build the stand-in library first: bash deploy/local/build-fake-nvml.sh ({lib})",
            file=sys.stderr,
        )
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.write_text(_state())
        os.environ["FAKE_NVML_STATE"] = str(state)

        clock = SystemClock()
        backend = NvmlGpuBackend(clock, lib)
        metrics = AgentMetrics(CollectorRegistry())
        # Counters once at start-up, then never again within the run: lean tier only.
        sampler = Sampler(backend, clock, metrics, counters_interval_seconds=1e9)
        sampler.tick()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(GPUS)]
        raw_gpm = _RawGpm(handles)

        raw = _per_gpu_us(lambda: _raw_round(handles, raw_gpm), ROUNDS)
        observer = _per_gpu_us(sampler.tick, ROUNDS)
        gpm_raw = _per_gpu_us(raw_gpm.round, ROUNDS)
        gpm_observer = _per_gpu_us(lambda: [backend.activity(i) for i in range(GPUS)], ROUNDS)
        raw_gpm.close()

        host = FakeHost()
        agent = NodeAgent(
            "bench",
            Sampler(backend, clock, metrics, 1e9),
            Attributor(host, host),
            NodeLeakSettings(),
            clock,
            metrics,
        )
        agent.tick()
        tick_us = _per_gpu_us(agent.tick, ROUNDS // 4) * GPUS

    print(
        json.dumps(
            {
                "gpus": GPUS,
                "observer_us_per_gpu": round(observer, 2),
                "raw_nvml_us_per_gpu": round(raw, 2),
                "ratio": round(observer / raw, 2),
                "gpm": {
                    "observer_us_per_gpu": round(gpm_observer, 2),
                    "raw_nvml_us_per_gpu": round(gpm_raw, 2),
                },
                "agent_tick_us": round(tick_us, 1),
                "cpu_percent_of_one_core_at_1hz": round(tick_us / 1e6 * 100, 3),
                "library": "stand-in libnvidia-ml.so.1 (state cached; see deploy/local/fake_nvml)",
                "live": {
                    o: _live(o, lib, args.seconds, args.nvitop_exporter)
                    for o in args.owners.split(",")
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
