"""The inference probe's service on Slurm: each replica one batch job running the node's
`observer probe serve`, found again by its comment (service, revision, ordinal).

Slurm has no Deployment, so this plays one. Only what was asked (how many replicas, of which
revision) is held here; the replicas are read back from squeue, so a submission that timed
out is found rather than repeated, and a controller that restarts takes the jobs over at its
first deploy. `service_replicas`, called at every
look, brings the jobs to what was asked: a replica that ended is replaced, and a rolling
restart advances as a Deployment's does with one replica of surge and none unavailable (a
new-revision job at a time, an old one cancelled once a successor is ready). Slurm has no
readiness probe either: a replica is ready when its job runs and its /healthz answers 200."""

from __future__ import annotations

import http.client
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from observer.backends.base import Replica, ServiceSpec
from observer.backends.slurm.commands import SlurmCommands, slurm_words, unreachable
from observer.backends.slurm.parse import (
    ReplicaJob,
    node_addresses,
    node_listing,
    replica_jobs,
    sbatch_job_id,
)
from observer.backends.slurm.script import replica_args, replica_port, replica_script
from observer.domain import JobPhase
from observer.errors import BackendError, ProbeError
from observer.settings.controller import SlurmSettings

HEALTH_TIMEOUT_SECONDS = 1.0  # as Kubernetes' readinessProbe timeoutSeconds defaults to


def healthy(address: str, timeout_seconds: float) -> bool:
    """Whether a replica's /healthz at `address` ("host:port") answers 200 in time."""
    host, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout_seconds)
    try:
        connection.request("GET", "/healthz")
        response = connection.getresponse()
        response.read()
        return response.status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@dataclass(frozen=True, slots=True)
class _Seen:
    job: ReplicaJob
    replica: Replica


@dataclass(frozen=True, slots=True)
class _Service:
    live: list[_Seen]  # oldest first
    ordinals: frozenset[int]  # held by a job not yet ended: each one's port may be bound


@dataclass(frozen=True, slots=True)
class _Asked:
    replicas: int
    revision: int  # a restart asks for the next one


@dataclass(frozen=True, slots=True)
class _Step:
    revision: int
    cancelled: frozenset[str]  # job ids
    ordinals: tuple[int, ...]  # of the replicas to submit


class SlurmServices:
    """ServiceBackend over sbatch, squeue, sinfo and scancel."""

    def __init__(self, commands: SlurmCommands, settings: SlurmSettings, output_dir: Path) -> None:
        self._commands = commands
        self._settings = settings
        self._output_dir = output_dir
        self._asked: dict[tuple[str, str], _Asked] = {}  # by (tenant, service)

    def deploy_service(self, spec: ServiceSpec, replicas: int) -> None:
        self.scale_service(spec, replicas)  # an earlier controller's jobs are taken over

    def scale_service(self, spec: ServiceSpec, replicas: int) -> None:
        service = self._read(spec)
        asked = self._asked.get((spec.tenant, spec.name))
        revision = max((s.job.revision for s in service.live), default=1)
        self._asked[spec.tenant, spec.name] = _Asked(
            replicas, revision if asked is None else asked.revision
        )
        self._take(spec, self._step(spec, service))

    def restart_service(self, spec: ServiceSpec) -> None:
        asked = self._asked.get((spec.tenant, spec.name))
        if asked is not None:
            self._asked[spec.tenant, spec.name] = _Asked(asked.replicas, asked.revision + 1)
        self._take(spec, self._step(spec, self._read(spec)))

    def service_replicas(self, spec: ServiceSpec) -> list[Replica]:
        service = self._read(spec)
        step = self._step(spec, service)
        # a replacement Slurm refuses is asked for again at the next look, as a Deployment's is
        with suppress(ProbeError):
            self._take(spec, step)
        return [s.replica for s in service.live if s.job.status.job_id not in step.cancelled]

    def delete_service(self, spec: ServiceSpec) -> None:
        self._asked.pop((spec.tenant, spec.name), None)
        self._cancel([r.status.job_id for r in self._jobs(spec) if not r.status.phase.finished])

    # --- reading ---------------------------------------------------------------------------

    def _jobs(self, spec: ServiceSpec, queue: Mapping[str, Any] | None = None) -> list[ReplicaJob]:
        """The service's replicas in `queue` (a `squeue --json` answer; None: read now)."""
        return [
            r
            for r in replica_jobs(queue or self._commands.queue())
            if r.service == spec.name and r.status.tenant == spec.tenant
        ]

    def _read(self, spec: ServiceSpec) -> _Service:
        queue = self._commands.queue()
        jobs = [r for r in self._jobs(spec, queue) if not r.status.phase.finished]
        # an ending job (COMPLETING: its processes being killed) is no replica, its port not
        # yet free
        live = [r for r in jobs if r.status.ending_since is None]
        running = [r for r in live if r.status.phase is JobPhase.RUNNING and r.status.nodes]
        addresses = node_addresses(self._commands.json(*node_listing(queue))) if running else {}
        return _Service(
            [_Seen(r, self._replica(spec, r, addresses)) for r in live],
            frozenset(r.ordinal for r in jobs),
        )

    def _replica(self, spec: ServiceSpec, job: ReplicaJob, addresses: dict[str, str]) -> Replica:
        status = job.status
        address = None
        if status.phase is JobPhase.RUNNING and status.nodes:
            node = status.nodes[0]
            address = f"{addresses.get(node, node)}:{replica_port(spec, job.ordinal)}"
        pending = status.phase is JobPhase.PENDING
        return Replica(
            name=status.job_id,
            address=address,
            ready=address is not None and healthy(address, HEALTH_TIMEOUT_SECONDS),
            revision=str(job.revision),
            created_at=status.submitted_at,
            # before slurmctld first looks at a job its reason is "None": not yet a wait
            pending_reason=status.reason if pending else None,
        )

    # --- changing --------------------------------------------------------------------------

    def _step(self, spec: ServiceSpec, service: _Service) -> _Step:
        """The next step towards what was asked. A service this controller did not deploy is
        only read."""
        asked = self._asked.get((spec.tenant, spec.name))
        if asked is None:
            return _Step(0, frozenset(), ())
        wanted, revision = asked.replicas, asked.revision
        new = [s for s in service.live if s.job.revision == revision]
        old = [s for s in service.live if s.job.revision != revision]
        keep_old = min(len(old), max(0, wanted - sum(s.replica.ready for s in new)))
        # the ones not ready go first; then the oldest of the old, the newest of the new
        cancel = _unready_first(old)[: len(old) - keep_old]
        cancel += _unready_first(new[::-1])[: max(0, len(new) - wanted)]
        surge = 1 if keep_old else 0
        add = max(0, min(wanted - len(new), wanted + surge - len(new) - keep_old))
        cancelled = frozenset(s.job.status.job_id for s in cancel)
        taken = set(service.ordinals)
        ordinals = []
        for _ in range(add):
            ordinals.append(min(set(range(len(taken) + 1)) - taken))
            taken.add(ordinals[-1])
        return _Step(revision, cancelled, tuple(ordinals))

    def _take(self, spec: ServiceSpec, step: _Step) -> None:
        self._cancel(sorted(step.cancelled, key=int))
        self._output_dir.mkdir(parents=True, exist_ok=True)
        for ordinal in step.ordinals:
            done = self._commands.run(
                "sbatch",
                replica_args(spec, step.revision, ordinal, self._settings, self._output_dir),
                stdin=replica_script(spec, ordinal, self._settings),
            )
            if done.returncode != 0:
                words = slurm_words(done.stderr)
                if unreachable(words):
                    raise BackendError(f"sbatch could not reach slurmctld: {words}")
                raise ProbeError(f"Slurm refused a replica of {spec.name}: {words}")
            sbatch_job_id(done.stdout)  # what it printed is a job id, or it failed

    def _cancel(self, job_ids: Sequence[str]) -> None:
        if not job_ids:
            return
        done = self._commands.run("scancel", list(job_ids))
        if done.returncode != 0:
            raise BackendError(f"scancel {' '.join(job_ids)} failed: {slurm_words(done.stderr)}")


def _unready_first(seen: Sequence[_Seen]) -> list[_Seen]:
    return sorted(seen, key=lambda s: s.replica.ready)  # stable: otherwise in the given order
