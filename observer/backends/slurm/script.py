"""What the backend submits: a probe is a batch job in its tenant's account, named after the
probe, with its run id in `--comment` (sacct keeps comments only with
`AccountingStoreFlags=job_comment`), whose script runs the probe's own program with the
node's observer (`observer probe ...`). An inference service's replica is a batch job named
after the service, its comment saying which service, revision and ordinal it is."""

from __future__ import annotations

import math
import shlex
import sys
from pathlib import Path

from observer.backends.base import ServiceSpec
from observer.domain import Behaviour, JobRequest, Workload
from observer.probes.programs import probe_arguments, serve_arguments
from observer.settings.controller import SlurmSettings

RUN_ID_COMMENT_PREFIX = "observer-run:"
SERVICE_COMMENT_PREFIX = "observer-service:"  # then <service>/<revision>/<ordinal>
JOB_NAME_PREFIX = "observer-"


def sbatch_args(request: JobRequest, settings: SlurmSettings, output_dir: Path) -> list[str]:
    """sbatch's options for a probe; the script comes on its standard input."""
    work = request.workload
    args = [
        "--parsable",
        f"--job-name={JOB_NAME_PREFIX}{request.probe}",
        f"--comment={RUN_ID_COMMENT_PREFIX}{request.run_id}",
        f"--account={request.tenant}",
        f"--nodes={work.nodes}",
        f"--time={time_limit_minutes(work, settings.time_limit_headroom_minutes)}",
        f"--output={output_dir}/{JOB_NAME_PREFIX}%j.out",
        f"--chdir={output_dir}",
    ]
    if request.queue:
        args.append(f"--partition={request.queue}")
    if request.priority:
        args.append(f"--qos={request.priority}")
    if work.gpus_per_node:
        args.append(f"--gres=gpu:{work.gpus_per_node}")
    if work.behaviour is Behaviour.OOM:
        args.append(f"--mem={settings.oom_memory_mebibytes}M")
    args.extend(settings.sbatch_extra_args)
    return args


def replica_args(
    spec: ServiceSpec, revision: int, ordinal: int, settings: SlurmSettings, output_dir: Path
) -> list[str]:
    """sbatch's options for one replica of a service. No --time: a service runs until it is
    cancelled, so it takes its partition's default limit."""
    args = [
        "--parsable",
        f"--job-name={JOB_NAME_PREFIX}{spec.name}",
        f"--comment={SERVICE_COMMENT_PREFIX}{spec.name}/{revision}/{ordinal}",
        f"--account={spec.tenant}",
        "--nodes=1",
        f"--gres=gpu:{spec.gpus_per_replica}",
        f"--output={output_dir}/{JOB_NAME_PREFIX}%j.out",
        f"--chdir={output_dir}",
    ]
    if spec.queue:
        args.append(f"--partition={spec.queue}")
    args.extend(settings.sbatch_extra_args)
    return args


def replica_port(spec: ServiceSpec, ordinal: int) -> int:
    """Where a replica serves. Replicas share nodes (Slurm gives a job GPUs, not a network
    namespace), so each one serves on a port of its own: the service's port plus its ordinal,
    which no other live replica of the service holds."""
    return spec.port + ordinal


def replica_script(spec: ServiceSpec, ordinal: int, settings: SlurmSettings) -> str:
    """The batch script of a replica: `exec` of the node's `observer probe serve`, until the
    job is cancelled."""
    arguments = serve_arguments(replica_port(spec, ordinal), spec.latency_ms, spec.warmup_seconds)
    program = [observer_program(settings.observer_program), *arguments]
    return f"#!/bin/bash\nexec {shlex.join(program)}\n"


def output_path(output_dir: Path, job_id: str) -> Path:
    """Where slurmstepd writes the job's output (sbatch's --output)."""
    return output_dir / f"{JOB_NAME_PREFIX}{job_id}.out"


def batch_script(request: JobRequest, settings: SlurmSettings) -> str:
    """The batch script for a probe: `exec` of the node's observer running the probe's own
    program (probes/programs.py), so the job ends with the program's status. A missing
    command and a missing image are the shell's own failures."""
    work = request.workload
    match work.behaviour:
        # exec of a missing command ends the shell with 127 (command not found)
        case Behaviour.BAD_COMMAND:
            command = "exec observer-probe-no-such-command"
        # Slurm has no images: a container entrypoint that does not exist stands in for an
        # image that cannot be pulled (with pyxis it would be --container-image); exits 127
        case Behaviour.BAD_IMAGE:
            command = "exec /nonexistent/observer-probe-image/entrypoint"
        # four times --mem: slurmstepd kills the step if memory is enforced (cgroups, or
        # JobAcctGatherParams=OverMemoryKill), the job ends FAILED by signal 9 or
        # OUT_OF_MEMORY; unenforced, it holds the memory for the duration and exits 0
        case _:
            bound = 4 * settings.oom_memory_mebibytes
            arguments = [
                observer_program(settings.observer_program),
                *probe_arguments(request, bound),
            ]
            command = "exec " + shlex.join(arguments)
    return f"#!/bin/bash\n{command}\n"


def observer_program(configured: Path | None) -> str:
    """The observer each job runs on its node: the configured path, else the `observer`
    beside the controller's own interpreter (its virtual environment, shared with the nodes
    like the output directory), else `observer` on the node's PATH."""
    if configured is not None:
        return str(configured)
    beside = Path(sys.executable).parent / "observer"
    return str(beside) if beside.is_file() else "observer"


def time_limit_minutes(work: Workload, headroom_minutes: int) -> int:
    """sbatch's --time: the probe's busy time in whole minutes, plus headroom."""
    busy_seconds = max(work.duration_seconds, work.log_lines * work.log_interval_seconds)
    return math.ceil(busy_seconds / 60) + headroom_minutes
