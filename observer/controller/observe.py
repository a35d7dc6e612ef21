"""The controller's reading of the fleet: every agent's snapshot, its node-local findings
stored, its GPUs sampled into the store (each with the tenant whose job held it and what
kind of task that was, where the scheduler names the job), and an agent that cannot be read
recorded as the observer's own blind spot (a condition), never as silence."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from types import MappingProxyType

from observer.clock import Clock
from observer.controller.views import Published
from observer.detectors import gpu_health, node_leaks
from observer.detectors.conditions import ConditionTracker
from observer.domain import (
    Finding,
    GpmActivity,
    GpmState,
    JobStatus,
    NodeSnapshot,
    OwnerKind,
    ProbeRun,
    SchedulerSnapshot,
    Severity,
    Subject,
    Symptom,
)
from observer.errors import BackendError, StoreError
from observer.fleet.base import Fleet
from observer.logging_setup import get_logger
from observer.metrics import ControllerMetrics
from observer.records import OTHER_TYPE, PROBE_TYPE, SERVICE_TASK, TENANT_JOB, StoredGpuSample
from observer.settings.reports import TaskTypeRule
from observer.storage.store import Store
from observer.storage.write_behind import WriteBehind

_log = get_logger("observer.controller.observe")

AGENT_UNREACHABLE = "agent_unreachable"


class FleetObserver:
    def __init__(
        self,
        fleet: Fleet,
        store: Store,
        clock: Clock,
        metrics: ControllerMetrics,
        unreachable_grace_seconds: float,
        latest: Published[Mapping[str, NodeSnapshot]] | None = None,
        scheduler: Callable[[], SchedulerSnapshot | None] = lambda: None,
        sample_interval_seconds: float = 0.0,
        runs: Callable[[], Sequence[ProbeRun]] = tuple,
        task_types: Sequence[TaskTypeRule] = (),
    ) -> None:
        """`latest` gets every agent's last snapshot, by node, published after each read for
        the detectors that compare the scheduler's view with the nodes'. `scheduler` gives the
        latest scheduler snapshot (None before the first), whose jobs name the tenant of
        each GPU's processes. A GPU's sample is stored when this many seconds have passed
        since its last stored one (0: every read). `runs` gives the observer's active probe
        runs, which name the probe of a job that carries their run id; `task_types` the type
        of a tenant's own job (reports.task_types)."""
        self._fleet = fleet
        self._store = store
        self._clock = clock
        self._metrics = metrics
        self._grace = unreachable_grace_seconds
        self._tracker = ConditionTracker()
        # What each node's agent reported at its last read (at start, the open findings the
        # store has), by node: a finding not among them is new. Only the last read is kept:
        # a finding an agent stopped reporting (closed and past its retention) never comes
        # back, so this holds what the agents report now, not every finding of the soak.
        self._known: dict[str | None, set[tuple[str, datetime]]] | None = None
        # The agents' open findings, and what was last saved of each one reported: in
        # memory, so that a cycle over a large fleet writes and reads only what changed.
        self._open: dict[tuple[str, datetime], Finding] = {}
        self._saved: dict[tuple[str, datetime], Finding] = {}
        self._unsaved: WriteBehind[Finding] = WriteBehind(
            store.save_findings, lambda f: (f.key, f.opened_at)
        )
        self._latest = latest if latest is not None else Published(MappingProxyType({}))
        self._scheduler = scheduler
        self._sample_interval = timedelta(seconds=sample_interval_seconds)
        self._stored_at: dict[str, datetime] = {}  # GPU uuid -> its last stored sample's at
        self._runs = runs
        # Run id -> probe, kept while the scheduler shows the job: a run ends when its job
        # does, and the job may hold its GPUs a while longer (Slurm's COMPLETING, a pod's
        # grace period).
        self._probes: dict[str, str] = {}
        self._task_types = tuple(task_types)

    def observe(self) -> list[Finding]:
        """Read every agent once; return the findings that opened or closed."""
        now = self._clock.now()
        known = self._known_findings()
        snapshots: list[NodeSnapshot] = []
        symptoms: list[Symptom] = []
        reads = self._fleet.fetch_all(self._fleet.agents())
        for agent, read in reads.items():
            if isinstance(read, BackendError):
                self._metrics.agent_errors_total.labels(agent).inc()
                symptoms.append(_unreachable(agent, str(read), self._grace))
            else:
                snapshots.append(read)
        # Only the agents read just now are seen: one that dropped out of discovery keeps its
        # condition (silence is not health).
        changed = self._tracker.update(symptoms, now, partial(_read_now, set(reads)))
        if snapshots:
            latest = {**self._latest.get(), **{snap.node: snap for snap in snapshots}}
            self._latest.publish(MappingProxyType(latest))
        reported = [f for snap in snapshots for f in snap.findings]
        gone = self._no_longer_reported(snapshots, reported, now)
        new = [
            f
            for snap in snapshots
            for f in snap.findings
            if (f.key, f.opened_at) not in known.get(snap.node, ())
        ]
        updated = [f for f in reported if self._saved.get((f.key, f.opened_at)) != f]
        self._unsaved.save([*updated, *gone, *changed])
        known.update(
            {snap.node: {(f.key, f.opened_at) for f in snap.findings} for snap in snapshots}
        )
        self._saved = {(f.key, f.opened_at): f for f in reported}
        for finding in [*reported, *gone]:
            if finding.is_open:
                self._open[finding.key, finding.opened_at] = finding
            else:
                self._open.pop((finding.key, finding.opened_at), None)
        scheduler = self._scheduler()
        try:
            self._store.add_gpu_samples(
                [
                    s
                    for s in _samples(
                        snapshots, scheduler, self._known_probes(scheduler), self._task_types
                    )
                    if self._sample_due(s)
                ]
            )
        except StoreError as exc:  # not kept: the store's outage is its own blind time
            _log.warning("GPU samples not stored", error=str(exc))
        opened_or_closed = [*new, *gone, *changed]
        self._metrics.findings.record(
            opened_or_closed, partial(self._store.findings, open_only=True)
        )
        for finding in opened_or_closed:
            _log.info(
                "finding " + ("opened" if finding.is_open else "closed"),
                detector=finding.detector,
                subject=dict(finding.subject),
            )
        return opened_or_closed

    def _known_findings(self) -> dict[str | None, set[tuple[str, datetime]]]:
        if self._known is None:  # a restarted controller must not count old findings again
            stored = self._store.findings(open_only=True)
            self._tracker.resume(f for f in stored if f.detector == AGENT_UNREACHABLE)
            self._known = {}
            for f in stored:
                self._known.setdefault(f.subject.get("node"), set()).add((f.key, f.opened_at))
            # The agents' own findings only: the controller's (allocated_without_job, ...)
            # name nodes too, and no agent ever reports them.
            self._open = {
                (f.key, f.opened_at): f
                for f in stored
                if f.detector in node_leaks.DETECTORS | gpu_health.DETECTORS
            }
        return self._known

    def _known_probes(self, scheduler: SchedulerSnapshot | None) -> Mapping[str, str]:
        probes = {**self._probes, **{r.run_id: r.probe for r in self._runs()}}
        jobs = {job.run_id for job in scheduler.jobs} if scheduler else set()
        self._probes = {run: probe for run, probe in probes.items() if run in jobs}
        return probes

    def _sample_due(self, sample: StoredGpuSample) -> bool:
        last = self._stored_at.get(sample.gpu_uuid)
        if last is not None and sample.at - last < self._sample_interval:
            return False
        self._stored_at[sample.gpu_uuid] = sample.at
        return True

    def _no_longer_reported(
        self, snapshots: list[NodeSnapshot], reported: list[Finding], now: datetime
    ) -> list[Finding]:
        """Open node findings that their agent, read just now, no longer reports at all (it
        restarted and lost them): closed now, saying why."""
        nodes = {snap.node for snap in snapshots}
        current = {(f.key, f.opened_at) for f in reported}
        return [
            replace(
                f,
                closed_at=now,
                evidence={**f.evidence, "closed_because": "its agent no longer reports it"},
            )
            for f in self._open.values()
            if f.subject.get("node") in nodes and (f.key, f.opened_at) not in current
        ]


def _read_now(agents: set[str], detector: str, subject: Subject) -> bool:
    return subject.get("agent") in agents


def _unreachable(agent: str, error: str, grace: float) -> Symptom:
    return Symptom(
        detector=AGENT_UNREACHABLE,
        subject={"agent": agent},
        severity=Severity.CRITICAL,
        summary=f"agent {agent} cannot be read: its node's GPUs are not observed",
        rule=f"the agent's /v1/snapshot failed for {grace:g} s",
        evidence={"error": error},
        hold_seconds=grace,
    )


# Who held a GPU: the tenant, the task (a probe's name, SERVICE_TASK, TENANT_JOB; None: not
# known) and its type (PROBE_TYPE or the tenant's job's; None: not known).
Holder = tuple[str, str | None, str | None]


def gpu_holders(snapshot: NodeSnapshot, holders: Mapping[str, Holder]) -> dict[str, Holder]:
    """GPU uuid -> holder of the job that owns the GPU's processes, by `holders` (owner id,
    as in JobStatus.owner_ids -> its job's holder). A GPU whose known processes belong to
    several tenants has none: it is shared; to one tenant's jobs of several tasks, no task
    (of several types, no type)."""
    found: dict[str, set[Holder]] = {}
    for process in snapshot.processes:
        named = process.owner.kind is not OwnerKind.NONE
        holder = holders.get(process.owner.id) if named else None
        if holder is not None:
            found.setdefault(process.gpu_uuid, set()).add(holder)
    held = {}
    for uuid, found_holders in found.items():
        tenants = {tenant for tenant, _, _ in found_holders}
        if len(tenants) == 1:
            tasks = {task for _, task, _ in found_holders}
            types = {kind for _, _, kind in found_holders}
            held[uuid] = (
                tenants.pop(),
                tasks.pop() if len(tasks) == 1 else None,
                types.pop() if len(types) == 1 else None,
            )
    return held


def task_type(job: JobStatus, rules: Sequence[TaskTypeRule]) -> str:
    """PROBE_TYPE for the observer's own runs and service; a tenant's own job, the type of
    the first rule whose queue and priority it matches (a rule's unset one matches any), else
    OTHER_TYPE."""
    if job.run_id is not None or job.service is not None:
        return PROBE_TYPE
    for rule in rules:
        if rule.queue in (None, job.queue) and rule.priority in (None, job.priority):
            return rule.type
    return OTHER_TYPE


def _task(job: JobStatus, probes: Mapping[str, str]) -> str | None:
    """A probe's name for one of the observer's runs (None when the controller no longer
    knows the run: it ended before a restart), SERVICE_TASK for a replica of its inference
    service, TENANT_JOB for a tenant's own job."""
    if job.service is not None:
        return SERVICE_TASK
    return TENANT_JOB if job.run_id is None else probes.get(job.run_id)


def _samples(
    snapshots: list[NodeSnapshot],
    scheduler: SchedulerSnapshot | None,
    probes: Mapping[str, str],
    rules: Sequence[TaskTypeRule],
) -> list[StoredGpuSample]:
    jobs = scheduler.jobs if scheduler else ()
    holders = {
        owner: (job.tenant, _task(job, probes), task_type(job, rules))
        for job in jobs
        for owner in job.owner_ids
    }
    samples = []
    for snap in snapshots:
        held = gpu_holders(snap, holders)
        for gpu in snap.gpus:
            if gpu.identity is None or gpu.sample is None:
                continue
            tenant, task, kind = held.get(gpu.identity.uuid, (None, None, None))
            processes = gpu.sample.processes
            samples.append(
                StoredGpuSample(
                    node=snap.node,
                    gpu_uuid=gpu.identity.uuid,
                    gpu_index=gpu.index,
                    at=gpu.sample.at,
                    utilization_gpu_percent=gpu.sample.utilization_gpu_percent,
                    memory_used_bytes=gpu.sample.memory_used_bytes,
                    memory_total_bytes=gpu.sample.memory_total_bytes,
                    power_milliwatts=gpu.sample.power_milliwatts,
                    process_count=len(processes) if processes is not None else None,
                    tenant=tenant,
                    task=task,
                    sm_active_percent=(
                        round(gpu.activity.sm_active_ratio * 100)
                        if isinstance(gpu.activity, GpmActivity)
                        else None
                    ),
                    gpm_supported=_gpm_supported(gpu.activity),
                    task_type=kind,
                )
            )
    return samples


def _gpm_supported(activity: GpmActivity | GpmState | None) -> bool | None:
    """Whether the GPU has GPM, where this tick tells: not when GPM was not read."""
    if activity is None:
        return None
    return activity is not GpmState.NOT_SUPPORTED
