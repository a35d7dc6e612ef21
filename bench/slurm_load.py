"""What the observer costs slurmctld, counted by slurmctld itself (`sdiag`), on each real Slurm
release of the tests: 22.05 (deploy/local/infra/slurm-up.sh) and 24.11 (slurm24-up.sh).

On each, holding the cluster as a test does (its tests.lock: no test's jobs or clearing meet the
bench's), the queue is first filled with held jobs (`--queue-jobs` of them, `sbatch --hold`,
partition debug, from shell loops of the cluster's own installation), then each reader is run
against it and `sdiag`'s RPC statistics by message type are read before and after:

- the agent: `SlurmdOwners.read()` of one node (agent.owners: slurm) running one job of the
  bench's: the first read apart (the node's GPUs, and the job the node has never seen named
  once, `scontrol show job -d`), then `--reads` reads of the steady state (`scontrol
  listpids`, answered on the node: the target is no request at all);
- the controller: one snapshot interval as its loops make it, `--reads` times:
  `SlurmBackend.snapshot()` (the one listing of the queue), then `SlurmBackend.jobs()` of four
  probes at each follow (controller.snapshot_interval_seconds /
  controller.follow_interval_seconds of them), the backend's clock stepped by the follow
  interval between them, as compose.py builds it: the first follow reads the fresh listing,
  the others each probe alone (scontrol show job).

Per reader: the RPCs per call by type, scaled to a minute at the default intervals, and the
server time they cost slurmctld (sdiag's total_time, microseconds) per minute and as a share of
the interval. What else reached slurmctld meanwhile (slurmd's registrations, sdiag's own
request) is measured over an idle stretch as long and taken out. The jobs are cancelled at
the end. A held job array would not do: slurmctld keeps it as one record, listed as one job
until its tasks start. Run as root (the up scripts start what is down):

    .venv/bin/python bench/slurm_load.py [--queue-jobs 10000] [--reads 5] [--node n1] \\
        [--releases slurm,slurm24]

Prints one JSON object as its last line:
{"releases": [{"release", "queue_jobs", "agent": {...}, "controller": {...}}, ...]}."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' clusters

from observer.backends.slurm.backend import SlurmBackend
from observer.clock import ManualClock, SystemClock
from observer.ownership.slurmd import SlurmdOwners
from observer.settings.agent import AgentSettings
from observer.settings.controller import ControllerSettings
from observer.slurm_json import dialect
from tests.backends.slurm_harness import RELEASES, SlurmHarness, slurm_harness, start

_RPC = re.compile(r"^\s+(\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)", re.M)
NAME = "slurm-load-bench"
# Requests that are not the readers': slurmd's own, sdiag's, the bench's submissions.
_NOT_READERS = re.compile(
    r"^(MESSAGE_|REQUEST_STATS_INFO|REQUEST_SUBMIT|REQUEST_COMPLETE|"
    r"REQUEST_KILL|REQUEST_CANCEL|REQUEST_PING|ACCOUNTING_)"
)
SUBMITTERS = 4  # loops submitting at once: an sbatch spends most of its time starting up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue-jobs", type=int, default=10_000)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--node", default="n1")
    parser.add_argument("--releases", default=",".join(RELEASES), help="test markers, in order")
    args = parser.parse_args()
    results = []
    for marker in args.releases.split(","):
        if (reason := start(marker)) is not None:
            raise SystemExit(reason)
        with slurm_harness(RELEASES[marker]()) as slurm:
            try:
                began = time.monotonic()
                _fill(slurm, args.queue_jobs)
                filled = time.monotonic() - began
                results.append({**_measure(slurm, args), "fill_seconds": round(filled)})
            finally:
                slurm.cli("scancel", f"--name={NAME}")
    print(json.dumps({"releases": results}))


def _measure(slurm: SlurmHarness, args: argparse.Namespace) -> dict[str, Any]:
    cluster = slurm.cluster
    controller = ControllerSettings(backend="slurm", slurm=slurm.settings)
    clock = ManualClock(datetime.now(UTC))
    backend = SlurmBackend(
        slurm.settings, clock, fresh_listing_seconds=controller.follow_interval_seconds
    )
    queue = backend._commands.json("squeue")  # the unfinished jobs, on every release
    agent_settings = AgentSettings()
    owners = SlurmdOwners(
        args.node,
        lambda: {i: f"GPU-{i:08d}-0000-0000-0000-000000000000" for i in range(4)},
        slurm_conf=cluster.slurm_conf,
        commands_dir=cluster.commands_dir,
        timeout_seconds=30,
        clock=SystemClock(),
    )
    probes = sorted((str(j["job_id"]) for j in queue["jobs"]), key=int)[-4:]  # held bench jobs
    _run_on(slurm, args.node, owners)
    first = _rpcs(slurm, owners.read, 1)
    steady = _rpcs(slurm, owners.read, args.reads)
    interval = _rpcs(
        slurm, lambda: _snapshot_interval(backend, clock, controller, probes), args.reads
    )
    return {
        "release": dialect(queue).release,
        "queue_jobs": len(queue["jobs"]),
        "queue_json_bytes": len(json.dumps(queue)),
        "agent": {
            "first_read": first,
            **_per_minute([(steady, agent_settings.owners_interval_seconds)]),
        },
        "controller": _per_minute([(interval, controller.snapshot_interval_seconds)]),
    }


def _snapshot_interval(
    backend: SlurmBackend, clock: ManualClock, cfg: ControllerSettings, probes: Sequence[str]
) -> None:
    """What the controller reads of slurmctld in one snapshot interval: the snapshot, then the
    follows of that interval, the first one at the snapshot's moment."""
    backend.snapshot()
    follows = round(cfg.snapshot_interval_seconds / cfg.follow_interval_seconds)
    for _ in range(follows):
        backend.jobs(probes)
        clock.advance(cfg.follow_interval_seconds)


def _fill(slurm: SlurmHarness, jobs: int) -> None:
    """`jobs` held jobs, one record each as slurmctld keeps them, submitted by SUBMITTERS shell
    loops of the cluster's own installation (in 24.11's chroot: a wrapper and a process per
    job would be several times slower). slurm.conf's MaxJobCount (50,000 here; 10,000 by
    default, ended jobs within MinJobAge included) bounds the queue."""
    loop = (
        'i=0; while [ "$i" -lt "$0" ]; do i=$((i+1)); '
        f"sbatch --hold -p debug --job-name={NAME} -o /dev/null --wrap true >/dev/null || exit 1; "
        "done"
    )
    shares = [jobs // SUBMITTERS + (n < jobs % SUBMITTERS) for n in range(SUBMITTERS)]
    loops = [
        subprocess.Popen(slurm.cluster.installed("sh", "-c", loop, str(share))) for share in shares
    ]
    if any(p.wait() != 0 for p in loops):
        raise SystemExit(f"sbatch failed while filling the queue of Slurm {slurm.cluster.release}")


def _run_on(slurm: SlurmHarness, node: str, owners: SlurmdOwners) -> None:
    """One job of the bench's running on `node` (partition gpu, 1 GPU), once its slurmstepd
    tracks its script."""
    slurm.cli(
        "sbatch", "-w", node, "--gres=gpu:1", "-o", "/dev/null", f"--job-name={NAME}",
        "--wrap", "sleep 600",
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not owners.pids():
        if time.monotonic() > deadline:
            raise SystemExit(f"the bench's job did not start on {node} within 60 s")
        time.sleep(0.5)


def _sdiag(slurm: SlurmHarness) -> dict[str, tuple[int, int]]:
    text = slurm.cli("sdiag")
    block = text.split("by message type", 1)[1].split("\n\n", 1)[0]
    return {m[0]: (int(m[1]), int(m[2])) for m in _RPC.findall(block)}


def _rpcs(slurm: SlurmHarness, call: Callable[[], object], times: int) -> dict[str, Any]:
    """RPCs per call by type, and slurmctld's microseconds per call, with the background
    of an idle stretch as long taken out."""
    slurm.cli("sdiag", "--reset")
    began = time.monotonic()
    for _ in range(times):
        call()
    took = time.monotonic() - began
    during = _sdiag(slurm)
    slurm.cli("sdiag", "--reset")
    time.sleep(took)
    idle = _sdiag(slurm)
    per_call, server_us = {}, 0.0
    for kind, (busy_count, busy_us) in during.items():
        if _NOT_READERS.match(kind):
            continue
        quiet_count, quiet_us = idle.get(kind, (0, 0))
        count = max(busy_count - quiet_count, 0)
        if count:
            per_call[kind] = round(count / times, 2)
            server_us += max(busy_us - quiet_us, 0) / times
    return {"rpcs_per_call": per_call, "server_us_per_call": round(server_us), "seconds": took}


def _per_minute(calls: list[tuple[dict[str, Any], float]]) -> dict[str, Any]:
    """The calls at their intervals: per minute, and slurmctld's time per interval."""
    by_type: dict[str, float] = {}
    server_us = 0.0
    for measured, interval in calls:
        per_minute = 60 / interval
        for kind, count in measured["rpcs_per_call"].items():
            by_type[kind] = round(by_type.get(kind, 0) + count * per_minute, 1)
        server_us += measured["server_us_per_call"] * per_minute
    return {
        "rpcs_per_minute": by_type,
        "total_per_minute": round(sum(by_type.values()), 1),
        "server_us_per_minute": round(server_us),
        "server_share_of_a_minute": round(server_us / 60e6, 5),
        "per_call": [m for m, _ in calls],
    }


if __name__ == "__main__":
    main()
