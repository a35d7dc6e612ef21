"""Every metric the observer exports, defined once, against an injected CollectorRegistry.
(Over 600 lines on purpose: one place lists every series a dashboard or alert may read.)

Names follow the Prometheus naming guide: observer_<thing>_<unit>[_total]."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from observer.clock import Clock, SystemClock
from observer.domain import (
    AttributedProcess,
    DriverState,
    Finding,
    FindingKind,
    GpmActivity,
    GpmState,
    GpuCounters,
    GpuReading,
    GpuSample,
    NodeSnapshot,
    Outcome,
    Severity,
)

# The scheduler calls observer_scheduler_errors_total counts failures of (backends/counted.py)
SCHEDULER_OPERATIONS = (
    "snapshot",
    "jobs",
    "probe_jobs",
    "finished_jobs",
    "quota_changes",
    "cancel",
    "logs",
    "submit",
    "probe_isolation",
)
UNRELEASED_DETECTORS = frozenset({"unreleased_memory", "vanished_process", "orphan_process"})


class LoopMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.ticks_total = Counter(
            "observer_loop_ticks_total",
            "Ticks started by each periodic loop.",
            ["loop"],
            registry=registry,
        )
        self.errors_total = Counter(
            "observer_loop_errors_total",
            "Failures captured by a periodic loop: a whole tick or one item of it.",
            ["loop", "stage"],
            registry=registry,
        )
        self.last_success_timestamp_seconds = Gauge(
            "observer_loop_last_success_timestamp_seconds",
            "Wall time of the last tick that completed.",
            ["loop"],
            registry=registry,
        )


class FindingMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.open = Gauge(
            "observer_findings_open",
            "Conditions open now.",
            ["detector", "severity"],
            registry=registry,
        )
        self.total = Counter(
            "observer_findings_total",
            "Findings opened (conditions) or raised (events).",
            ["detector", "severity"],
            registry=registry,
        )
        self._seen: set[tuple[str, str]] = set()
        # Open findings, by (key, opened_at): their (detector, severity).
        self._open: dict[tuple[str, datetime], tuple[str, str]] | None = None
        # The controller's loops (fleet, detect, monitoring, alerts) record from their threads.
        self._lock = threading.Lock()

    def expect_events(self, detectors: Iterable[str]) -> None:
        """Export the event counters of these detectors at 0, at each severity an alert reads,
        so that the first event is a rise that increase() sees."""
        for detector in detectors:
            for severity in (Severity.CRITICAL, Severity.WARNING):
                self.total.labels(detector, severity.value)

    def record(
        self,
        changed: Iterable[Finding],
        open_now: Iterable[Finding] | Callable[[], Iterable[Finding]],
    ) -> None:
        """`changed`: findings that opened, closed or happened (events) since the last call.
        `open_now`: every finding open now (the agent's, at hand), or how to read them (the
        controller's store): read on the first call only, after which the open set follows
        `changed`, so that a cycle over a large fleet costs what changed, not what is open."""
        changed = list(changed)
        follows = callable(open_now)
        # The store is read (first call only) before the lock is taken: no thread waits for
        # another's database read.
        read = open_now if not callable(open_now) else (open_now() if self._open is None else None)
        fresh = None if read is None else {_identity(f): _labels(f) for f in read}
        with self._lock:
            for finding in changed:
                if finding.is_open or finding.kind is FindingKind.EVENT:
                    self.total.labels(finding.detector, finding.severity.value).inc()
            if fresh is not None and (not follows or self._open is None):
                self._open = fresh
            assert self._open is not None
            if follows:
                for finding in changed:
                    if finding.is_open:
                        self._open[_identity(finding)] = _labels(finding)
                    else:
                        self._open.pop(_identity(finding), None)
            counts: dict[tuple[str, str], int] = {}
            for labels in self._open.values():
                counts[labels] = counts.get(labels, 0) + 1
            # Series of conditions that all closed go to 0 rather than keep their last value.
            self._seen |= counts.keys()
            for detector, severity in self._seen:
                self.open.labels(detector, severity).set(counts.get((detector, severity), 0))


def _identity(finding: Finding) -> tuple[str, datetime]:
    return finding.key, finding.opened_at


def _labels(finding: Finding) -> tuple[str, str]:
    return finding.detector, finding.severity.value


class AgentMetrics:
    """The agent's own metrics; the per-GPU series come from a GpuCollector registered
    beside them over the agent's snapshot."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.loops = LoopMetrics(registry)
        self.findings = FindingMetrics(registry)
        self.gpu_read_errors_total = Counter(
            "observer_gpu_read_errors_total",
            "Failed NVML reads by GPU, call and kind of error.",
            ["gpu", "call", "error"],
            registry=registry,
        )
        self.nvml_init_errors_total = Counter(
            "observer_nvml_init_errors_total",
            "Failed attempts to initialise NVML, by resulting driver state.",
            ["state"],
            registry=registry,
        )
        self.owner_directory_up = Gauge(
            "observer_agent_owner_directory_up",
            "1 while the node's scheduler agent (source: kubelet, slurm) answers who runs here; "
            "0 while it cannot be read and every GPU process's owner state is unknown.",
            ["source"],
            registry=registry,
        )
        self.gpu_xid_events_total = Counter(
            "observer_agent_gpu_xid_events_total",
            "Xid errors reported by NVML's events or the kernel log (one Xid seen by both "
            "counts once), by GPU and Xid code.",
            ["gpu", "uuid", "code"],
            registry=registry,
        )
        self.xid_source_up = Gauge(
            "observer_agent_xid_source_up",
            "1 while an Xid source works (nvml: at least one GPU registered for Xid events; "
            "kernel_log: the last read succeeded and its lines are in a known format).",
            ["source"],
            registry=registry,
        )
        self.sample_duration_seconds = Histogram(
            "observer_agent_sample_duration_seconds",
            "Time to sample every GPU of the node, by tier (lean every tick, counters rarely).",
            ["tier"],
            buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0),
            registry=registry,
        )


class ControllerMetrics:
    """The controller's own metrics: probe runs and the scheduler's state as sampled."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.loops = LoopMetrics(registry)
        self.findings = FindingMetrics(registry)
        self.probe_runs_total = Counter(
            "observer_probe_runs_total",
            "Probe runs ended, by probe, tenant, window and outcome.",
            ["probe", "tenant", "window", "outcome"],
            registry=registry,
        )
        self.probe_runs_skipped_total = Counter(
            "observer_probe_runs_skipped_total",
            "Probe launches skipped, by probe and reason (budget, backend_error, no_other_tenant).",
            ["probe", "reason"],
            registry=registry,
        )
        self.probe_runs_active = Gauge(
            "observer_probe_runs_active",
            "Probe runs submitted and not ended.",
            ["tenant"],
            registry=registry,
        )
        self.probe_gpus_active = Gauge(
            "observer_probe_gpus_active",
            "GPUs asked by probe runs not ended.",
            ["tenant"],
            registry=registry,
        )
        self.probe_queue_wait_seconds = Histogram(
            "observer_probe_queue_wait_seconds",
            "Submission to start of probe runs, as the platform timestamps them.",
            ["probe", "tenant", "window"],
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400),
            registry=registry,
        )
        self.wait_estimate_error_seconds = Histogram(
            "observer_wait_estimate_error_seconds",
            "A waiting job's start minus its expected start (late: positive), by whose estimate"
            " (source): the platform's first for each job seen waiting, the observer's own at"
            " a probe's submission.",
            ["source"],
            buckets=(-14400, -3600, -1800, -600, -300, -60, 0, 60, 300, 600, 1800, 3600, 14400),
            registry=registry,
        )
        self.probe_run_seconds = Histogram(
            "observer_probe_run_seconds",
            "Start to end of probe runs.",
            ["probe", "tenant"],
            buckets=(1, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200),
            registry=registry,
        )
        self.inference_replicas = Gauge(
            "observer_inference_replicas",
            "The inference probe's replicas at the last look, by state (desired, ready, pending).",
            ["service", "state"],
            registry=registry,
        )
        self.inference_requests_total = Counter(
            "observer_inference_requests_total",
            "Requests sent to the inference probe's replicas, by result (ok, error).",
            ["service", "result"],
            registry=registry,
        )
        self.inference_request_seconds = Histogram(
            "observer_inference_request_seconds",
            "Sending to the last byte of the inference probe's answered requests.",
            ["service"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=registry,
        )
        self.scheduler_pending_jobs = Gauge(
            "observer_scheduler_pending_jobs",
            "Jobs pending, per tenant and queue.",
            ["tenant", "queue"],
            registry=registry,
        )
        self.scheduler_pending_gpus = Gauge(
            "observer_scheduler_pending_gpus",
            "GPUs asked by pending jobs.",
            ["tenant", "queue"],
            registry=registry,
        )
        self.scheduler_running_gpus = Gauge(
            "observer_scheduler_running_gpus",
            "GPUs held by running jobs.",
            ["tenant", "queue"],
            registry=registry,
        )
        self.scheduler_longest_wait_seconds = Gauge(
            "observer_scheduler_longest_wait_seconds",
            "Wait of the oldest pending job.",
            ["tenant", "queue"],
            registry=registry,
        )
        self.scheduler_node_gpus = Gauge(
            "observer_scheduler_node_gpus",
            "GPUs per node as the scheduler counts them, by state (total or allocated).",
            ["node", "pool", "state"],
            registry=registry,
        )
        self.scheduler_errors_total = Counter(
            "observer_scheduler_errors_total",
            "Failed calls to the scheduler, by operation.",
            ["operation"],
            registry=registry,
        )
        for operation in SCHEDULER_OPERATIONS:  # at 0 from the start: a first failure is a rise
            self.scheduler_errors_total.labels(operation)
        self.store_errors_total = Counter(
            "observer_store_errors_total",
            "Failed database calls (reads and writes) of the controller's store.",
            registry=registry,
        )
        self.store_size_bytes = Gauge(
            "observer_store_size_bytes",
            "The store's size on its volume at the last hourly measure.",
            registry=registry,
        )
        self.store_volume_free_bytes = Gauge(
            "observer_store_volume_free_bytes",
            "Free space of the SQLite store's volume at the last hourly measure.",
            registry=registry,
        )
        self.store_gpu_samples_deleted_total = Counter(
            "observer_store_gpu_samples_deleted_total",
            "Raw GPU samples deleted past storage.raw_retention_days.",
            registry=registry,
        )
        self.agent_errors_total = Counter(
            "observer_agent_read_errors_total",
            "Failed reads of a node agent's snapshot, by agent.",
            ["agent"],
            registry=registry,
        )
        self.fairness_index = Gauge(
            "observer_fairness_index",
            "Jain's index of GPUs received against entitlement in the last completed occurrence "
            "of each window (1 is perfectly fair).",
            ["window"],
            registry=registry,
        )
        self.log_reader_errors_total = Counter(
            "observer_log_reader_errors_total",
            "Failed reads of a log canary's lines back from the log pipeline.",
            ["pipeline"],
            registry=registry,
        )
        self.monitoring = MonitoringMetrics(registry)
        self.scheduler_last_snapshot_timestamp_seconds = Gauge(
            "observer_scheduler_last_snapshot_timestamp_seconds",
            "Wall time of the last scheduler snapshot that succeeded.",
            registry=registry,
        )

    def expect_probe_runs(self, planned: Iterable[tuple[str, str, str]]) -> None:
        """Export the run counters of each planned (probe, tenant, window) at 0 for every
        outcome, so that the first failure is a rise that increase() sees."""
        for probe, tenant, window in planned:
            for outcome in Outcome:
                self.probe_runs_total.labels(probe, tenant, window, outcome.value)


class MonitoringMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.lag_seconds = Gauge(
            "observer_monitoring_lag_seconds",
            "Worst lag each monitoring check measured on its last read (heartbeat: now minus "
            "the heartbeat read back; freshness: oldest watched series; scrape: oldest last "
            "scrape; gpu_busy_lag: probe start to Prometheus showing the GPU busy).",
            ["check"],
            registry=registry,
        )
        self.check_errors_total = Counter(
            "observer_monitoring_checks_errors_total",
            "Monitoring checks that could not read Prometheus.",
            ["check"],
            registry=registry,
        )


class ReportMetrics:
    """Daily summaries, verdicts and the alerts they count."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.report_deliveries_total = Counter(
            "observer_report_deliveries_total",
            "Report deliveries by channel and outcome (full, summary, attachment, failed).",
            ["channel", "outcome"],
            registry=registry,
        )
        self.reports_built_total = Counter(
            "observer_reports_built_total",
            "Reports written, by kind (daily, verdict).",
            ["kind"],
            registry=registry,
        )
        self.report_errors_total = Counter(
            "observer_report_errors_total",
            "Reports that could not be built or written, by kind.",
            ["kind"],
            registry=registry,
        )
        self.report_last_day_timestamp_seconds = Gauge(
            "observer_report_last_day_timestamp_seconds",
            "End of the last day a daily summary was written for.",
            registry=registry,
        )
        self.alert_source_errors_total = Counter(
            "observer_alert_source_errors_total",
            "Failed reads of the alert source (Alertmanager).",
            registry=registry,
        )
        self.alerts_firing = Gauge(
            "observer_alerts_firing",
            "Alerts firing at the last read of the alert source, ignored names left out.",
            registry=registry,
        )


HEARTBEAT_METRIC = "observer_heartbeat_timestamp_seconds"
_DOC = "Wall time of the observer when this scrape was served; read back to measure lag."


class Heartbeat(Collector):
    def __init__(self, registry: CollectorRegistry, clock: Clock) -> None:
        self._clock = clock
        registry.register(self)

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(HEARTBEAT_METRIC, _DOC)

    def collect(self) -> Iterator[Metric]:
        # Read at collection time, so the value is the scrape's own time.
        yield GaugeMetricFamily(HEARTBEAT_METRIC, _DOC, value=self._clock.now().timestamp())


_GPU = ["gpu", "uuid"]
_Series = tuple[tuple[str, ...], float]  # the label values after gpu and uuid, and the value
_Read = Callable[[GpuReading, NodeSnapshot], Iterable[_Series]]


@dataclass(frozen=True, slots=True)
class _GpuFamily:
    """A metric family with series per GPU, labelled gpu, uuid and `labels`."""

    name: str
    doc: str
    read: _Read
    labels: tuple[str, ...] = ()
    counter: bool = False

    def empty(self) -> GaugeMetricFamily | CounterMetricFamily:
        kind = CounterMetricFamily if self.counter else GaugeMetricFamily
        return kind(self.name, self.doc, labels=[*_GPU, *self.labels])


def _one(value: float | None, scale: float = 1.0) -> list[_Series]:
    return [] if value is None else [((), value * scale)]


def _sampled(read: Callable[[GpuSample], float | None], scale: float = 1.0) -> _Read:
    """The series of a sampled (cheap tier) value, scaled to the metric's unit."""
    return lambda gpu, _: _one(None if gpu.sample is None else read(gpu.sample), scale)


def _counted(read: Callable[[GpuCounters], float | None], scale: float = 1.0) -> _Read:
    """The series of a counters (expensive tier) value, scaled to the metric's unit."""
    return lambda gpu, _: _one(None if gpu.counters is None else read(gpu.counters), scale)


def _counted_by(*reads: tuple[str, Callable[[GpuCounters], int | None]]) -> _Read:
    """A series per label value of the counters read, in the order given."""

    def series(gpu: GpuReading, _: NodeSnapshot) -> list[_Series]:
        c = gpu.counters
        values = [] if c is None else [(label, read(c)) for label, read in reads]
        return [((label,), value) for label, value in values if value is not None]

    return series


def _active(read: Callable[[GpmActivity], float]) -> _Read:
    """The series of a GPM ratio: none while the GPU has no activity to report."""
    return lambda gpu, _: _one(
        read(gpu.activity) if isinstance(gpu.activity, GpmActivity) else None
    )


def _gpm_supported(gpu: GpuReading, _: NodeSnapshot) -> list[_Series]:
    if gpu.activity is None:  # not known this tick
        return []
    return _one(0.0 if gpu.activity is GpmState.NOT_SUPPORTED else 1.0)


def _unreleased(gpu: GpuReading, snap: NodeSnapshot) -> list[_Series]:
    """The memory held by the processes of the GPU's open leak findings."""
    if gpu.identity is None:
        return []
    held = (
        float(finding.evidence.get("used_memory_bytes") or 0)
        for finding in snap.findings
        if finding.detector in UNRELEASED_DETECTORS
        and finding.subject.get("gpu_uuid", "") == gpu.identity.uuid
    )
    return [((), sum(held, 0.0))]


def _energy_joules(gpu: GpuReading, _: NodeSnapshot) -> list[_Series]:
    millijoules = None if gpu.counters is None else gpu.counters.energy_millijoules
    return [] if millijoules is None else [((), millijoules / 1000.0)]


def _info(gpu: GpuReading, snap: NodeSnapshot) -> list[_Series]:
    ident = gpu.identity
    return [] if ident is None else [((ident.name, snap.node, ident.pci_bus_id or ""), 1.0)]


# In the order of the exposition; the table is aligned by hand, a family to a row.
_PER_GPU = (
    _GpuFamily("observer_gpu_up", "1 while the GPU answers, 0 while it is lost.",
               lambda gpu, _: _one(0.0 if gpu.lost else 1.0)),
    _GpuFamily("observer_gpu_utilization_ratio", "GPU busy fraction over NVML's sample period.",
               _sampled(lambda s: s.utilization_gpu_percent, 0.01)),
    _GpuFamily("observer_gpu_memory_utilization_ratio", "Memory controller busy fraction.",
               _sampled(lambda s: s.utilization_memory_percent, 0.01)),
    _GpuFamily("observer_gpu_sm_active_ratio",
               "Mean share of SMs busy since the previous tick (GPM; none where not supported).",
               _active(lambda a: a.sm_active_ratio)),
    _GpuFamily("observer_gpu_sm_occupancy_ratio",
               "Resident warps over the SMs' maximum since the previous tick (GPM).",
               _active(lambda a: a.sm_occupancy_ratio)),
    _GpuFamily("observer_gpu_tensor_active_ratio",
               "Share of cycles a tensor pipe was busy since the previous tick (GPM).",
               _active(lambda a: a.tensor_active_ratio)),
    _GpuFamily("observer_gpu_dram_active_ratio",
               "DRAM bandwidth used over its peak since the previous tick (GPM).",
               _active(lambda a: a.dram_active_ratio)),
    _GpuFamily("observer_gpu_gpm_supported",
               "1 where the GPU reports GPM activity, 0 where it cannot (before Hopper).",
               _gpm_supported),
    _GpuFamily("observer_gpu_memory_used_bytes", "GPU memory in use, driver reservation included.",
               _sampled(lambda s: s.memory_used_bytes)),
    _GpuFamily("observer_gpu_memory_total_bytes", "GPU memory size.",
               _sampled(lambda s: s.memory_total_bytes)),
    _GpuFamily("observer_gpu_memory_baseline_bytes",
               "Driver baseline: least memory seen with no process.",
               lambda gpu, _: _one(gpu.baseline_memory_bytes)),
    _GpuFamily("observer_gpu_power_watts", "Power draw.",
               _sampled(lambda s: s.power_milliwatts, 0.001)),
    _GpuFamily("observer_gpu_temperature_celsius", "GPU core temperature.",
               _sampled(lambda s: s.temperature_celsius)),
    _GpuFamily("observer_gpu_sm_clock_hertz", "Current SM clock.",
               _sampled(lambda s: s.sm_clock_mhz, 1e6)),
    _GpuFamily("observer_gpu_clock_event_reasons",
               "Bitmask of NVML clock event (throttle) reasons.",
               _sampled(lambda s: s.clock_event_reasons)),
    _GpuFamily("observer_gpu_performance_state", "Performance state: 0 (P0, fastest) to 15.",
               _sampled(lambda s: s.performance_state)),
    _GpuFamily("observer_gpu_ecc_volatile_uncorrected_errors",
               "Uncorrected ECC errors since driver load.",
               _sampled(lambda s: s.ecc_volatile_uncorrected_errors)),
    _GpuFamily("observer_gpu_pcie_tx_bytes_per_second",
               "PCIe transmit throughput (expensive tier).",
               _counted(lambda c: c.pcie_tx_kilobytes_per_second, 1024)),
    _GpuFamily("observer_gpu_pcie_rx_bytes_per_second", "PCIe receive throughput (expensive tier).",
               _counted(lambda c: c.pcie_rx_kilobytes_per_second, 1024)),
    _GpuFamily("observer_gpu_remapped_rows", "Remapped memory rows, by cause.",
               _counted_by(("correctable", lambda c: c.remapped_rows_correctable),
                           ("uncorrectable", lambda c: c.remapped_rows_uncorrectable)),
               ("cause",)),
    _GpuFamily("observer_gpu_retired_pages", "Retired memory pages, by cause.",
               _counted_by(("single_bit", lambda c: c.retired_pages_single_bit),
                           ("double_bit", lambda c: c.retired_pages_double_bit)),
               ("cause",)),
    _GpuFamily("observer_gpu_ecc_aggregate_uncorrected_errors",
               "Uncorrected ECC errors over the device's lifetime (expensive tier).",
               _counted(lambda c: c.ecc_aggregate_uncorrected_errors)),
    _GpuFamily("observer_gpu_remapped_rows_pending", "1 while a row remap waits for a GPU reset.",
               _counted(lambda c: c.remapped_rows_pending)),
    _GpuFamily("observer_gpu_remapped_rows_failed",
               "1 once a row remap has failed (the GPU needs service).",
               _counted(lambda c: c.remapped_rows_failed)),
    _GpuFamily("observer_gpu_retired_pages_pending",
               "1 while a page retirement waits for a GPU reset.",
               _counted(lambda c: c.retired_pages_pending)),
    _GpuFamily("observer_gpu_unreleased_memory_bytes",
               "Memory held by processes of open leak findings.", _unreleased),
    _GpuFamily("observer_gpu_energy_joules", "Energy consumed since driver load.",
               _energy_joules, counter=True),
    _GpuFamily("observer_gpu_pcie_replay_errors", "PCIe replay events since driver load.",
               _counted(lambda c: c.pcie_replay_errors), counter=True),
    _GpuFamily("observer_gpu_nvlink_errors",
               "NVLink errors summed over the active links (since driver load or a counter "
               "reset), by counter (replay, recovery, crc).",
               _counted_by(("replay", lambda c: c.nvlink_replay_errors),
                           ("recovery", lambda c: c.nvlink_recovery_errors),
                           ("crc", lambda c: c.nvlink_crc_errors)),
               ("counter",), counter=True),
    _GpuFamily("observer_gpu_info", "Identity of each GPU (value 1).",
               _info, ("name", "node", "pci_bus_id")),
)  # fmt: skip
_OWNER_INFO = ("observer_gpu_owner_info", "Owner of work on each GPU (value 1); join on uuid.")
_PROCESS_MEMORY = (
    "observer_gpu_process_memory_used_bytes",
    "GPU memory of each process, with its owner.",
)
_NVML_UP = ("observer_nvml_up", "1 while NVML answers, 0 while the node is blind to its GPUs.")


class GpuCollector(Collector):
    """Renders the agent's latest NodeSnapshot at scrape time, so sampling never pays for
    metric updates and series of vanished processes disappear with them."""

    def __init__(self, snapshot: Callable[[], NodeSnapshot | None]) -> None:
        self._snapshot = snapshot

    def describe(self) -> Iterator[Metric]:
        yield from (family.empty() for family in _PER_GPU)
        for name, doc in (_OWNER_INFO, _PROCESS_MEMORY, _NVML_UP):
            yield GaugeMetricFamily(name, doc)

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        if snap is None:
            return
        for family in _PER_GPU:
            metric = family.empty()
            for gpu in snap.gpus:
                labels = [str(gpu.index), gpu.identity.uuid if gpu.identity else ""]
                for more, value in family.read(gpu, snap):
                    metric.add_metric([*labels, *more], value)
            yield metric
        yield from _process_families(snap.processes)
        nvml_up = GaugeMetricFamily(*_NVML_UP)
        nvml_up.add_metric([], 1.0 if snap.driver.state is DriverState.OK else 0.0)
        yield nvml_up


def _process_families(
    processes: Iterable[AttributedProcess],
) -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    """Each GPU's owners, once each, and each process's memory with its owner."""
    owners = GaugeMetricFamily(*_OWNER_INFO, labels=[*_GPU, "owner_kind", "owner"])
    procs = GaugeMetricFamily(*_PROCESS_MEMORY, labels=[*_GPU, "pid", "owner_kind", "owner"])
    seen: set[tuple[str, str, str]] = set()
    for proc in processes:
        labels = [str(proc.gpu_index), proc.gpu_uuid]
        owner = [proc.owner.kind.value, proc.owner.id]
        if proc.used_memory_bytes is not None:
            procs.add_metric([*labels, str(proc.pid), *owner], proc.used_memory_bytes)
        if (proc.gpu_uuid, *owner) not in seen:
            seen.add((proc.gpu_uuid, owner[0], owner[1]))
            owners.add_metric([*labels, *owner], 1.0)
    return owners, procs


def metric_names(registry: CollectorRegistry) -> list[str]:
    """Every metric family a registry can export (for `observer metrics list`)."""
    names: set[str] = set()
    for collector in list(registry._collector_to_names):
        describe = getattr(collector, "describe", None)
        for family in describe() if describe else collector.collect():
            names.add(family.name + ("_total" if family.type == "counter" else ""))
    return sorted(names)


def all_metric_names() -> list[str]:
    """Every metric any observer process can export."""
    agent = CollectorRegistry()
    AgentMetrics(agent)
    agent.register(GpuCollector(lambda: None))
    controller = CollectorRegistry()
    ControllerMetrics(controller)
    ReportMetrics(controller)
    Heartbeat(controller, SystemClock())
    return sorted(set(metric_names(agent)) | set(metric_names(controller)))
