"""What each probe run had and met while it lived, for its row of the per-task record: the
quota in force for its tenant (the queue system's nominal quota the scheduler's snapshots
carried, else the tenant's configured quota), the utilisation and memory of its own GPUs (the
samples attributed to it, reduced by the store), the GPU health findings on its nodes while
it ran, and the alerts that fired while it lived. Pure.

A run lives from its submission to its end (unfinished: to the end of what was read); it
holds GPUs from its start. The quota and the alerts are read over its life (a quota holds a
run back while it waits too), its GPUs and their errors from its start."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from observer.detectors import gpu_health
from observer.domain import Finding, ProbeRun, Severity
from observer.records import RunGpuFigures, RunSpan, StoredAlert, StoredQueueSample
from observer.reports.compute import health
from observer.reports.compute.causes import holders
from observer.reports.compute.data import PeriodData, ReportContext

# The agents' GPU findings that put a GPU in an error state: Xids and every condition short
# of throttling, which slows a GPU but is no error of it.
GPU_ERROR_DETECTORS = frozenset(
    {gpu_health.GPU_XID, *health.CONDITIONS} - {gpu_health.CLOCK_SLOWDOWN}
)
_SEVERITY = (Severity.INFO, Severity.WARNING, Severity.CRITICAL)
# Alert labels that name a tenant; an alert with neither one of them nor `node` is the whole
# platform's.
_TENANT_LABELS = ("tenant", "namespace")


class QuotaSource(StrEnum):
    # The queue system's guarantee of the tenant alone (a Kueue ClusterQueue's nominalQuota,
    # a Volcano Queue's deserved GPUs), as the scheduler's snapshots carried it.
    QUEUE = "queue"
    CONFIGURED = "configured"  # the tenant's quota_gpus in the settings


@dataclass(frozen=True, slots=True)
class Quota:
    """The quota in force for a run's tenant while it lived: `gpus`, each value in the order
    seen (more than one: it changed meanwhile); `borrowing_limit_gpus`, what the queue let it
    borrow beyond them when last seen (None: without limit; 0: nothing)."""

    source: QuotaSource
    gpus: tuple[int, ...]
    borrowing_limit_gpus: int | None = 0


@dataclass(frozen=True, slots=True)
class GpuErrors:
    """The GPU error findings (GPU_ERROR_DETECTORS) on a run's nodes while it ran: how many,
    and the worst of them (fatal first, then by severity): its detector, its Xid code."""

    count: int
    worst: str | None = None
    xid: str | None = None
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class RunSurroundings:
    """`gpu`: its own GPUs' figures (None: no sample of them); `gpus_watched`: it started
    and the node agents were read (set up, or sampling GPUs in the period), so that no sample
    means none was taken; `gpu_errors` None where it never started or no node agent was
    read, `alerts` None where no Alertmanager was read."""

    quota: Quota | None
    gpu: RunGpuFigures | None
    gpus_watched: bool
    gpu_errors: GpuErrors | None
    alerts: tuple[str, ...] | None


def run_spans(runs: Sequence[ProbeRun], until: datetime) -> list[RunSpan]:
    """Where and when each run that started held GPUs, for the store to reduce its samples."""
    return [
        RunSpan(r.run_id, r.tenant, r.probe, r.node_names, r.started_at, r.finished_at or until)
        for r in runs
        if r.started_at is not None and r.node_names
    ]


def surroundings(data: PeriodData, context: ReportContext) -> dict[str, RunSurroundings]:
    """Every run of `data`, by run id."""
    until = data.period.end
    # Read where set up, or where their samples say they were (a fleet given in process).
    agents = context.sources.agents or bool(data.gpu.nodes) or bool(data.run_gpu)
    quotas = _QuotaLog(data.queue_samples, context)
    errors = _by_node(f for f in data.findings if f.detector in GPU_ERROR_DETECTORS)
    alerts = (
        [a for a in data.alerts if a.name not in context.ignored_alerts]
        if context.sources.alertmanager
        else None
    )
    return {
        run.run_id: RunSurroundings(
            quota=quotas.of(run, until),
            gpu=data.run_gpu.get(run.run_id),
            gpus_watched=agents and run.started_at is not None,
            gpu_errors=_gpu_errors(run, errors, until)
            if agents and run.started_at is not None
            else None,
            alerts=None if alerts is None else _alerts(run, alerts, until),
        )
        for run in data.runs
    }


class _QuotaLog:
    """The queue samples' guarantees per tenant in time order, and the configured quotas."""

    def __init__(self, samples: Sequence[StoredQueueSample], context: ReportContext) -> None:
        self._at: dict[str, list[datetime]] = {}
        self._seen: dict[str, list[tuple[int, int | None]]] = {}
        for sample in samples:  # in time order, as stored
            state = sample.state
            if state.nominal_gpus is not None:
                self._at.setdefault(state.tenant, []).append(sample.at)
                seen = (state.nominal_gpus, state.borrowing_limit_gpus)
                self._seen.setdefault(state.tenant, []).append(seen)
        self._configured = {
            name: terms.quota_gpus
            for name, terms in context.tenants.items()
            if terms.quota_gpus is not None
        }

    def of(self, run: ProbeRun, until: datetime) -> Quota | None:
        begin = run.submitted_at or run.started_at
        at, seen = self._at.get(run.tenant, []), self._seen.get(run.tenant, [])
        if begin is not None:
            end = run.finished_at or until
            # From the last sample at or before its submission: in force when it came.
            held = seen[max(bisect_right(at, begin) - 1, 0) : bisect_right(at, end)]
            if held:
                gpus = tuple(dict.fromkeys(nominal for nominal, _ in held))
                return Quota(QuotaSource.QUEUE, gpus, held[-1][1])
        configured = self._configured.get(run.tenant)
        return None if configured is None else Quota(QuotaSource.CONFIGURED, (configured,))


def _by_node(findings: Iterable[Finding]) -> dict[str, list[Finding]]:
    nodes: dict[str, list[Finding]] = {}
    for finding in findings:
        nodes.setdefault(finding.subject.get("node", ""), []).append(finding)
    return nodes


def _gpu_errors(run: ProbeRun, by_node: Mapping[str, list[Finding]], until: datetime) -> GpuErrors:
    assert run.started_at is not None
    start, end = run.started_at, run.finished_at or until
    found = [
        f
        for node in run.node_names
        for f in by_node.get(node, ())
        if f.opened_at <= end
        and (f.closed_at is None or f.closed_at >= start)
        and _maybe_its_own(run, f)
    ]
    if not found:
        return GpuErrors(0)
    worst = max(found, key=lambda f: (health.is_fatal(f), _SEVERITY.index(f.severity)))
    return GpuErrors(len(found), worst.detector, worst.subject.get("xid"), health.is_fatal(worst))


def _maybe_its_own(run: ProbeRun, finding: Finding) -> bool:
    """A finding on one GPU is left out where it names that GPU's holders and the run is not
    among them: another job's GPU on the same node."""
    held = holders(finding)
    return not held or not run.owner_ids or not held.isdisjoint(run.owner_ids)


def _alerts(run: ProbeRun, alerts: Sequence[StoredAlert], until: datetime) -> tuple[str, ...]:
    """The alerts whose firing overlaps the run's life and that concern its nodes, its tenant
    or the whole platform (no node and no tenant label), each name once, in firing order."""
    begin = run.submitted_at or run.started_at
    if begin is None:
        return ()
    end = run.finished_at or until
    names = (
        a.name
        for a in alerts
        if a.starts_at <= end and (a.ends_at or a.last_seen_at) >= begin and _concerns(run, a)
    )
    return tuple(dict.fromkeys(names))


def _concerns(run: ProbeRun, alert: StoredAlert) -> bool:
    labels = alert.labels
    tenants = {labels[k] for k in _TENANT_LABELS if k in labels}
    if "node" not in labels and not tenants:
        return True
    # An agent's `instance` is its node's name (the chart's monitors set it), else host:port.
    nodes = {labels.get("node"), labels.get("instance", "").rsplit(":", 1)[0]}
    return not nodes.isdisjoint(run.node_names) or run.tenant in tenants
