"""The command line of each behaviour's program, `observer probe <workload> ...`, as every
backend runs it (the observer's image on Kubernetes, the node's observer on Slurm). The
arguments say everything the program does, so `kubectl describe` or `scontrol show job`
shows what a probe was asked. Each program's size, what it asks of its node besides GPUs, is
here too: a platform that admits only pods stating their CPU and memory (a ResourceQuota
covering them) needs it."""

from __future__ import annotations

from dataclasses import dataclass

from observer.domain import Behaviour, JobRequest


@dataclass(frozen=True, slots=True)
class ProgramSize:
    cpu_request_millicores: int
    cpu_limit_millicores: int
    memory_request_mebibytes: int
    memory_limit_mebibytes: int


# Every program measured at a 48 MiB peak RSS and half a second of CPU to start (Python and
# the observer's imports; `/usr/bin/time -f %M observer probe ...`, 2 CPUs, no GPU): a request
# that small, a limit with room for the start. log-burst writes as fast as it can, gpu-burn
# drives a GPU and holds a CUDA context, serve answers requests: each a CPU of its own.
# gpu-comm holds a CUDA context on every GPU of its node (hundreds of MiB of host memory each
# on a real driver). Neither one's memory is measured on a GPU.
_SMALL = ProgramSize(50, 500, 64, 128)
PROGRAM_SIZES = {
    "sleep": _SMALL,
    "exit": _SMALL,
    "log-canary": _SMALL,
    "oom": _SMALL,  # the backend's memory limit is what it runs into
    "log-burst": ProgramSize(250, 1000, 64, 128),
    "gpu-burn": ProgramSize(1000, 2000, 512, 2048),
    "gpu-comm": ProgramSize(1000, 2000, 1024, 6144),
    "serve": ProgramSize(100, 1000, 64, 256),
}


def program_size(arguments: list[str]) -> ProgramSize:
    """The size of the program `arguments` (probe_arguments or serve_arguments) run."""
    return PROGRAM_SIZES[arguments[1]]


def probe_arguments(request: JobRequest, oom_mebibytes: int | None = None) -> list[str]:
    """The arguments after the observer program. `oom_mebibytes`: where the oom probe stops
    if no limit kills it (None: no bound, for a platform that always sets one). A bad image
    or command is the backend's to express; their placeholder here is the plain hold."""
    work = request.workload
    seconds = f"{work.duration_seconds:g}"
    match work.behaviour:
        case Behaviour.GPU_BUSY:
            return [
                "probe",
                "gpu-burn",
                "--seconds",
                seconds,
                "--memory-gib",
                f"{work.gpu_memory_gib:g}",
                "--utilization",
                f"{work.gpu_utilization_percent:g}",
            ]
        case Behaviour.GPU_COMM:
            expected = (f"{model}={gbps:g}" for model, gbps in work.expected_gbps)
            return ["probe", "gpu-comm", *(a for e in expected for a in ("--expect-model", e))]
        case Behaviour.LOG_CANARY:
            burst = work.log_line_bytes > 0 and not work.log_interval_seconds
            return [
                "probe",
                "log-burst" if burst else "log-canary",
                "--run-id",
                request.run_id,
                "--lines",
                str(work.log_lines),
                "--interval-seconds",
                f"{work.log_interval_seconds:g}",
                "--line-bytes",
                str(work.log_line_bytes),
            ]
        case Behaviour.OOM:
            bound = ["--mib", str(oom_mebibytes)] if oom_mebibytes is not None else []
            return ["probe", "oom", *bound, "--hold-seconds", seconds]
        case _ if work.exit_code:
            return ["probe", "exit", "--code", str(work.exit_code), "--after-seconds", seconds]
        case _:
            return ["probe", "sleep", "--seconds", seconds]


def serve_arguments(port: int, latency_ms: float, warmup_seconds: float) -> list[str]:
    """The inference probe's replica: `observer probe serve` on every address of its host
    (the pod's, or the node's on Slurm) until stopped."""
    return [
        "probe",
        "serve",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--latency-ms",
        f"{latency_ms:g}",
        "--warmup-seconds",
        f"{warmup_seconds:g}",
    ]
