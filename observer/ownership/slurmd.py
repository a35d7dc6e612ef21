"""The node's own Slurm as an OwnerSource, costing slurmctld nothing in steady state: the jobs
this node runs are those whose steps its slurmstepds track (`scontrol listpids`, answered on the
node through the slurmstepds' sockets, not by slurmctld); slurmctld is asked only for the
node's GPU count, once (`scontrol show node`), and for the GPUs of a job this node starts to
run, once per appearance (`scontrol show job -d`). A job has ended once no slurmstepd of it is
left on the node (its cgroup goes with the last one). Every failure of a command is one
OwnerSourceError naming it.

Slurm numbers a node's GPUs 0..N-1 in the order its gres.conf declares them; the caller maps
those indices to NVML UUIDs. On a real node that order is the NVML minor numbers when gres.conf
says `AutoDetect=nvml` or lists `File=/dev/nvidia<minor>` in minor order (the test cluster of
deploy/local/infra/slurm-up.sh declares `File=.../fakedev/nvidia[0-3]`: index i is minor i).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from observer.clock import Clock
from observer.domain import OwnerKind
from observer.errors import OwnerSourceError
from observer.ownership.base import NodeOwners

_GPU_INDICES = re.compile(r"(?:^|,)gpu(?::[^,(]*)?\(IDX:([^)]*)\)")
_NODE_GPUS = re.compile(r"(?:^|,)gpu(?::[^,:(]+)?:(\d+)")
# One line per group of nodes given alike, the same from 22.05 to 25.05
# (src/api/job_info.c): `  Nodes=n[1,3] CPU_IDs=0 Mem=100 GRES=gpu:2(IDX:0-1)`.
_ALLOCATION = re.compile(r"^\s+Nodes=(\S+) .*\bGRES=(\S*)\s*$", re.MULTILINE)
_NO_STEPS = "No job steps exist on this node."
# What listpids says of a step that ended between its listing of the slurmstepds' sockets and
# its question to that slurmstepd (src/scontrol/info_job.c): the other steps' rows still stand.
# (Refused: its socket outlived it. Any other reason, such as no permission, fails the read.)
_STEP_GONE = re.compile(
    r"^(?:\S+ does not exist on this node\.|Unable to connect to slurmstepd: Connection refused)$"
)


class SlurmdOwners:
    """What this node's slurmstepds run, with the GPUs slurmctld gave each job, remembered
    while the job runs here."""

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
        self._gpu_count: int | None = None  # once known: GRES change only with a restart
        self._indices: dict[str, list[int]] = {}  # by job id, of the jobs running here

    def close(self) -> None:
        """Nothing held between reads: each is its own commands."""

    def read(self) -> NodeOwners:
        if self._gpu_count is None:
            # the node first: a node_name Slurm does not know must fail, not read as "no jobs"
            line = self._run("scontrol", "show", "node", self._node, "--oneliner")
            self._gpu_count = node_gpu_count(line)
        running = set(self.pids().values())
        # the time of the answer: a job missing from it ended before then, perhaps just before
        at = self._clock.now()
        for job in sorted(running - self._indices.keys()):
            detail = self._run("scontrol", "show", "job", "-d", job)
            self._indices[job] = job_gpu_indices(detail, job, self._node)
        # a job that leaves and comes back (requeued) is asked again: its GPUs may differ
        self._indices = {job: self._indices[job] for job in running}
        uuids = self._uuids()
        gpus = {
            job: frozenset(_uuids(uuids, indices, f"job {job}"))
            for job, indices in self._indices.items()
        }
        return NodeOwners(
            at=at,
            kind=OwnerKind.SLURM_JOB,
            running=frozenset(gpus),
            gpus=gpus,
            allocatable=frozenset(_uuids(uuids, range(self._gpu_count), f"node {self._node}")),
        )

    def pids(self) -> dict[int, str]:
        """pid -> job id of the processes this node's slurmstepds track: every job with a
        step here. A process that escaped its job (double fork, setsid, under
        proctrack/linuxproc) is not tracked, so this never names the job of every process."""
        done = self._answer("scontrol", "listpids", "*", self._node)
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        if done.returncode == 1 and said == [_NO_STEPS]:  # an idle node's answer
            return {}
        if done.returncode == 1 and said and all(_STEP_GONE.search(s) for s in said):
            return listpids(done.stdout)
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


def node_gpu_count(node_line: str) -> int:
    """The GPUs `scontrol show node <node> --oneliner` says the node has."""
    fields = dict(f.partition("=")[::2] for f in node_line.split() if "=" in f)
    if "Gres" not in fields:
        raise OwnerSourceError(f"scontrol show node printed no Gres field: {node_line[:80]!r}")
    return sum(int(n) for n in _NODE_GPUS.findall(fields["Gres"]))


def job_gpu_indices(detail: str, job_id: str, node: str) -> list[int]:
    """The GPU indices on `node` of job `job_id`, from `scontrol show job -d <job_id>` (a
    heterogeneous job's components each a record of their own)."""
    record = next((r for r in detail.split("\n\n") if r.startswith(f"JobId={job_id} ")), None)
    if record is None:
        raise OwnerSourceError(f"scontrol show job -d {job_id} printed no record of job {job_id}")
    for nodes, gres in _ALLOCATION.findall(record):
        if node in hostnames(nodes):
            return gpu_indices(gres)
    raise OwnerSourceError(
        f"scontrol show job -d {job_id} names no allocation on node {node}, where it runs"
    )


def hostnames(hostlist: str) -> list[str]:
    """The node names of a Slurm hostlist: `n[1,3]`, `gpu[01-04]`, `a1,b[2-3]-ib`."""
    parts = re.findall(r"(?:[^,\[]|\[[^\]]*\])+", hostlist)  # commas inside brackets kept
    return [name for part in parts for name in _expand(part)]


def _expand(part: str) -> Iterator[str]:
    bracket = re.search(r"\[([^\]]*)\]", part)
    if bracket is None:
        yield part
        return
    head, tail = part[: bracket.start()], part[bracket.end() :]
    for listed in bracket.group(1).split(","):
        first, _, last = listed.partition("-")
        for number in range(int(first), int(last or first) + 1):
            for rest in _expand(tail):
                yield f"{head}{number:0{len(first)}d}{rest}"


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
