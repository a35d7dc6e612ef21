"""An in-process GPU cluster behind the SchedulerBackend protocol.

Time moves only with the injected clock: every call first plays the cluster forward to
`clock.now()` (jobs end, freed GPUs go to the next pending jobs). Scheduling is first-fit
over nodes in the policy's order, with backfill: a job that fits may start while a larger one
ahead of it waits, as Slurm's backfill does. Reasons follow the real schedulers' words:
the first job that does not fit waits for `Resources`, those behind it for `Priority`, a
tenant over its quota for `QuotaExceeded`, a bad image sits in `ImagePullBackOff`. Tenants
are isolated as Kubernetes RBAC isolates namespaces, and denials use its words, unless
`faults.isolation_broken` lets every cross-tenant read through.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from observer.backends.base import FinishedJobs, QuotaChange, queue_states
from observer.clock import Clock
from observer.domain import (
    CANARY_MARK,
    AccessAttempt,
    Attempt,
    Behaviour,
    JobPhase,
    JobRequest,
    JobStatus,
    SchedulerNode,
    SchedulerSnapshot,
    Workload,
    canary_padding,
)
from observer.errors import BackendError, GpuCommunicationError, ProbeError

# A finished job stays visible this long, as Slurm's MinJobAge or a Job's TTL keep it.
FINISHED_RETENTION = timedelta(hours=1)
# What finished_jobs() can still list, as slurmdbd keeps accounting: two days covers a
# controller that lists every few minutes and one that was down overnight, and bounds memory.
HISTORY_RETENTION = timedelta(days=2)
OOM_AFTER_SECONDS = 2.0
BAD_COMMAND_AFTER_SECONDS = 1.0
# The reads an isolation probe tries, as (action, verb, resource, API group) in RBAC's terms;
# a name tried without a listing to learn one from:
_UNLISTED = "observer-isolation-probe"
_ISOLATION_READS = (
    ("list jobs", "list", "jobs", "batch"),
    ("list pods", "list", "pods", ""),
    ("read pod log", "get", "pods/log", ""),
    ("list secrets", "list", "secrets", ""),
    ("read secret", "get", "secrets", ""),
)


class Policy(StrEnum):
    FAIR_SHARE = "fair_share"  # least running GPUs per unit of weight first
    FIFO = "fifo"


@dataclass(frozen=True, slots=True)
class TenantSpec:
    name: str
    weight: float = 1.0
    quota_gpus: int | None = None


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpus: int
    pool: str | None = None


@dataclass
class _Job:
    id: str
    tenant: str
    queue: str | None
    workload: Workload
    run_id: str | None
    submitted_at: datetime
    phase: JobPhase = JobPhase.PENDING
    started_at: datetime | None = None
    finished_at: datetime | None = None
    ends_at: datetime | None = None
    placement: dict[str, int] = field(default_factory=dict)  # GPUs held now, per node
    ran_on: tuple[str, ...] = ()
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    attempts: tuple[Attempt, ...] = ()  # those a node failure ended, then queued again
    eligible_at: datetime | None = None  # set by a requeue

    def status(self) -> JobStatus:
        return JobStatus(
            job_id=self.id,
            run_id=self.run_id,
            tenant=self.tenant,
            queue=self.queue,
            phase=self.phase,
            gpus=self.workload.gpus,
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            reason=self.reason,
            message=self.message,
            exit_code=self.exit_code,
            nodes=self.ran_on,
            owner_ids=(self.id,),  # the simulated nodes' processes are owned by the job id
            # ended but still placed: a job in `faults.stuck_jobs`, as a pod stuck Terminating
            ending_since=self.finished_at if self.placement else None,
            restarts=len(self.attempts),
            attempts=self.attempts,
            eligible_at=self.eligible_at,
            # Its scheduler plans no starts ahead: like Kubernetes', it gives no estimate.
            expected_start_at=None,
        )


@dataclass
class Faults:
    """Switches for what the detectors must find; all off by default."""

    reachable: bool = True  # False: every call raises BackendError (API server down)
    # False: the finished jobs and quota changes raise BackendError while everything else
    # answers (slurmdbd down under a running slurmctld)
    accounting_reachable: bool = True
    favoured_tenant: str | None = None  # set: the scheduler serves this tenant first, always
    # node -> GPUs the scheduler counts as allocated with no job behind them
    leaked_gpus: dict[str, int] = field(default_factory=dict)
    # job ids that keep holding their GPUs after they end, shown ending since their end (pods
    # stuck Terminating, Slurm jobs stuck COMPLETING) until discarded from the set
    stuck_jobs: set[str] = field(default_factory=set)
    # [from, to) intervals in which log-canary lines written are never delivered
    log_loss: list[tuple[datetime, datetime]] = field(default_factory=list)
    # True: one tenant's credentials read another's jobs, pods, logs and secrets
    isolation_broken: bool = False
    # tenant -> reason: the scheduler holds the tenant's pending jobs whatever is free,
    # showing this reason ("" for none, "Resources" while GPUs are free): unexplained waits
    held_tenants: dict[str, str] = field(default_factory=dict)
    # Each submission blocks this long (real time) before it is taken: a hung sbatch or call.
    submit_hang_seconds: float = 0.0
    # node -> a pair of its GPUs ("1-3") whose link runs at half its rate: a gpu-comm probe
    # there ends as `observer probe gpu-comm` does on such a pair
    comm_degraded: dict[str, str] = field(default_factory=dict)


class SimulatedCluster:
    def __init__(
        self,
        nodes: Iterable[NodeSpec],
        tenants: Iterable[TenantSpec],
        clock: Clock,
        policy: Policy = Policy.FAIR_SHARE,
    ) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.tenants = {t.name: t for t in tenants}
        self.policy = policy
        self.faults = Faults()
        self.drained: dict[str, str] = {}  # node -> reason
        self.down: dict[str, str] = {}  # node -> reason: failed, until resumed
        self._clock = clock
        self._jobs: dict[str, _Job] = {}
        self._ids = itertools.count(1)
        self._history: deque[JobStatus] = deque()  # finished jobs forgotten by _jobs
        self._history_lost_until: datetime | None = None  # latest end dropped from it
        self._quota_changes: list[QuotaChange] = []

    # --- SchedulerBackend -------------------------------------------------------------

    def submit(self, request: JobRequest) -> str:
        if self.faults.submit_hang_seconds:
            threading.Event().wait(self.faults.submit_hang_seconds)
        self._play()
        tenant = self.tenants.get(request.tenant)
        if tenant is None:
            raise ProbeError(f"Invalid account or account/partition combination: {request.tenant}")
        if tenant.quota_gpus is not None and request.workload.gpus > tenant.quota_gpus:
            raise ProbeError(
                f"job asks {request.workload.gpus} GPUs, above tenant {tenant.name}'s quota of "
                f"{tenant.quota_gpus}: it can never run"
            )
        return self._add(request.tenant, request.queue, request.workload, request.run_id)

    def submit_background(self, tenant: str, workload: Workload, queue: str | None = None) -> str:
        """Another user's job: load the probes compete with."""
        self._play()
        if tenant not in self.tenants:
            raise ProbeError(f"Invalid account: {tenant}")
        return self._add(tenant, queue, workload, None)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        self._play()
        return {i: self._jobs[i].status() for i in job_ids if i in self._jobs}

    def cancel(self, job_id: str) -> None:
        self._play()
        job = self._jobs.get(job_id)
        if job is None or job.phase.finished:
            return
        self._end(
            job, self._clock.now(), JobPhase.CANCELLED, None, "Cancelled", "cancelled by request"
        )
        self._schedule(self._clock.now())

    def logs(self, job_id: str) -> str:
        self._play()
        job = self._jobs.get(job_id)
        if job is None:
            raise BackendError(f"job {job_id} is not known to the cluster")
        if job.workload.behaviour is not Behaviour.LOG_CANARY or job.started_at is None:
            return ""
        now = job.finished_at or self._clock.now()
        padding = canary_padding(str(job.run_id), job.workload)
        lines = []
        for seq in range(job.workload.log_lines):
            at = job.started_at + timedelta(seconds=seq * job.workload.log_interval_seconds)
            if at > now:
                break
            if not any(start <= at < end for start, end in self.faults.log_loss):
                lines.append(
                    f"{CANARY_MARK} run={job.run_id} seq={seq} ts={at.timestamp():.6f}{padding}"
                )
        return "\n".join(lines) + ("\n" if lines else "")

    def probe_jobs(self) -> list[JobStatus]:
        self._play()
        return [j.status() for j in self._jobs.values() if j.run_id and not j.phase.finished]

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        self._play_accounting()
        held = (j.status() for j in self._jobs.values() if j.phase.finished)
        jobs = [
            s
            for s in (*self._history, *held)
            if s.finished_at is not None and since <= s.finished_at < until
        ]
        lost = self._history_lost_until
        complete = lost is None or lost < since
        return FinishedJobs(
            since,
            until,
            tuple(sorted(jobs, key=lambda s: (s.finished_at or since, s.job_id))),
            complete,
            "" if complete else f"jobs that finished before {lost} are forgotten",
        )

    def quota_changes(self, since: datetime, until: datetime) -> list[QuotaChange]:
        self._play_accounting()
        return [c for c in self._quota_changes if since <= c.at < until]

    def snapshot(self) -> SchedulerSnapshot:
        self._play()
        now = self._clock.now()
        active = [j.status() for j in self._jobs.values() if not j.phase.finished]
        ending = [j.status() for j in self._jobs.values() if j.phase.finished and j.placement]
        allocated = self._allocated()
        return SchedulerSnapshot(
            at=now,
            queues=queue_states(active, now, self.tenants),
            nodes=tuple(
                SchedulerNode(
                    name=n.name,
                    pool=n.pool,
                    gpus_total=n.gpus,
                    gpus_allocated=allocated[n.name],
                    state="down"
                    if n.name in self.down
                    else _node_state(n, allocated[n.name], self.drained.get(n.name)),
                    reason=self.down.get(n.name) or self.drained.get(n.name),
                )
                for n in self.nodes.values()
            ),
            jobs=(*active, *ending),
        )

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        self._play()
        for name in (as_tenant, other_tenant):
            if name not in self.tenants:
                raise ProbeError(f"Invalid account: {name}")
        theirs = sorted(
            (j for j in self._jobs.values() if j.tenant == other_tenant),
            key=lambda j: (j.submitted_at, j.id),
        )
        broken = self.faults.isolation_broken
        # Real names only from a listing that got through, as a tenant would learn them; every
        # tenant keeps one Secret, `<tenant>-credentials`.
        names = {
            "pods/log": theirs[-1].id if broken and theirs else _UNLISTED,
            "secrets": f"{other_tenant}-credentials" if broken else _UNLISTED,
        }
        read = {
            "jobs": f"listed {len(theirs)} Jobs",
            "pods": f"listed {len(theirs)} pods",
            "pods/log": "read its log (0 bytes, not kept)",
            "secrets": "listed 1 Secrets",
        }
        user = f"system:serviceaccount:{as_tenant}:observer-probe"
        attempts = []
        for action, verb, resource, group in _ISOLATION_READS:
            obj = names[resource] if verb == "get" else None
            target = f"{other_tenant}/{obj}" if obj else other_tenant
            if not broken:
                kind = resource.split("/")[0] + (f".{group}" if group else "")
                subject = f'{kind} "{obj}"' if obj else kind
                detail = (
                    f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
                    f'in API group "{group}" in the namespace "{other_tenant}"'
                )
            elif verb == "get" and resource == "secrets":
                detail = "read it (1 keys, values not kept)"
            else:
                detail = read[resource]
            attempts.append(AccessAttempt(action, target, broken, detail))
        return attempts

    def close(self) -> None:
        return None

    # --- the cluster itself -------------------------------------------------------------

    def drain(self, node: str, reason: str) -> None:
        self._play()
        self.drained[node] = reason

    def change_quota(self, tenant: str, gpus: int | None, actor: str) -> None:
        """`actor` sets the tenant's GPU quota (None: no limit) now, as an admin would."""
        self._play()
        self.tenants[tenant] = replace(self.tenants[tenant], quota_gpus=gpus)
        change = f"quota_gpus={-1 if gpus is None else gpus}"
        self._quota_changes.append(
            QuotaChange(self._clock.now(), actor, {"tenant": tenant}, change)
        )
        self._schedule(self._clock.now())

    def resume(self, node: str) -> None:
        self._play()
        self.drained.pop(node, None)
        self.down.pop(node, None)
        self._schedule(self._clock.now())

    def fail_node(self, node: str, reason: str) -> None:
        """The node fails (`scontrol update state=down`, a node lost): it is down until
        resumed, and every job running on it ends NODE_FAIL and is queued again, as Slurm
        requeues a batch job; each ended attempt is listed among the finished jobs."""
        self._play()
        now = self._clock.now()
        self.down[node] = reason
        for job in self._jobs.values():
            if job.phase.finished or node not in job.placement:
                continue
            attempt = Attempt(
                job.eligible_at or job.submitted_at,
                job.started_at,
                now,
                job.ran_on,
                "NODE_FAIL",
                "NodeDown",
            )
            self._history.append(
                replace(
                    job.status(),
                    phase=JobPhase.FAILED,
                    finished_at=now,
                    reason="NodeDown",
                    message=f"NODE_FAIL on {node}: {reason}",
                )
            )
            job.attempts = (*job.attempts, attempt)
            job.phase, job.started_at, job.ends_at, job.placement = JobPhase.PENDING, None, None, {}
            job.eligible_at, job.ran_on, job.reason, job.message = now, (), None, None
        self._schedule(now)

    def fail_job(self, job_id: str, reason: str, message: str, exit_code: int) -> None:
        """The job's work died on its node (its GPU fell off the bus): it ends FAILED now with
        the platform's words for it, and its GPUs go to the next pending jobs. A node-side
        event: it happens whether or not the API answers. A finished job stays as it ended."""
        self._advance()
        job = self._jobs[job_id]
        if job.phase.finished:
            return
        now = self._clock.now()
        self._end(job, now, JobPhase.FAILED, exit_code, reason, message)
        self._schedule(now)

    def _add(self, tenant: str, queue: str | None, workload: Workload, run_id: str | None) -> str:
        if not self.faults.reachable:
            raise BackendError("the cluster's API is unreachable")
        job = _Job(f"sim-{next(self._ids)}", tenant, queue, workload, run_id, self._clock.now())
        self._jobs[job.id] = job
        self._schedule(job.submitted_at)
        return job.id

    def holdings(self) -> list[tuple[JobStatus, Behaviour, dict[str, int]]]:
        """What the nodes themselves show, whether or not the API answers: every job placed
        on GPUs now (a stuck one after its end too), what it does, its GPUs per node."""
        self._advance()
        return [
            (j.status(), j.workload.behaviour, dict(j.placement))
            for j in self._jobs.values()
            if j.placement
        ]

    def _play(self) -> None:
        if not self.faults.reachable:
            raise BackendError("the cluster's API is unreachable")
        self._advance()

    def _play_accounting(self) -> None:
        self._play()
        if not self.faults.accounting_reachable:
            raise BackendError("the cluster's accounting is unreachable")

    def _advance(self) -> None:
        """Play the cluster forward to now: end jobs in time order, rescheduling after each."""
        now = self._clock.now()
        for job in self._jobs.values():
            if job.placement and job.phase.finished and job.id not in self.faults.stuck_jobs:
                job.placement = {}  # released: the stuck pod was finally removed
        while True:
            due = [j for j in self._jobs.values() if j.ends_at and j.ends_at <= now]
            if not due:
                break
            at = min(j.ends_at for j in due if j.ends_at)
            for job in due:
                if job.ends_at == at:
                    self._finish(job, at)
            self._schedule(at)
        self._schedule(now)
        self._forget(now)

    def _finish(self, job: _Job, at: datetime) -> None:
        behaviour = job.workload.behaviour
        if behaviour is Behaviour.OOM:
            self._end(
                job,
                at,
                JobPhase.FAILED,
                137,
                "OOMKilled",
                "the container exceeded its memory limit",
            )
        elif behaviour is Behaviour.BAD_COMMAND:
            self._end(
                job,
                at,
                JobPhase.FAILED,
                127,
                "StartError",
                'exec: "observer-no-such-command": executable file not found in $PATH',
            )
        elif behaviour is Behaviour.GPU_COMM and (pair := self._degraded_pair(job)):
            source, target = pair.split("-")
            self._end(
                job,
                at,
                JobPhase.FAILED,
                GpuCommunicationError.exit_code,
                "NonZeroExitCode",
                f"observer probe gpu-comm: multi-GPU communication failed: GPU {source} -> GPU "
                f"{target} at half its link's rate",
            )
        elif job.workload.exit_code != 0:
            self._end(
                job,
                at,
                JobPhase.FAILED,
                job.workload.exit_code,
                "NonZeroExitCode",
                f"exited with code {job.workload.exit_code}",
            )
        else:
            self._end(job, at, JobPhase.SUCCEEDED, 0, None, None)

    def _degraded_pair(self, job: _Job) -> str | None:
        """The GPU pair whose link is degraded on a node the job holds, if any."""
        degraded = self.faults.comm_degraded
        return next((degraded[n] for n in job.placement if n in degraded), None)

    def _end(
        self,
        job: _Job,
        at: datetime,
        phase: JobPhase,
        code: int | None,
        reason: str | None,
        message: str | None,
    ) -> None:
        job.phase, job.finished_at, job.ends_at = phase, at, None
        job.exit_code, job.reason, job.message = code, reason, message
        if job.id not in self.faults.stuck_jobs:
            job.placement = {}

    def _forget(self, now: datetime) -> None:
        for job_id in [
            j.id
            for j in self._jobs.values()
            if j.finished_at and now - j.finished_at > FINISHED_RETENTION and not j.placement
        ]:
            self._history.append(self._jobs.pop(job_id).status())
        while self._history:
            end = self._history[0].finished_at
            if end is None or now - end <= HISTORY_RETENTION:
                break
            self._history.popleft()
            self._history_lost_until = max(end, self._history_lost_until or end)

    def _allocated(self) -> dict[str, int]:
        used = {name: self.faults.leaked_gpus.get(name, 0) for name in self.nodes}
        for job in self._jobs.values():
            for node, gpus in job.placement.items():
                used[node] += gpus
        return used

    def _schedule(self, at: datetime) -> None:
        pending = [
            j for j in self._jobs.values() if j.phase is JobPhase.PENDING and not j.placement
        ]
        if not pending:
            return
        free = {
            name: (0 if name in self.drained or name in self.down else node.gpus) - used
            for (name, node), used in zip(
                self.nodes.items(), self._allocated().values(), strict=True
            )
        }
        running = self._held_gpus()
        waiting_ahead = False
        queue = self._order(pending, running)
        while queue:
            job = queue.pop(0)
            if job.tenant in self.faults.held_tenants:
                job.reason = self.faults.held_tenants[job.tenant] or None
                job.message = None
                continue
            quota = self.tenants[job.tenant].quota_gpus
            if quota is not None and running.get(job.tenant, 0) + job.workload.gpus > quota:
                job.reason = "QuotaExceeded"
                job.message = (
                    f"tenant {job.tenant} uses {running.get(job.tenant, 0)} of its {quota} GPUs; "
                    f"this job needs {job.workload.gpus} more"
                )
                continue
            placement = _fit(job.workload, free)
            if placement is None:
                job.reason = "Priority" if waiting_ahead else "Resources"
                job.message = (
                    f"0/{len(self.nodes)} nodes are available: waiting for "
                    f"{job.workload.gpus_per_node} free GPUs on {job.workload.nodes} node(s)"
                )
                waiting_ahead = True
                continue
            for node, gpus in placement.items():
                free[node] -= gpus
            running[job.tenant] = running.get(job.tenant, 0) + job.workload.gpus
            self._start(job, placement, at)
            # Only a start moves the shares: the rest is re-ordered after one.
            queue = self._order(queue, running)

    def _start(self, job: _Job, placement: dict[str, int], at: datetime) -> None:
        job.placement = placement
        job.ran_on = tuple(placement)
        if job.workload.behaviour is Behaviour.BAD_IMAGE:
            # Bound to a node and holding its GPUs, but the container never starts.
            job.reason = "ImagePullBackOff"
            job.message = 'Back-off pulling image "registry.invalid/observer/no-such-image:0"'
            return
        job.phase, job.started_at, job.reason, job.message = JobPhase.RUNNING, at, None, None
        seconds = {
            Behaviour.OOM: min(OOM_AFTER_SECONDS, job.workload.duration_seconds),
            Behaviour.BAD_COMMAND: BAD_COMMAND_AFTER_SECONDS,
        }.get(job.workload.behaviour, job.workload.duration_seconds)
        job.ends_at = at + timedelta(seconds=seconds)

    def _held_gpus(self) -> dict[str, int]:
        """GPUs each tenant's jobs hold now: a job stuck pulling its image holds them too."""
        held: dict[str, int] = {}
        for job in self._jobs.values():
            if job.placement and not job.phase.finished:
                held[job.tenant] = held.get(job.tenant, 0) + sum(job.placement.values())
        return held

    def _order(self, pending: list[_Job], running: dict[str, int]) -> list[_Job]:
        favoured = self.faults.favoured_tenant
        if favoured is not None:
            return sorted(pending, key=lambda j: (j.tenant != favoured, j.submitted_at, j.id))
        if self.policy is Policy.FIFO:
            return sorted(pending, key=lambda j: (j.submitted_at, j.id))
        return sorted(
            pending,
            key=lambda j: (
                running.get(j.tenant, 0) / self.tenants[j.tenant].weight,
                j.submitted_at,
                j.id,
            ),
        )


def _fit(workload: Workload, free: dict[str, int]) -> dict[str, int] | None:
    fits = [node for node, gpus in free.items() if gpus >= workload.gpus_per_node]
    if len(fits) < workload.nodes:
        return None
    return {node: workload.gpus_per_node for node in fits[: workload.nodes]}


def _node_state(node: NodeSpec, allocated: int, drained: str | None) -> str:
    if drained is not None:
        return "drained"
    if allocated == 0:
        return "idle"
    return "allocated" if allocated >= node.gpus else "mixed"
