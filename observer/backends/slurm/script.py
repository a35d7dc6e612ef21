"""What the backend submits: a probe is a batch job in its tenant's account, named after the
probe, with its run id in `--comment` (sacct keeps comments only with
`AccountingStoreFlags=job_comment`), running a shell script chosen by the probe's behaviour."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from observer.domain import CANARY_MARK, Behaviour, JobRequest, Workload, canary_padding
from observer.settings.controller import SlurmSettings

RUN_ID_COMMENT_PREFIX = "observer-run:"
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


def output_path(output_dir: Path, job_id: str) -> Path:
    """Where slurmstepd writes the job's output (sbatch's --output)."""
    return output_dir / f"{JOB_NAME_PREFIX}{job_id}.out"


def batch_script(request: JobRequest, oom_memory_mebibytes: int) -> str:
    """The batch script for a probe. No behaviour needs a GPU library: the probe proves
    that the scheduler gives and takes back GPUs; the agent watches what happens on them."""
    work = request.workload
    hold = f"sleep {work.duration_seconds:g}"
    padding = canary_padding(request.run_id, work)
    body = {
        Behaviour.SLEEP: [hold],
        # no GPU code ships with the observer: the GPUs are allocated and held for the
        # duration, a known busy interval for the agent
        Behaviour.GPU_BUSY: [hold],
        # the padding is letters, digits, '=' and ':': safe in printf's format and in quotes
        Behaviour.LOG_CANARY: [
            f"for seq in $(seq 0 {work.log_lines - 1}); do",
            f"  printf '{CANARY_MARK} run=%s seq=%d ts=%s{padding}\\n' "
            f'{shlex.quote(request.run_id)} "$seq" "$(date +%s.%N)"',
            *([f"  sleep {work.log_interval_seconds:g}"] if work.log_interval_seconds else []),
            "done",
        ],
        # exec of a missing command ends the shell with 127 (command not found)
        Behaviour.BAD_COMMAND: ["exec observer-probe-no-such-command"],
        # Slurm has no images: a container entrypoint that does not exist stands in for an
        # image that cannot be pulled (with pyxis it would be --container-image); exits 127
        Behaviour.BAD_IMAGE: ["exec /nonexistent/observer-probe-image/entrypoint"],
        # four times --mem, held in a shell variable; slurmstepd kills the step if memory
        # is enforced (cgroups, or JobAcctGatherParams=OverMemoryKill): the job ends FAILED
        # by signal 9 or OUT_OF_MEMORY; unenforced, it holds the memory and exits normally
        Behaviour.OOM: [
            f"hog=$(head -c {4 * oom_memory_mebibytes * 1024 * 1024} /dev/zero | tr '\\0' x)",
            hold,
        ],
    }[work.behaviour]
    return "\n".join(["#!/bin/bash", *body, f"exit {work.exit_code}"]) + "\n"


def time_limit_minutes(work: Workload, headroom_minutes: int) -> int:
    """sbatch's --time: the probe's busy time in whole minutes, plus headroom."""
    busy_seconds = max(work.duration_seconds, work.log_lines * work.log_interval_seconds)
    return math.ceil(busy_seconds / 60) + headroom_minutes
