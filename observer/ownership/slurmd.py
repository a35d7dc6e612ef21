"""The node's own Slurm as an OwnerSource: the jobs that hold this node and the GPUs each was
given (`squeue --json`, `scontrol show node`), and the pids slurmd tracks as whose job
(`scontrol listpids`). Every failure of a command is one OwnerSourceError naming it.

Slurm numbers a node's GPUs 0..N-1 in the order its gres.conf declares them; the caller maps
those indices to NVML UUIDs. On a real node that order is the NVML minor numbers when gres.conf
says `AutoDetect=nvml` or lists `File=/dev/nvidia<minor>` in minor order (the test cluster of
deploy/local/infra/slurm-up.sh declares `File=.../fakedev/nvidia[0-3]`: index i is minor i).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from observer.clock import Clock
from observer.domain import OwnerKind
from observer.errors import OwnerSourceError
from observer.ownership.base import NodeOwners
from observer.slurm_json import ShapeError, dialect, document

# States in which a job still holds its node and its GPUs. COMPLETING is not one: the job's
# programs have ended and Slurm is cleaning up, so memory still held then is already held
# past the job's end (and a job stuck in COMPLETING with GPU memory is the leak to find).
_HOLDING = frozenset({"RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING", "SIGNALING"})
_GPU_INDICES = re.compile(r"(?:^|,)gpu(?::[^,(]*)?\(IDX:([^)]*)\)")
_NODE_GPUS = re.compile(r"(?:^|,)gpu(?::[^,:(]+)?:(\d+)")
_NO_STEPS = "No job steps exist on this node."


class SlurmdOwners:
    """What this node's Slurm says runs on it, asked afresh at each read."""

    name = "slurm"

    def __init__(
        self,
        node_name: str,
        uuid_of_index: Callable[[], Mapping[int, str]],
        *,
        slurm_conf: Path | None,
        commands_dir: Path | None,
        timeout_seconds: float,
        clock: Clock,
    ) -> None:
        """`node_name`: this node's NodeName in slurm.conf (not always its hostname);
        `uuid_of_index`: Slurm's GPU index on this node -> NVML UUID (see the module's note),
        asked at each read (the agent learns its GPUs once NVML is up)."""
        self._node = node_name
        self._uuids = uuid_of_index
        self._commands_dir = commands_dir
        self._timeout = timeout_seconds
        self._clock = clock
        self._env = dict(os.environ)
        if slurm_conf is not None:
            self._env["SLURM_CONF"] = str(slurm_conf)

    def close(self) -> None:
        """Nothing held between reads: each is its own commands."""

    def read(self) -> NodeOwners:
        # the node first: a node_name Slurm does not know must fail, not read as "no jobs"
        node = self._run("scontrol", "show", "node", self._node, "--oneliner")
        queue = self._run("squeue", "--json")
        # the time of the answer: a job missing from it ended before then, perhaps just before
        return node_owners(self._node, self._uuids(), node, queue, self._clock.now())

    def pids(self) -> dict[int, str]:
        """pid -> job id of the processes slurmd tracks on this node: names the job of a
        process whose cgroup does not (proctrack/linuxproc or pgid) and whose environ cannot
        be read (another user's process, without CAP_SYS_PTRACE). A process that escaped its
        job (double fork, setsid) is not tracked, so this never says a job has ended."""
        done = self._answer("scontrol", "listpids", "*", self._node)
        if done.returncode == 1 and done.stderr.strip() == _NO_STEPS:  # an idle node's answer
            return {}
        return listpids(_checked(done))

    def _run(self, command: str, *args: str) -> str:
        return _checked(self._answer(command, *args))

    def _answer(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        program = str(self._commands_dir / command) if self._commands_dir else command
        asked = " ".join((command, *args))
        try:
            return subprocess.run(
                [program, *args],
                capture_output=True,
                text=True,
                timeout=self._timeout,
                env=self._env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            # Slurm retries munge and slurmctld for ~9 s, saying so on standard error as it
            # goes: its words tell that retry from a hang, within the agent's short deadline.
            said = (
                exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
            )
            words = f": Slurm said: {_words(said)}" if said and said.strip() else ""
            raise OwnerSourceError(f"{asked}: no answer within {self._timeout:g} s{words}") from exc
        except OSError as exc:
            raise OwnerSourceError(f"{asked}: cannot run {program}: {exc.strerror}") from exc


def _checked(done: subprocess.CompletedProcess[str]) -> str:
    """The output of a command that succeeded; an error in Slurm's words otherwise."""
    if done.returncode != 0:
        program, *args = done.args
        raise OwnerSourceError(
            f"{' '.join((Path(program).name, *args))}: exit status {done.returncode}: "
            f"{_words(done.stderr + done.stdout)}"
        )
    return done.stdout


def node_owners(
    node: str, uuid_of_index: Mapping[int, str], node_line: str, queue: str, at: datetime
) -> NodeOwners:
    """The reading from `scontrol show node <node> --oneliner` and `squeue --json`."""
    count = _node_gpu_count(node_line)
    allocatable = frozenset(_uuids(uuid_of_index, range(count), f"node {node}"))
    gpus = {
        job_id: frozenset(_uuids(uuid_of_index, indices, f"job {job_id}"))
        for job_id, indices in _holding_jobs(_document(queue), node).items()
    }
    return NodeOwners(
        at=at,
        kind=OwnerKind.SLURM_JOB,
        running=frozenset(gpus),
        gpus=gpus,
        allocatable=allocatable,
    )


def listpids(text: str) -> dict[int, str]:
    """`scontrol listpids` as pid -> job id (its header and step columns left out)."""
    rows = [line.split() for line in text.splitlines()[1:] if line.strip()]
    try:
        return {int(row[0]): str(int(row[1])) for row in rows}
    except (IndexError, ValueError) as exc:
        raise OwnerSourceError(f"scontrol listpids printed an unreadable row: {exc}") from exc


def gpu_indices(gres: str) -> list[int]:
    """The GPU indices of one node's entry of a job's gres_detail: `gpu:2(IDX:0-1)`,
    `gpu:a100:3(IDX:0,2-3)`, several GRES joined by commas; none for `IDX:N/A`."""
    indices: list[int] = []
    for listed in _GPU_INDICES.findall(gres):
        if listed == "N/A":
            continue
        for part in listed.split(","):
            first, _, last = part.partition("-")
            indices.extend(range(int(first), int(last or first) + 1))
    return indices


def _holding_jobs(document: Mapping[str, Any], node: str) -> dict[str, list[int]]:
    """Job id -> GPU indices on `node` of every job holding it, in the shapes of the release
    that printed `document`. squeue --json of 22.05 ignores -w and -t, so the node and the
    states are chosen here."""
    try:
        read = dialect(document)
    except ShapeError as exc:
        raise OwnerSourceError(f"squeue --json: {exc}") from None
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        raise OwnerSourceError(f"squeue --json of {read} printed no jobs list")
    holding: dict[str, list[int]] = {}
    for job in jobs:
        try:
            if read.job_state(job) not in _HOLDING:
                continue
            nodes = read.job_nodes(job)
            details = job["gres_detail"]
            if node not in nodes:
                continue
            # one gres_detail entry per allocated node, in the same order; none without GRES
            gres = details[nodes.index(node)] if details else ""
            holding[str(job["job_id"])] = gpu_indices(gres)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            job_id = job.get("job_id") if isinstance(job, dict) else None
            raise OwnerSourceError(
                f"squeue --json of {read}: job {job_id} has no readable node and GPUs: "
                f"{type(exc).__name__} {exc}"
            ) from exc
    return holding


def _document(queue: str) -> Mapping[str, Any]:
    try:
        found = document(queue, "squeue --json")
    except ShapeError as exc:
        raise OwnerSourceError(str(exc)) from None
    if found.get("errors"):  # 22.05 exits 0 with an empty list when slurmctld is away
        raise OwnerSourceError(
            "squeue --json could not read slurmctld: "
            + "; ".join(f"{e.get('source')}: {e.get('description')}" for e in found["errors"])
        )
    return found


def _node_gpu_count(node_line: str) -> int:
    fields = dict(f.partition("=")[::2] for f in node_line.split() if "=" in f)
    if "Gres" not in fields:
        raise OwnerSourceError(f"scontrol show node printed no Gres field: {node_line[:80]!r}")
    return sum(int(n) for n in _NODE_GPUS.findall(fields["Gres"]))


def _uuids(uuid_of_index: Mapping[int, str], indices: Iterable[int], whose: str) -> list[str]:
    unknown = sorted(set(indices) - set(uuid_of_index))
    if unknown:  # gres.conf and NVML disagree: every assignment read from here would be wrong
        raise OwnerSourceError(
            f"Slurm gives {whose} GPU index {unknown[0]}, which is none of this node's "
            f"GPUs ({', '.join(map(str, sorted(uuid_of_index))) or 'none'}): does gres.conf "
            "list the GPUs NVML sees, in minor-number order?"
        )
    return [uuid_of_index[i] for i in indices]


def _words(output: str) -> str:
    """Slurm's complaint as one line, without the "<program>: error: " prefixes."""
    lines = [re.sub(r"^\w+: (?:error|fatal): ", "", line).strip() for line in output.splitlines()]
    return "; ".join(line for line in lines if line) or "no message"
