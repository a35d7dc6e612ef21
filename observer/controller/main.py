"""Composition of the controller: backend and store from settings, the loops, the plan on
APScheduler, the HTTP surface, and an orderly stop that leaves no probe behind."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from prometheus_client import CollectorRegistry

from observer import codec
from observer.backends.base import SchedulerBackend
from observer.backends.simulated import NodeSpec, Policy, SimulatedCluster, TenantSpec
from observer.clock import Clock, SystemClock
from observer.controller.detect import Detection
from observer.controller.lag import LagWatch
from observer.controller.observe import FleetObserver
from observer.controller.runs import Budget, ProbeRunner, Tenant
from observer.controller.schedule import start_plan
from observer.controller.service import Controller, PlanEntry
from observer.errors import ConfigError
from observer.fleet.base import Fleet
from observer.fleet.http import HttpFleet
from observer.http import serving
from observer.logs import get_logger
from observer.logs_pipeline.pod_logs import PodLogReader
from observer.loops import PeriodicLoop
from observer.metrics import ControllerMetrics, FindingMetrics, Heartbeat, ReportMetrics
from observer.monitoring.checker import MonitoringChecker
from observer.monitoring.prometheus import PrometheusApi, PrometheusHttp
from observer.probes.catalog import builtin_catalog, quota_probe, with_overrides
from observer.probes.windows import Calendar, Window, parse_days
from observer.reports.alerts import AlertmanagerHttp, AlertPoller
from observer.reports.deliver import deliver_written
from observer.reports.publish import SUFFIXES, build_due
from observer.settings import ControllerSettings, Settings
from observer.storage.database import store_url, upgrade
from observer.storage.store import Store

_log = get_logger("observer.controller")
# Due daily summaries are looked for this often; each day is built once, when it is over and
# reports.daily_build_time has passed in the platform's timezone.
REPORT_BUILD_INTERVAL_SECONDS = 600.0


def _job_of(store: Store, run_id: str) -> str | None:
    run = store.run(run_id)
    return run.job_id if run else None


def build_backend(cfg: ControllerSettings, clock: Clock) -> SchedulerBackend:
    if cfg.backend == "simulated":
        sim = cfg.simulation
        cluster = SimulatedCluster(
            [
                NodeSpec(f"node-{i:03d}", sim.gpus_per_node, sim.pools[i % len(sim.pools)])
                for i in range(sim.nodes)
            ],
            [TenantSpec(t.name, t.weight, t.quota_gpus) for t in cfg.tenants],
            clock,
            Policy(sim.policy),
        )
        cluster.faults.favoured_tenant = sim.favoured_tenant
        cluster.faults.isolation_broken = sim.isolation_broken
        return cluster
    if cfg.backend == "kubernetes":
        from observer.backends.kubernetes import KubernetesBackend  # noqa: PLC0415 - heavy

        k8s = cfg.kubernetes
        if not k8s.namespaces:  # one namespace per tenant, named after it
            k8s = k8s.model_copy(update={"namespaces": tuple(t.name for t in cfg.tenants)})
        return KubernetesBackend(k8s, clock)
    from observer.backends.slurm import SlurmBackend  # noqa: PLC0415

    return SlurmBackend(cfg.slurm, clock)


def build_controller(
    settings: Settings,
    backend: SchedulerBackend,
    store: Store,
    clock: Clock,
    metrics: ControllerMetrics,
) -> Controller:
    cfg = settings.controller
    tenants = {t.name: Tenant(t.name, t.queue, t.priority) for t in cfg.tenants}
    catalog = builtin_catalog(cfg.gpus_per_node)
    quotas = [t.quota_gpus for t in cfg.tenants if t.quota_gpus is not None]
    if quotas:
        catalog["quota"] = quota_probe(min(quotas), cfg.gpus_per_node)
    try:
        catalog = with_overrides(
            catalog,
            {name: o.model_dump(exclude_none=True) for name, o in cfg.probes.items()},
        )
    except KeyError as exc:
        raise ConfigError([f"controller.probes: no probe named {exc.args[0]}"]) from None
    runner = ProbeRunner(
        backend,
        store,
        clock,
        metrics,
        tenants,
        Budget(cfg.max_probe_gpus, cfg.max_probe_gpus_per_tenant),
    )
    calendar = Calendar(
        ZoneInfo(cfg.timezone),
        [Window(w.name, parse_days(w.days), w.start, w.end) for w in cfg.windows],
    )
    plan = [
        PlanEntry(e.window, e.probe, e.every_seconds, tuple(e.tenants) or tuple(tenants))
        for e in cfg.plan
    ]
    unknown = sorted({e.probe for e in plan} - catalog.keys())
    if unknown:
        raise ConfigError([f"controller.plan: unknown probe {name!r}" for name in unknown])
    reader = (
        PodLogReader(backend.logs, partial(_job_of, store))
        if cfg.log_reader == "pod_logs"
        else None
    )
    detection = Detection(
        store=store,
        clock=clock,
        metrics=metrics,
        calendar=calendar,
        rules=settings.detectors,
        catalog=catalog,
        weights={t.name: t.weight for t in cfg.tenants},
        quotas={t.name: t.quota_gpus for t in cfg.tenants if t.quota_gpus is not None},
        log_reader=reader,
        log_pipeline=cfg.log_reader,
        log_settle_seconds=cfg.log_settle_seconds,
    )
    return Controller(backend, store, runner, calendar, plan, catalog, clock, metrics, detection)


def fleet_observer(
    settings: Settings,
    fleet: Fleet,
    store: Store,
    clock: Clock,
    metrics: ControllerMetrics,
    controller: Controller,
) -> FleetObserver:
    """The reader of the agents' snapshots that feeds the controller's detectors."""
    cfg = settings.controller
    return FleetObserver(
        fleet,
        store,
        clock,
        metrics,
        cfg.agent_unreachable_grace_seconds,
        controller.detection.node_snapshots,
        lambda: controller.latest_snapshot,
        cfg.gpu_sample_interval_seconds,
    )


def lag_watch(
    settings: Settings,
    prometheus: PrometheusApi,
    store: Store,
    clock: Clock,
    metrics: ControllerMetrics,
    controller: Controller,
) -> LagWatch:
    """The monitoring-lag check against `prometheus`, fed with what the controller knows."""
    rules = settings.detectors.monitoring_lag
    checker = MonitoringChecker(
        prometheus, clock, rules, metrics.monitoring, settings.controller.heartbeat_labels
    )
    return LagWatch(
        checker,
        store,
        metrics,
        clock,
        rules,
        controller.detection.node_snapshots,
        controller.runner.active,
        controller.catalog,
        lambda: controller.latest_snapshot,
    )


def run_controller(
    settings: Settings,
    stop: threading.Event,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    on_listening: Callable[[int], object] | None = None,
) -> None:
    cfg = settings.controller
    clock = clock or SystemClock()
    registry = registry or CollectorRegistry()
    metrics = ControllerMetrics(registry)
    url = store_url(settings.storage.sqlite_path, settings.storage.url)
    upgrade(url)
    store = Store(url)
    controller = build_controller(settings, build_backend(cfg, clock), store, clock, metrics)
    controller.start()
    Heartbeat(registry, clock)

    def loop(name: str, interval: float, tick: Any) -> PeriodicLoop:
        return PeriodicLoop(name, interval, tick, clock, stop, metrics.loops)

    fleet = HttpFleet(
        cfg.agent_urls, cfg.agent_dns_name, cfg.agent_port, concurrency=cfg.agent_read_concurrency
    )
    observer = fleet_observer(settings, fleet, store, clock, metrics, controller)
    observe = loop("fleet", cfg.observe_interval_seconds, observer.observe)
    follow = loop("follow", cfg.follow_interval_seconds, controller.follow)
    detect = loop("detect", cfg.follow_interval_seconds, controller.detect)
    sample = loop("scheduler", cfg.snapshot_interval_seconds, controller.sample_scheduler)
    tally = loop("jobs", cfg.job_listing_interval_seconds, controller.tally_jobs)
    loops = [follow, sample, tally, observe, detect]
    if cfg.prometheus_url:
        prometheus = PrometheusHttp(cfg.prometheus_url, cfg.prometheus_timeout_seconds)
        watch = lag_watch(settings, prometheus, store, clock, metrics, controller)
        loops.append(loop("monitoring", cfg.monitoring_interval_seconds, watch.check))
    reports = ReportMetrics(registry)
    loops += _report_loops(settings, store, clock, stop, reports, metrics.findings, loop)
    launches = [
        loop(f"plan-{entry.probe}", entry.every_seconds, partial(controller.launch, entry))
        for entry in controller.plan
    ]

    def health() -> tuple[bool, dict[str, Any]]:
        ages = {lp.name: lp.last_success_age_seconds() for lp in (follow, sample)}
        limits = {
            "follow": 3 * cfg.follow_interval_seconds,
            "scheduler": 3 * cfg.snapshot_interval_seconds,
        }
        blind = [name for name, age in ages.items() if age is None or age > limits[name]]
        return not blind, {
            "status": "ok" if not blind else "stale",
            "last_good_tick_age_seconds": ages,
            "blind": blind,
            "active_runs": len(controller.runner.active()),
        }

    def snapshot() -> dict[str, Any]:
        return {"active_runs": [codec.run_to_json(r) for r in controller.runner.active()]}

    with serving(
        cfg.listen_host, cfg.listen_port, registry, health, snapshot, on_listening
    ) as port:
        _log.info("controller listening", host=cfg.listen_host, port=port, backend=cfg.backend)
        for started in loops:
            started.start()
        scheduler = start_plan(controller, launches, cfg.timezone, cfg.misfire_grace_seconds)
        stop.wait()
        scheduler.shutdown(wait=False)
        for stopped in loops:
            stopped.join(cfg.shutdown_deadline_seconds / len(loops))
        cancelled = controller.stop()
        _log.info("controller stopped", cancelled_runs=len(cancelled))
    controller.backend.close()
    fleet.close()
    store.close()


def _report_loops(
    settings: Settings,
    store: Store,
    clock: Clock,
    stop: threading.Event,
    reports: ReportMetrics,
    findings: FindingMetrics,
    loop: Callable[[str, float, Any], PeriodicLoop],
) -> list[PeriodicLoop]:
    """Build (and deliver) every due daily summary; poll Alertmanager when one is set."""

    def build_and_deliver() -> None:
        written = build_due(store, settings, clock.now(), reports)
        for first in range(0, len(written), len(SUFFIXES)):
            deliver_written(
                written[first : first + len(SUFFIXES)], settings, clock, stop, store, reports
            )

    loops = [loop("reports", REPORT_BUILD_INTERVAL_SECONDS, build_and_deliver)]
    if settings.reports.alertmanager_url:
        alerts = AlertmanagerHttp(
            settings.reports.alertmanager_url, settings.reports.alertmanager_timeout_seconds
        )
        loops.append(
            loop(
                "alerts",
                settings.reports.alert_poll_interval_seconds,
                AlertPoller(
                    alerts, store, clock, reports, findings, settings.reports.ignored_alerts
                ).poll,
            )
        )
    return loops
