"""The one composition of the controller: every part built from the settings and the
sources it reads, and every task declared once (name, cadence, what it runs, which source it
needs). The daemon's threads (main.py), the stepped simulation (observer.simulation), the
demo, the benchmarks and the tests all run these tasks, so that none of them can leave out a
production loop without saying so."""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from types import MappingProxyType

from observer.alerting.base import AlertSource
from observer.backends.base import SchedulerBackend, ServiceBackend, ServiceSpec
from observer.backends.counted import CountedBackend
from observer.backends.kubernetes import preconditions as kubernetes_preconditions
from observer.backends.simulated import NodeSpec, Policy, SimulatedCluster, TenantSpec
from observer.backends.slurm import preconditions as slurm_preconditions
from observer.clock import Clock
from observer.controller.alerts import AlertPoller
from observer.controller.detect import Detection
from observer.controller.estimates import ExpectedStarts
from observer.controller.inference import InferenceWatch
from observer.controller.lag import LagWatch
from observer.controller.observe import FleetObserver
from observer.controller.runs import Budget, ProbeRunner, Tenant
from observer.controller.upkeep import UPKEEP_INTERVAL_SECONDS, StoreUpkeep
from observer.controller.views import Published
from observer.controller.watches import (
    allocations,
    canaries,
    in_service,
    outages,
    reclaims,
    releases,
    unfairness,
    unusable_gpus,
    waits,
)
from observer.controller.work import Controller, PlanEntry
from observer.detectors import gpu_unusable, log_loss
from observer.domain import STALE_AFTER_INTERVALS, NodeSnapshot, SchedulerSnapshot
from observer.errors import ConfigError
from observer.fleet.base import Fleet
from observer.log_readers.base import LogReader
from observer.log_readers.elasticsearch import ElasticsearchReader
from observer.log_readers.files import FileLogReader
from observer.log_readers.loki import LokiReader
from observer.log_readers.pod_logs import PodLogReader
from observer.metrics import HEARTBEAT_METRIC, ControllerMetrics, ReportMetrics
from observer.monitoring.base import PrometheusApi, selector
from observer.monitoring.checker import MonitoringChecker
from observer.records import WATCHABLE
from observer.reports.apart import build_apart
from observer.reports.deliver import deliver_written
from observer.reports.inputs import calendar_of
from observer.reports.publish import due_days, next_build_at
from observer.settings import Settings
from observer.settings.controller import ControllerSettings
from observer.settings.log_readers import AuthSettings, LogsSettings, SecretRef
from observer.storage.store import Store

# Due daily summaries are looked for at start, at reports.daily_build_time in the platform's
# timezone (when a day falls due) and this often besides: a day missed while the controller
# was down, or whose build failed, is built at the next look. Each day is built once.
REPORT_BUILD_INTERVAL_SECONDS = 600.0
# The longest wait for the report build's next summary (a day of 1,000 nodes at a week into the
# soak: ~15 s): a build process past it is hung, and is ended.
REPORT_BUILD_TIMEOUT_SECONDS = 1800.0

# Why a check is off, in the one wording the composition and `observer check-config` share.
NO_PROMETHEUS = "controller.prometheus_url is not set"
NO_ALERTMANAGER = "reports.alertmanager_url is not set"
NO_AGENTS = "no agents configured (controller.agent_urls, controller.agent_dns_name)"
SERVICE_BACKENDS = frozenset({"kubernetes", "slurm"})  # the backends that are a ServiceBackend
AGENT_SERIES = "observer_gpu_up"


@dataclass(frozen=True, slots=True)
class Task:
    """One of the controller's periodic tasks. A `planned` task is a plan entry: the daemon
    runs it on APScheduler, and it first fires one interval after the start. A task with
    `also_at` also runs at the next wall time (UTC) it gives after a moment: the reports, at
    the daily build time, whatever their cadence."""

    name: str
    interval_seconds: float
    tick: Callable[[], object]
    planned: bool = False
    also_at: Callable[[datetime], datetime] | None = None


@dataclass(frozen=True, slots=True)
class Sources:
    """What the controller reads besides the scheduler and its store. Prometheus and
    Alertmanager are optional: without them their task is left out, and said so."""

    fleet: Fleet
    prometheus: PrometheusApi | None = None
    alerts: AlertSource | None = None


@dataclass(frozen=True, slots=True)
class Composition:
    controller: Controller
    fleet: FleetObserver
    lag: LagWatch | None
    alerts: AlertPoller | None
    inference: InferenceWatch | None  # the inference probe's service, removed at stop
    tasks: tuple[Task, ...]  # in the order a step of the simulation runs them
    left_out: Mapping[str, str]  # task name -> why it does not run


def watching(settings: Settings, sources: Sources) -> tuple[str, ...]:
    """The optional sources (records.WATCHABLE) this controller is set up to read."""
    cfg = settings.controller
    set_up = {
        # The demo's agents run in process, with no URL in the settings.
        "agents": cfg.agents_configured or bool(sources.fleet.agents()),
        "prometheus": sources.prometheus is not None,
        "logs": cfg.logs.reader != "none",
        "alerts": sources.alerts is not None,
    }
    return tuple(s for s in WATCHABLE if set_up[s])


def backend_preconditions(cfg: ControllerSettings) -> list[str]:
    """What the selected backend needs of this machine and is missing, one line each: checked
    by `observer check-config` and before the controller starts."""
    if cfg.backend == "kubernetes":
        return kubernetes_preconditions.preconditions(cfg.kubernetes)
    if cfg.backend == "slurm":
        return slurm_preconditions.preconditions(cfg.slurm)
    return []


def checks_off(settings: Settings) -> dict[str, str]:
    """The checks these settings leave off, each with why."""
    off = {}
    if settings.controller.prometheus_url is None:
        off["monitoring"] = NO_PROMETHEUS
    if settings.reports.alertmanager_url is None:
        off["alerts"] = NO_ALERTMANAGER
    if (
        settings.controller.inference.enabled
        and settings.controller.backend not in SERVICE_BACKENDS
    ):
        off["inference"] = _no_services(settings.controller)
    derived = settings.detectors.monitoring_lag.freshness_series is None
    if derived and not settings.controller.agents_configured:
        off["freshness of agent series"] = NO_AGENTS
    return off


def budget_warnings(cfg: ControllerSettings) -> list[str]:
    """A line for each planned probe whose launch for one tenant (its copies at once) asks
    more GPUs than a probe budget holds: the runner skips some of it at every launch. Valid
    settings still; the smaller budget is named."""
    catalog = cfg.probe_catalog()
    budgets = sorted(
        [
            (cfg.max_probe_gpus_per_tenant, "max_probe_gpus_per_tenant"),
            (cfg.max_probe_gpus, "max_probe_gpus"),
        ]
    )
    warnings = []
    for name in dict.fromkeys(entry.probe for entry in cfg.plan):
        spec = catalog[name]
        gpus = spec.workload.gpus  # what the runner counts against the budgets, per copy
        over = [(limit, setting) for limit, setting in budgets if spec.copies * gpus > limit]
        if over:
            limit, setting = over[0]
            warnings.append(
                f"warning: probe {name}: {spec.copies} x {gpus} GPUs can never fit "
                f"{setting} {limit}"
            )
    return warnings


def freshness_series(settings: Settings) -> tuple[str, ...]:
    """What the freshness check watches: as set, else the controller's own heartbeat and,
    only when agents are configured, the series they export (no agent, no such series)."""
    cfg = settings.controller
    watched = settings.detectors.monitoring_lag.freshness_series
    if watched is not None:
        return watched
    heartbeat = selector(HEARTBEAT_METRIC, cfg.heartbeat_labels)
    return (heartbeat, AGENT_SERIES) if cfg.agents_configured else (heartbeat,)


def build_backend(cfg: ControllerSettings, clock: Clock) -> SchedulerBackend:
    """The selected backend; ConfigError when this machine lacks what it needs."""
    problems = backend_preconditions(cfg)
    if problems:
        raise ConfigError(problems)
    if cfg.backend == "simulated":
        sim = cfg.simulation
        cluster = SimulatedCluster(
            [
                NodeSpec(name, sim.gpus_per_node, sim.pool_of(i))
                for i, name in enumerate(sim.node_names())
            ],
            [TenantSpec(t.name, t.weight, t.quota_gpus) for t in cfg.tenants],
            clock,
            Policy(sim.policy),
        )
        cluster.faults.favoured_tenant = sim.favoured_tenant
        cluster.faults.isolation_broken = sim.isolation_broken
        cluster.faults.submit_hang_seconds = sim.submit_hang_seconds
        return cluster
    if cfg.backend == "kubernetes":
        from observer.backends.kubernetes.backend import KubernetesBackend  # noqa: PLC0415

        k8s = cfg.kubernetes
        if not k8s.namespaces:  # one namespace per tenant, named after it
            k8s = k8s.model_copy(update={"namespaces": tuple(t.name for t in cfg.tenants)})
        return KubernetesBackend(k8s, clock)
    from observer.backends.slurm.backend import SlurmBackend  # noqa: PLC0415

    return SlurmBackend(cfg.slurm, clock, fresh_listing_seconds=cfg.follow_interval_seconds)


def log_reader_preconditions(cfg: ControllerSettings) -> list[str]:
    """The selected log reader's credentials that cannot be read, one line each naming the
    setting: checked by `observer check-config` and when the controller builds the reader."""
    return _log_headers(cfg.logs)[1]


def build_log_reader(
    logs: LogsSettings, backend: SchedulerBackend, store: Store
) -> LogReader | None:
    """The reader `controller.logs.reader` selects (None: canaries are not read back);
    ConfigError when its credentials cannot be read."""
    headers, problems = _log_headers(logs)
    if problems:
        raise ConfigError(problems)
    if logs.reader == "pod_logs":
        return PodLogReader(backend.logs, partial(_job_of, store))
    # the settings refused a selected reader without its required fields
    if logs.reader == "loki":
        loki = logs.loki
        assert loki.url is not None and loki.selector is not None
        return LokiReader(
            loki.url,
            loki.selector,
            page_limit=loki.page_limit,
            timeout_seconds=loki.timeout_seconds,
            headers=headers,
        )
    if logs.reader == "elasticsearch":
        es = logs.elasticsearch
        assert es.url is not None and es.index is not None
        return ElasticsearchReader(
            es.url,
            es.index,
            message_field=es.message_field,
            timestamp_field=es.timestamp_field,
            delivered_field=es.delivered_field,
            page_size=es.page_size,
            timeout_seconds=es.timeout_seconds,
            headers=headers,
        )
    if logs.reader == "files":
        assert logs.files.pattern is not None
        return FileLogReader(
            logs.files.pattern,
            leading_timestamp=logs.files.delivery_time == "leading_timestamp",
        )
    return None


def log_pipeline_name(logs: LogsSettings) -> str:
    """The pipeline as findings, reports and metrics name it: the reader and where it reads."""
    if logs.reader == "loki":
        return f"loki:{logs.loki.url}"
    if logs.reader == "elasticsearch":
        return f"elasticsearch:{logs.elasticsearch.url}/{logs.elasticsearch.index}"
    if logs.reader == "files":
        return f"files:{logs.files.pattern}"
    return logs.reader


def _log_headers(logs: LogsSettings) -> tuple[dict[str, str], list[str]]:
    """The HTTP headers of the selected reader (tenant, credentials), and a line for each
    credential that cannot be read."""
    headers: dict[str, str] = {}
    if logs.reader == "loki":
        auth = logs.loki.auth
        if logs.loki.tenant is not None:
            headers["X-Scope-OrgID"] = logs.loki.tenant
    elif logs.reader == "elasticsearch":
        auth = logs.elasticsearch.auth
    else:
        return headers, []
    where = f"controller.logs.{logs.reader}.auth"
    problems: list[str] = []
    secrets = _secrets(auth, where, problems)
    if "password" in secrets:
        pair = f"{auth.username}:{secrets['password']}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    if "bearer_token" in secrets:
        headers["Authorization"] = f"Bearer {secrets['bearer_token']}"
    return headers, problems


def _secrets(auth: AuthSettings, where: str, problems: list[str]) -> dict[str, str]:
    """Each secret `auth` refers to, read; what cannot be read is added to `problems`."""
    refs: dict[str, SecretRef | None] = {
        "password": auth.password,
        "bearer_token": auth.bearer_token,
    }
    read = {}
    for name, ref in refs.items():
        if ref is None:
            continue
        if ref.env is not None:
            value = os.environ.get(ref.env, "")
            missing = f"{where}.{name}.env: {ref.env} is not set"
        else:
            assert ref.file is not None
            try:
                value = ref.file.read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as exc:
                problems.append(f"{where}.{name}.file: {ref.file} cannot be read ({exc.strerror})")
                continue
            except UnicodeDecodeError:
                problems.append(f"{where}.{name}.file: {ref.file} is not UTF-8 text")
                continue
            missing = f"{where}.{name}.file: {ref.file} is empty"
        if value:
            read[name] = value
        else:
            problems.append(missing)
    return read


def build_controller(
    settings: Settings,
    backend: SchedulerBackend,
    store: Store,
    clock: Clock,
    metrics: ControllerMetrics,
) -> Controller:
    cfg = settings.controller
    backend = CountedBackend(backend, metrics.scheduler_errors_total, clock)
    tenants = {t.name: Tenant(t.name, t.queue, t.priority, t.quota_gpus) for t in cfg.tenants}
    catalog = cfg.probe_catalog()
    expected = ExpectedStarts()
    runner = ProbeRunner(
        backend,
        store,
        clock,
        metrics,
        tenants,
        Budget(cfg.max_probe_gpus, cfg.max_probe_gpus_per_tenant),
        expected.expected_wait_seconds,
    )
    calendar = calendar_of(settings)
    plan = [
        PlanEntry(e.window, e.probe, e.every_seconds, tuple(e.tenants) or tuple(tenants))
        for e in cfg.plan
    ]
    metrics.expect_probe_runs((e.probe, t, e.window) for e in plan for t in e.tenants)
    metrics.findings.expect_events((*log_loss.EVENT_DETECTORS, gpu_unusable.DETECTOR))
    nodes: Published[Mapping[str, NodeSnapshot]] = Published(MappingProxyType({}))
    scheduler: Published[SchedulerSnapshot | None] = Published(None)
    room: Published[outages.SpaceLow | None] = Published(None)
    reader = build_log_reader(cfg.logs, backend, store)
    rules = settings.detectors
    quotas = {t.name: t.quota_gpus for t in cfg.tenants if t.quota_gpus is not None}
    weights = {t.name: t.weight for t in cfg.tenants}
    detection = Detection(
        store=store,
        clock=clock,
        metrics=metrics,
        scheduler_max_age_seconds=STALE_AFTER_INTERVALS * cfg.snapshot_interval_seconds,
        nodes=nodes,
        scheduler=scheduler,
        # Every controller-side rule, in the order the detect loop checks them and stores what
        # they found: a new rule is one more watch here.
        watches=[
            # First, so that a log read that raises leaves the others as they were; what it
            # found is stored after theirs (Checked.late).
            canaries.LogCanaries(
                store,
                metrics,
                catalog,
                reader,
                log_pipeline_name(cfg.logs),
                cfg.logs.settle_seconds,
                rules.log,
            ),
            unusable_gpus.UnusableGpus(),
            outages.Unreachable(outages.store(store)),
            outages.Unreachable(outages.accounting(backend, cfg.backend)),
            outages.Unreachable(outages.partly_visible(backend, cfg.backend)),
            outages.Unreachable(outages.room(store, room.get)),
            waits.UnexplainedWaits(rules.fairness, quotas),
            reclaims.QuotaReclaims(store, quotas, cfg.quota_reclaim_seconds),
            allocations.Allocations(rules),
            in_service.GpusInService(rules.gpu_in_service),
            releases.ProbeReleases(store, rules),
            unfairness.PersistentUnfairness(
                store, metrics, calendar, rules.fairness, weights, quotas
            ),
        ],
    )
    return Controller(
        backend,
        store,
        runner,
        calendar,
        plan,
        catalog,
        clock,
        metrics,
        detection,
        nodes,
        scheduler,
        room,
        expected,
    )


def compose(
    settings: Settings,
    backend: SchedulerBackend,
    store: Store,
    sources: Sources,
    clock: Clock,
    metrics: ControllerMetrics,
    reports: ReportMetrics,
    stop: threading.Event,
) -> Composition:
    """The controller and its tasks, started (what a previous controller left is adopted)."""
    cfg = settings.controller
    controller = build_controller(settings, backend, store, clock, metrics)
    controller.start(watching(settings, sources))
    fleet = FleetObserver(
        sources.fleet,
        store,
        clock,
        metrics,
        cfg.agent_unreachable_grace_seconds,
        controller.nodes,
        controller.scheduler.get,
        cfg.gpu_sample_interval_seconds,
        controller.runner.active,
        settings.reports.task_types,
    )
    lag = None
    if sources.prometheus is not None:
        rules = settings.detectors.monitoring_lag.model_copy(
            update={"freshness_series": freshness_series(settings)}
        )
        checker = MonitoringChecker(
            sources.prometheus, clock, rules, metrics.monitoring, cfg.heartbeat_labels
        )
        lag = LagWatch(
            checker,
            store,
            metrics,
            clock,
            rules,
            controller.nodes.get,
            controller.runner.active,
            controller.catalog,
            controller.scheduler.get,
        )
        lag.resume()
    alerts = None
    if sources.alerts is not None:
        alerts = AlertPoller(
            sources.alerts, store, clock, reports, metrics.findings, settings.reports.ignored_alerts
        )

    def build_and_deliver() -> None:
        now = clock.now()
        days = due_days(store, settings, now)
        written = []
        try:
            for summary in build_apart(
                store, settings, days, now, stop, REPORT_BUILD_TIMEOUT_SECONDS
            ):
                reports.reports_built_total.labels("daily").inc()
                reports.report_last_day_timestamp_seconds.set(summary.ends_at.timestamp())
                written.append(summary)
        except Exception:
            reports.report_errors_total.labels("daily").inc()
            raise
        for summary in written:
            deliver_written(summary.paths, settings, clock, stop, store, reports)

    tasks = [
        *(
            Task(f"plan-{e.probe}", e.every_seconds, partial(controller.request_launch, e), True)
            for e in controller.plan
        ),
        Task("alive", cfg.alive_interval_seconds, controller.alive),
        Task("follow", cfg.follow_interval_seconds, controller.follow),
        Task("detect", cfg.follow_interval_seconds, controller.detect),
        Task("scheduler", cfg.snapshot_interval_seconds, controller.sample_scheduler),
        Task("fleet", cfg.observe_interval_seconds, fleet.observe),
    ]
    left_out: dict[str, str] = {}
    if lag is not None:
        tasks.append(Task("monitoring", cfg.monitoring_interval_seconds, lag.check))
    else:
        left_out["monitoring"] = NO_PROMETHEUS
    tasks += [
        Task("jobs", cfg.job_listing_interval_seconds, controller.tally_jobs),
        Task(
            "reports",
            REPORT_BUILD_INTERVAL_SECONDS,
            build_and_deliver,
            also_at=partial(next_build_at, settings),
        ),
        Task(
            "store",
            UPKEEP_INTERVAL_SECONDS,
            StoreUpkeep(store, settings, clock, stop, metrics, controller.room).tick,
        ),
    ]
    if alerts is not None:
        tasks.append(Task("alerts", settings.reports.alert_poll_interval_seconds, alerts.poll))
    else:
        left_out["alerts"] = NO_ALERTMANAGER
    watch = None
    if cfg.inference.enabled:
        if isinstance(backend, ServiceBackend):
            watch = InferenceWatch(
                backend,
                inference_spec(cfg),
                cfg.inference,
                store,
                clock,
                controller.calendar,
                metrics,
            )
            watch.resume()
            tasks.append(Task("inference", cfg.inference.interval_seconds, watch.tick))
        else:
            left_out["inference"] = _no_services(cfg)
    return Composition(
        controller, fleet, lag, alerts, watch, tuple(tasks), MappingProxyType(left_out)
    )


def inference_spec(cfg: ControllerSettings) -> ServiceSpec:
    """The inference probe's service, in its tenant (default: the first) and that tenant's
    queue."""
    rules = cfg.inference
    tenant = rules.tenant or cfg.tenants[0].name
    return ServiceSpec(
        name=rules.name,
        tenant=tenant,
        gpus_per_replica=rules.gpus_per_replica,
        port=rules.port,
        latency_ms=rules.latency_ms,
        warmup_seconds=rules.warmup_seconds,
        ready_period_seconds=rules.ready_period_seconds,
        queue=next((t.queue for t in cfg.tenants if t.name == tenant), None),
    )


def _no_services(cfg: ControllerSettings) -> str:
    return f"controller.backend {cfg.backend} cannot run the inference probe's service yet"


def _job_of(store: Store, run_id: str) -> str | None:
    run = store.run(run_id)
    return run.job_id if run else None
