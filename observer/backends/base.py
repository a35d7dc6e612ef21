"""What the controller asks of a scheduler, in domain types.

Failures to reach the platform raise BackendError (recorded as blind time and retried);
a submission the platform refuses raises ProbeError carrying the platform's words, which
for a quota probe is the expected outcome. An isolation probe's denials are answers, not
errors: they come back as AccessAttempts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol, runtime_checkable

from observer.domain import (
    AccessAttempt,
    JobPhase,
    JobRequest,
    JobStatus,
    QueueQuota,
    QueueState,
    SchedulerSnapshot,
)

RUN_ID_LABEL = "soak.observer/run-id"  # Kubernetes label; Slurm carries it in --comment
PROBE_LABEL = "soak.observer/probe"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-soak-observer"


@dataclass(frozen=True, slots=True)
class FinishedJobs:
    """Every tenant's jobs that finished in [since, until), each with its final phase, the
    platform's reason and exit code. `complete` is False when the platform may have forgotten
    some of them (`note` says why): a count from it is a lower bound."""

    since: datetime
    until: datetime
    jobs: tuple[JobStatus, ...]
    complete: bool
    note: str = ""


@dataclass(frozen=True, slots=True)
class QuotaChange:
    """Someone changed a tenant's or a queue's limits: when, who (the platform's account of
    the person), on what ({"tenant": ...}, with "user" for one user's limits within it, or
    {"qos": ...}), and the change in the platform's own words, one `limit=value` per limit
    set, separated by spaces ("GrpTRES=gres/gpu=4 MaxJobs=2"). `manager`: the program that
    wrote it, where the actor is a person another record names (Kubernetes' audit log)."""

    at: datetime
    actor: str
    subject: Mapping[str, str]
    change: str
    manager: str | None = None


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """An inference service the observer keeps up: `name` in `tenant`'s namespace (account),
    each replica running `observer probe serve` on `port` with `gpus_per_replica` GPUs."""

    name: str
    tenant: str
    gpus_per_replica: int
    port: int
    latency_ms: float
    warmup_seconds: float
    ready_period_seconds: float  # how often the platform probes /healthz
    queue: str | None = None  # Slurm: the tenant's partition; a Deployment has none


@dataclass(frozen=True, slots=True)
class Replica:
    """One replica as the platform shows it: where it answers (None until it has an
    address), whether the platform counts it ready, its revision (a rolling restart brings
    new ones), and, while it waits for a node, the scheduler's words for why."""

    name: str
    address: str | None
    ready: bool
    revision: str
    created_at: datetime | None
    pending_reason: str | None = None


@dataclass(frozen=True, slots=True)
class PartialView:
    """Since `since`, the scheduler has shown the observer only part of what it holds;
    `error` says which part and why, in the platform's terms (Slurm's PrivateData)."""

    since: datetime
    error: str


@runtime_checkable
class PartlyVisible(Protocol):
    """A platform that can hide other users' work from the observer's account, and says so."""

    def partial_view(self) -> PartialView | None:
        """What it hides as last checked (None: nothing); cheap, read by any thread."""
        ...


@runtime_checkable
class ServiceBackend(Protocol):
    """A platform that can keep a long-running service up: deployed, scaled, restarted in a
    rolling way and removed. Failures to reach the platform raise BackendError; a refusal,
    ProbeError with the platform's words."""

    def deploy_service(self, spec: ServiceSpec, replicas: int) -> None:
        """Create the service with `replicas` (an existing one of that name is scaled)."""
        ...

    def scale_service(self, spec: ServiceSpec, replicas: int) -> None: ...

    def restart_service(self, spec: ServiceSpec) -> None:
        """Replace every replica, a few at a time, as the platform's rolling update does."""
        ...

    def service_replicas(self, spec: ServiceSpec) -> list[Replica]:
        """Every live replica (not being deleted), oldest first."""
        ...

    def delete_service(self, spec: ServiceSpec) -> None:
        """Remove it; removing one that is gone is not an error."""
        ...


class ServicesOf:
    """The ServiceBackend calls of a backend that keeps its service in a part of its own
    (`_services`: Kubernetes' Deployment calls, Slurm's replica jobs)."""

    _services: ServiceBackend

    def deploy_service(self, spec: ServiceSpec, replicas: int) -> None:
        self._services.deploy_service(spec, replicas)

    def scale_service(self, spec: ServiceSpec, replicas: int) -> None:
        self._services.scale_service(spec, replicas)

    def restart_service(self, spec: ServiceSpec) -> None:
        self._services.restart_service(spec)

    def service_replicas(self, spec: ServiceSpec) -> list[Replica]:
        return self._services.service_replicas(spec)

    def delete_service(self, spec: ServiceSpec) -> None:
        self._services.delete_service(spec)


class SchedulerBackend(Protocol):
    def submit(self, request: JobRequest) -> str:
        """Submit a probe; return the platform's job id."""
        ...

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        """The current status of these jobs. An id the platform no longer knows is absent."""
        ...

    def cancel(self, job_id: str) -> None:
        """Cancel a job; cancelling a finished or unknown job is not an error."""
        ...

    def logs(self, job_id: str) -> str:
        """The job's output as the platform keeps it (raises BackendError if unavailable)."""
        ...

    def probe_jobs(self) -> list[JobStatus]:
        """Every job on the platform that carries an observer run id and is not finished:
        what a restarted controller adopts."""
        ...

    def snapshot(self) -> SchedulerSnapshot:
        """Queues per tenant, nodes with their GPUs, and every unfinished job."""
        ...

    def finished_jobs(self, since: datetime, until: datetime) -> FinishedJobs:
        """Every job of every tenant, the observer's and everyone else's, that finished in
        [since, until): the platform's task and failure counts."""
        ...

    def quota_changes(self, since: datetime, until: datetime) -> list[QuotaChange]:
        """Every change of a tenant's or queue's limits made in [since, until), in the order
        they were made: the platform's own record of who changed what."""
        ...

    def probe_isolation(self, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
        """Try every read this platform offers, with `as_tenant`'s own credentials, of
        `other_tenant`'s work (jobs, pods, logs, secrets; another account's jobs on Slurm),
        and return one AccessAttempt per try, in the order tried.

        A denial is an answer, never an error: `allowed=False` with the platform's words as the
        user sees them. `allowed=True` is a breach. Reads are evidence only: no content of the
        other tenant's (log lines, secret values) is returned, only that it could be read.
        Raises ProbeError when the probe cannot be run as configured (no credentials for
        `as_tenant`, or credentials that cannot even read `as_tenant`'s own work, which would
        make every denial meaningless), and BackendError when the platform cannot be reached
        or answers neither yes nor no, so no verdict can be drawn."""
        ...

    def close(self) -> None:
        """Release connections; the platform's jobs are left as they are."""
        ...


def queue_states(
    jobs: Iterable[JobStatus], at: datetime, tenants: Iterable[str] = ()
) -> tuple[QueueState, ...]:
    """Unfinished jobs per (tenant, queue), as every backend's snapshot reports them. A known
    tenant with nothing queued still gets its zero row: fairness needs its zero."""
    groups: dict[tuple[str, str | None], list[JobStatus]] = {}
    for job in jobs:
        groups.setdefault((job.tenant, job.queue), []).append(job)
    for tenant in tenants:
        if not any(key[0] == tenant for key in groups):
            groups[(tenant, None)] = []
    states = []
    for (tenant, queue), mine in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        pending = [j for j in mine if j.phase is JobPhase.PENDING]
        running = [j for j in mine if j.phase is JobPhase.RUNNING]
        by_priority: Counter[str] = Counter()
        by_user: Counter[str] = Counter()
        for job in running:
            if job.priority:
                by_priority[job.priority] += job.gpus
            if job.user:
                by_user[job.user] += job.gpus
        waits = [(at - j.submitted_at).total_seconds() for j in pending if j.submitted_at]
        states.append(
            QueueState(
                tenant=tenant,
                queue=queue,
                pending_jobs=len(pending),
                pending_gpus=sum(j.gpus for j in pending),
                running_jobs=len(running),
                running_gpus=sum(j.gpus for j in running),
                longest_wait_seconds=max(waits, default=0.0),
                pending_reasons=dict(Counter(j.reason for j in pending if j.reason)),
                running_gpus_by_priority=dict(by_priority),
                running_gpus_by_user=dict(by_user),
            )
        )
    return tuple(states)


def with_guarantees(
    states: Iterable[QueueState], quotas: Iterable[QueueQuota]
) -> tuple[QueueState, ...]:
    """Each tenant's queue rows with its guarantee: the nominal GPUs (and borrowing limits) of
    the queues that serve it alone. A queue several tenants share guarantees none of them
    anything by itself, and a tenant any of whose queues may borrow without limit has none."""
    nominal: dict[str, int] = {}
    borrowing: dict[str, int | None] = {}
    for quota in quotas:
        if len(quota.tenants) != 1 or quota.nominal_gpus is None:
            continue
        [tenant] = quota.tenants
        nominal[tenant] = nominal.get(tenant, 0) + quota.nominal_gpus
        limit, before = quota.borrowing_limit_gpus, borrowing.get(tenant, 0)
        borrowing[tenant] = None if limit is None or before is None else before + limit
    return tuple(
        replace(
            state,
            nominal_gpus=nominal[state.tenant],
            borrowing_limit_gpus=borrowing[state.tenant],
        )
        if state.tenant in nominal
        else state
        for state in states
    )
