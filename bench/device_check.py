"""The checks only a machine with a real NVIDIA GPU can make, in one command of a few minutes.

    bash bench/device_check.sh              # a GPU node: the real driver and libcuda.so.1
    bash bench/device_check.sh --stand-in   # anywhere: the stand-in libraries, to keep it working

Progress goes to stderr; the last line of stdout is one JSON object:
- device: the driver's version and each GPU's name and memory, as NVML gives them;
- burn: `observer probe gpu-burn` for --seconds on GPU 0 with `observer agent` beside it:
  the utilisation of GPU 0 the agent read each second (p50 and min over the burn's middle),
  and its SM activity from GPM likewise (`not_supported` on a GPU without GPM),
  the burn's own duty figure, whether the agent listed the burn's pid on GPU 0 and with what
  GPU memory, and the burn's CPU seconds per GPU-second (its context syncs blocking);
- sampling: the agent's sampler per GPU against the bare pynvml loop of the same calls
  (bench/agent_sampling.py's measure), on every GPU present; GPM's two calls apart (`gpm`,
  null on GPUs without GPM);
- xid: whether NVML's event set takes each GPU's Xid errors (`registered`, or the error);
- gpu_comm: `observer probe gpu-comm` across every GPU present: its exit code, each ordered
  pair's path (peer or not), GB/s and the rate it was judged against, and its failure line
  (null: none); `skipped` with one GPU (no pair);
- mig: each GPU's MIG mode as the agent's adapter reads it (`enabled`, `disabled`, or the read
  error's kind: `not_supported` on a GPU without MIG) and, where enabled, each MIG device (UUID,
  GPU and compute instance ids, memory, how many processes it lists) and what the MIG read adds
  to the GPU's lean sample (µs, the sample with it against the sample without);

On the stand-in the GPU's utilisation and process list are what the script writes into the
stand-in's state file, so `burn` proves the path (agent, attribution, JSON), not the GPU;
its peer copies run at the stand-in libcuda's configured rate (FAKE_CUDA_PEER_GBPS).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pynvml
from agent_sampling import (
    _cpu_seconds,
    _free_port,
    _get,
    _per_gpu_us,
    _raw_round,
    _RawGpm,
    _wait_until,
)
from prometheus_client import CollectorRegistry

from observer.agent.sampler import Sampler
from observer.clock import SystemClock
from observer.gpu.nvml import NvmlGpuBackend, NvmlXidEvents
from observer.metrics import AgentMetrics

REPO = Path(__file__).resolve().parent.parent
_SLICE_BYTES = 17_951_621_120  # an H200's 1g.18gb MIG device
SAMPLING_ROUNDS = 500
# One line of `observer probe gpu-comm` per ordered pair (observer/cli.py's say()).
PAIR_LINE = re.compile(
    r"^gpu-comm: GPU (\d+) -> GPU (\d+): (peer|no peer access), ([\d.]+) GB/s "
    r"\((?:expected ([\d.]+)|not judged)\): (ok|FAILED)$"
)
MIG_TIMING_ROUNDS = 200


def say(message: str) -> None:
    print(f"device_check: {message}", file=sys.stderr, flush=True)


def device(library: Path | None) -> dict[str, Any]:
    backend = NvmlGpuBackend(SystemClock(), library)
    info = backend.open()
    try:
        gpus = [backend.identify(index) for index in range(info.device_count)]
    finally:
        backend.close()
    return {
        "driver_version": info.driver_version,
        "gpus": [
            {"index": g.index, "name": g.name, "memory_total_bytes": g.memory_total_bytes}
            for g in gpus
        ],
    }


@contextmanager
def agent_beside(work: Path, library: Path | None, env: dict[str, str]) -> Iterator[str]:
    """`observer agent` at 1 Hz with no owner directory; yields its base URL."""
    port = _free_port()
    agent = {"interval_seconds": 1.0, "owners": "none", "listen_host": "127.0.0.1"}
    agent |= {"listen_port": port, "node_name": "device-check"}
    if library is not None:
        agent["nvml_library_path"] = str(library)
    config = work / "agent.yaml"
    config.write_text(json.dumps({"agent": agent}))
    log = work / "agent.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "observer.cli", "agent", "--config", str(config)],
            env=env,
            stdout=out,
            stderr=out,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until(lambda: _get(f"{base}/healthz")["status"] == "ok", proc, "the agent", log)
        yield base
    finally:
        proc.terminate()
        proc.wait(30)


def burn(work: Path, seconds: int, stand_in: Stand | None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": "0"}
    library = None
    if stand_in is not None:
        env |= stand_in.env
        library = stand_in.nvml
    with agent_beside(work, library, env) as base:
        command = [sys.executable, "-m", "observer.cli", "probe", "gpu-burn"]
        command += ["--seconds", str(seconds), "--memory-gib", "1"]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        if stand_in is not None:
            stand_in.busy(proc.pid)
        utilisation, attributed, memory = [], False, None
        sm_active: list[float | str | None] = []  # a ratio, "not_supported", or None
        started = time.monotonic()
        cpu_before = _cpu_seconds(proc.pid)[0]
        cpu = cpu_before
        while proc.poll() is None:
            time.sleep(1)
            elapsed = time.monotonic() - started
            try:
                cpu = _cpu_seconds(proc.pid)[0]
            except OSError:
                break  # it ended between poll() and the read
            snapshot = _get(f"{base}/v1/snapshot")
            gpu0 = next((g for g in snapshot["gpus"] if g["index"] == 0), None)
            if 0.2 * seconds < elapsed < 0.8 * seconds and gpu0 and gpu0["sample"]:
                utilisation.append(gpu0["sample"]["utilization_gpu_percent"])
                activity = gpu0.get("activity")
                sm_active.append(
                    activity["sm_active_ratio"] if isinstance(activity, dict) else activity
                )
            for process in snapshot["processes"]:
                if process["pid"] == proc.pid and process["gpu_index"] == 0:
                    attributed, memory = True, process["used_memory_bytes"]
        output, _ = proc.communicate()
    known = [u for u in utilisation if u is not None]
    ratios = [a for a in sm_active if isinstance(a, float | int)]
    return {
        "seconds": seconds,
        "exit_code": proc.returncode,
        "burn_says": output.strip().splitlines()[-1] if output.strip() else None,
        "utilization_gpu_percent": {
            "p50": statistics.median(known) if known else None,
            "min": min(known) if known else None,
            "samples": len(utilisation),
        },
        "sm_active_ratio": "not_supported"
        if "not_supported" in sm_active
        else {
            "p50": statistics.median(ratios) if ratios else None,
            "min": min(ratios) if ratios else None,
            "samples": len(sm_active),
        },
        "agent_attributed_pid": attributed,
        "agent_used_memory_bytes": memory,
        "cpu_seconds_per_gpu_second": round((cpu - cpu_before) / seconds, 4),
    }


def sampling(library: Path | None) -> dict[str, Any]:
    clock = SystemClock()
    backend = NvmlGpuBackend(clock, library)
    sampler = Sampler(backend, clock, AgentMetrics(CollectorRegistry()), 1e9)
    sampler.tick()  # opens NVML: pynvml's handles below are the sampler's library's
    try:
        gpus = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(gpus)]
        try:
            gpm: _RawGpm | None = _RawGpm(handles)
        except pynvml.NVMLError:
            gpm = None  # GPUs without GPM: the sampler makes no GPM calls either
        raw = _per_gpu_us(lambda: _raw_round(handles, gpm), SAMPLING_ROUNDS)
        observer = _per_gpu_us(sampler.tick, SAMPLING_ROUNDS)
        if gpm is not None:
            gpm_raw = _per_gpu_us(gpm.round, SAMPLING_ROUNDS)
            gpm_observer = _per_gpu_us(
                lambda: [backend.activity(i) for i in range(gpus)], SAMPLING_ROUNDS
            )
            gpm.close()
    finally:
        backend.close()
    # _per_gpu_us divides by bench's 8 GPUs; here it is the GPUs present.
    scale = 8 / gpus
    return {
        "gpus": gpus,
        "observer_us_per_gpu": round(observer * scale, 2),
        "raw_nvml_us_per_gpu": round(raw * scale, 2),
        "ratio": round(observer / raw, 2),
        "gpm": None
        if gpm is None
        else {
            "observer_us_per_gpu": round(gpm_observer * scale, 2),
            "raw_nvml_us_per_gpu": round(gpm_raw * scale, 2),
        },
    }


def xid(library: Path | None) -> dict[str, str]:
    events = NvmlXidEvents(SystemClock(), library)
    count = events.open()
    try:
        found = {}
        for index in range(count):
            error = events.register(index)
            found[str(index)] = "registered" if error is None else f"{error.kind}: {error.message}"
        return found
    finally:
        events.close()


def gpu_comm(gpus: int, stand_in: Stand | None) -> dict[str, Any]:
    """Every ordered pair of the GPUs present, as the gpu-comm probe on a whole node."""
    if gpus < 2:
        return {"skipped": f"{gpus} GPU: no pair to copy between"}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if stand_in is not None:
        env |= stand_in.env | {"FAKE_CUDA_DEVICES": str(gpus), "FAKE_CUDA_PEER_GBPS": "380"}
    done = subprocess.run(
        [sys.executable, "-m", "observer.cli", "probe", "gpu-comm"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    pairs = [
        {
            "source": int(m[1]),
            "target": int(m[2]),
            "peer_access": m[3] == "peer",
            "gbps": float(m[4]),
            "expected_gbps": float(m[5]) if m[5] else None,
            "ok": m[6] == "ok",
        }
        for line in done.stdout.splitlines()
        if (m := PAIR_LINE.match(line))
    ]
    return {
        "exit_code": done.returncode,
        "pairs": pairs,
        "failure": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else None,
    }


def mig(library: Path | None) -> dict[str, dict[str, Any]]:
    backend = NvmlGpuBackend(SystemClock(), library)
    info = backend.open()
    found: dict[str, dict[str, Any]] = {}
    try:
        for index in range(info.device_count):
            sample = backend.sample(index, frozenset())
            error = next((e for e in sample.errors if e.call == "mig"), None)
            if error is not None:
                found[str(index)] = {"mode": error.kind.value, "message": error.message}
                continue
            if sample.mig_instances is None:
                found[str(index)] = {"mode": "disabled"}
                continue
            listed = sample.processes or ()
            found[str(index)] = {
                "mode": "enabled",
                "instances": [
                    {
                        "uuid": m.uuid,
                        "gpu_instance_id": m.gpu_instance_id,
                        "compute_instance_id": m.compute_instance_id,
                        "memory_used_bytes": m.memory_used_bytes,
                        "memory_total_bytes": m.memory_total_bytes,
                        "processes": sum(p.mig_uuid == m.uuid for p in listed),
                    }
                    for m in sample.mig_instances
                ],
                "sample_us": {
                    "with_mig": _sample_us(backend, index, frozenset()),
                    "without_mig": _sample_us(backend, index, frozenset({"mig"})),
                },
            }
    finally:
        backend.close()
    return found


def _sample_us(backend: NvmlGpuBackend, index: int, skip: frozenset[str]) -> float:
    started = time.perf_counter()
    for _ in range(MIG_TIMING_ROUNDS):
        backend.sample(index, skip)
    return round((time.perf_counter() - started) / MIG_TIMING_ROUNDS * 1e6, 2)


class Stand:
    """The stand-in libraries and the state file that plays GPU 0 busy under the burn, GPU 1
    in MIG mode with two 1g.18gb MIG devices."""

    def __init__(self, work: Path) -> None:
        self.nvml = REPO / ".build/fake-nvml/libnvidia-ml.so.1"
        self.cuda_dir = REPO / ".build/fake-cuda"
        self.state = work / "nvml-state"
        self.state.write_text(self._gpus(None))
        self.env = {
            "FAKE_NVML_STATE": str(self.state),
            "LD_LIBRARY_PATH": f"{self.cuda_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}",
        }

    def busy(self, pid: int) -> None:
        self.state.write_text(self._gpus(pid))

    @staticmethod
    def _gpus(pid: int | None) -> str:
        lines = []
        for index in range(2):
            busy = pid is not None and index == 0
            line = (
                f"gpu utilization_gpu_percent={97 if busy else 0} utilization_memory_percent=0 "
                f"memory_used_bytes={2**30 if busy else 0} memory_total_bytes={141 * 2**30} "
                f"sm_active_percent={93 if busy else 0}"
            )
            if index == 1:
                line += f" mig_mode=1 mig=7:0:0:{_SLICE_BYTES},8:0:0:{_SLICE_BYTES}"
            lines.append(line + (f" processes={pid}:{2**30}" if busy else ""))
        return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stand-in", action="store_true", help="the stand-in libraries")
    parser.add_argument("--seconds", type=int, default=60, help="how long the burn runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stand = Stand(work) if args.stand_in else None
        library = stand.nvml if stand else None
        if stand is not None:
            os.environ.update(stand.env)
        say("device")
        result: dict[str, Any] = {"library": "stand-in" if stand else "driver"}
        result["device"] = device(library)
        say(f"burn for {args.seconds} s with the agent beside it")
        result["burn"] = burn(work, args.seconds, stand)
        say("sampling cost")
        result["sampling"] = sampling(library)
        say("xid event registration")
        result["xid"] = xid(library)
        say("gpu-comm across every GPU pair")
        result["gpu_comm"] = gpu_comm(len(result["device"]["gpus"]), stand)
        say("MIG enumeration")
        result["mig"] = mig(library)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
