"""The monitoring-lag watch on the controller's loop: one check against Prometheus, fed with
what the controller knows independently of it (the agents' own NVML readings, for flat
lines; the GPU-busy probes running and where, for busy lag), its symptoms tracked as
conditions (a check that could not be read closes nothing), stored."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from observer.clock import Clock
from observer.controller.outbox import FindingsOutbox
from observer.detectors import monitoring_lag
from observer.detectors.conditions import ConditionTracker
from observer.detectors.layers import job_processes
from observer.domain import Behaviour, Finding, NodeSnapshot, ProbeRun, SchedulerSnapshot
from observer.metrics import ControllerMetrics
from observer.monitoring.base import selector
from observer.monitoring.checker import BusyProbe, FlatlineWatch, MonitoringChecker
from observer.probes.catalog import ProbeSpec
from observer.settings.detectors import MonitoringLagSettings
from observer.storage.store import Store


class LagWatch:
    def __init__(
        self,
        checker: MonitoringChecker,
        store: Store,
        metrics: ControllerMetrics,
        clock: Clock,
        rules: MonitoringLagSettings,
        nodes: Callable[[], Mapping[str, NodeSnapshot]],
        active: Callable[[], Sequence[ProbeRun]],
        catalog: Mapping[str, ProbeSpec],
        scheduler: Callable[[], SchedulerSnapshot | None] = lambda: None,
    ) -> None:
        """`nodes` gives the agents' latest snapshot by node (as FleetObserver publishes it);
        `active` the probe runs in flight; `scheduler` the latest scheduler snapshot, whose
        jobs name their owners as the agents see them."""
        self._checker = checker
        self._store = store
        self._metrics = metrics
        self._outbox = FindingsOutbox(store, metrics.findings)
        self._clock = clock
        self._rules = rules
        self._nodes = nodes
        self._active = active
        self._catalog = catalog
        self._scheduler = scheduler
        self._tracker = ConditionTracker()
        self._readings = AgentReadings()

    def resume(self) -> None:
        """Take over the monitoring conditions a previous controller left open."""
        self._tracker.resume(
            f
            for f in self._store.findings(open_only=True)
            if f.detector in (monitoring_lag.DETECTOR, monitoring_lag.UNREACHABLE)
        )

    def check(self) -> list[Finding]:
        snapshots = list(self._nodes().values())
        self._readings.add(snapshots)
        since = self._clock.now() - timedelta(seconds=self._rules.flatline_window_seconds)
        result = self._checker.check(
            flatlines=self._readings.watches(since, self._rules),
            busy_probes=busy_probes(self._active(), self._catalog, snapshots, self._scheduler()),
        )
        changed = self._tracker.update(result.symptoms, result.view.now, result.covers)
        self._outbox.put(changed)
        return changed


class AgentReadings:
    """Each GPU's utilisation as its agent read it, one value per sample (a snapshot read
    twice is one reading), over the flat-line window."""

    def __init__(self) -> None:
        self._by_gpu: dict[str, dict[datetime, float]] = {}

    def add(self, snapshots: Sequence[NodeSnapshot]) -> None:
        for snap in snapshots:
            for gpu in snap.gpus:
                sample = gpu.sample
                if gpu.identity is None or sample is None:
                    continue
                if sample.utilization_gpu_percent is None:  # a failed read is not a value
                    continue
                readings = self._by_gpu.setdefault(gpu.identity.uuid, {})
                readings[sample.at] = sample.utilization_gpu_percent / 100

    def watches(self, since: datetime, rules: MonitoringLagSettings) -> list[FlatlineWatch]:
        """One watch per GPU whose readings in the window vary enough to show a flat line;
        a GPU quiet on the agent's side could not, and is not queried."""
        watches = []
        for uuid in sorted(self._by_gpu):
            readings = self._by_gpu[uuid]
            for at in [at for at in readings if at < since]:
                del readings[at]
            if not readings:
                del self._by_gpu[uuid]
                continue
            if len(set(readings.values())) >= rules.flatline_min_agent_distinct_values:
                metric, labels = rules.gpu_utilization_metric, {rules.gpu_uuid_label: uuid}
                series = selector(metric, labels)
                watches.append(FlatlineWatch(series, metric, labels, sorted(readings.items())))
        return watches


def busy_probes(
    active: Sequence[ProbeRun],
    catalog: Mapping[str, ProbeSpec],
    nodes: Sequence[NodeSnapshot],
    scheduler: SchedulerSnapshot | None = None,
) -> list[BusyProbe]:
    """The GPUs each running GPU-busy probe keeps busy, from its known start: those its
    agent attributes to the probe's job (by the owners `scheduler` names for it, else by its
    job id), or every GPU of a node the probe holds whole. A GPU the agents cannot place yet
    is left out rather than guessed."""
    by_node = {snap.node: snap for snap in nodes}
    owners = {job.job_id: job.owner_ids for job in scheduler.jobs} if scheduler else {}
    probes = []
    for run in active:
        spec = catalog.get(run.probe)
        if spec is None or spec.workload.behaviour is not Behaviour.GPU_BUSY:
            continue
        if run.started_at is None or run.job_id is None:
            continue
        for name in run.node_names:
            snap = by_node.get(name)
            if snap is None:
                continue
            owner_ids = owners.get(run.job_id) or (run.job_id,)
            gpus = {p.gpu_uuid for p in job_processes(owner_ids, snap)}
            if not gpus and spec.workload.gpus_per_node >= len(snap.gpus):
                gpus = {g.identity.uuid for g in snap.gpus if g.identity is not None}
            probes += [BusyProbe(run.run_id, uuid, run.started_at) for uuid in sorted(gpus)]
    return probes
