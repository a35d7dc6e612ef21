"""The controller daemon: the one composition (compose.py) run on threads, each task a
PeriodicLoop and the plan's entries on APScheduler, behind the HTTP surface, with an orderly
stop that leaves no probe behind."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from observer import codec
from observer.alerting.alertmanager import AlertmanagerHttp
from observer.clock import Clock, SystemClock
from observer.controller.compose import (
    Sources,
    build_backend,
    compose,
    log_reader_preconditions,
)
from observer.controller.schedule import start_plan
from observer.errors import ConfigError
from observer.fleet.http import HttpFleet
from observer.http import serving
from observer.logging_setup import get_logger
from observer.loops import PeriodicLoop
from observer.metrics import ControllerMetrics, Heartbeat, ReportMetrics
from observer.monitoring.prometheus import PrometheusHttp
from observer.settings import Settings
from observer.storage.database import store_url, upgrade
from observer.storage.store import Store

_log = get_logger("observer.controller")


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
    # first: a machine that lacks what the backend or the log reader needs is refused
    if problems := log_reader_preconditions(cfg):
        raise ConfigError(problems)
    backend = build_backend(cfg, clock)
    url = store_url(settings.storage.sqlite_path, settings.storage.url)
    upgrade(url)
    store = Store(url, clock, on_error=metrics.store_errors_total.inc)
    fleet = HttpFleet(
        cfg.agent_urls,
        cfg.agent_dns_name,
        cfg.agent_port,
        read_timeout_seconds=cfg.agent_read_timeout_seconds,
        max_snapshot_bytes=cfg.agent_snapshot_max_bytes,
        concurrency=cfg.agent_read_concurrency,
    )
    sources = Sources(
        fleet,
        PrometheusHttp(cfg.prometheus_url, cfg.prometheus_timeout_seconds)
        if cfg.prometheus_url
        else None,
        AlertmanagerHttp(
            settings.reports.alertmanager_url, settings.reports.alertmanager_timeout_seconds
        )
        if settings.reports.alertmanager_url
        else None,
    )
    composition = compose(
        settings,
        backend,
        store,
        sources,
        clock,
        metrics,
        ReportMetrics(registry),
        stop,
    )
    controller = composition.controller
    Heartbeat(registry, clock)
    loops = [
        (
            task,
            PeriodicLoop(
                task.name,
                task.interval_seconds,
                task.tick,
                clock,
                stop,
                metrics.loops,
                also_at=task.also_at,
            ),
        )
        for task in composition.tasks
    ]
    periodic = {task.name: loop for task, loop in loops if not task.planned}
    planned = [(task, loop) for task, loop in loops if task.planned]
    for name, why in composition.left_out.items():
        _log.info("task not run", task=name, why=why)

    def health() -> tuple[bool, dict[str, Any]]:
        ages = {name: periodic[name].last_success_age_seconds() for name in ("follow", "scheduler")}
        limits = {
            "follow": 3 * cfg.follow_interval_seconds,
            "scheduler": 3 * cfg.snapshot_interval_seconds,
        }
        blind = [name for name, age in ages.items() if age is None or age > limits[name]]
        outage = store.outage
        if outage is not None:  # what is seen is kept in memory, not yet stored
            blind.append("store")
        return not blind, {
            "status": "ok" if not blind else "stale",
            "last_good_tick_age_seconds": ages,
            "blind": blind,
            "store_error": outage.error if outage else None,
            "active_runs": len(controller.runner.active()),
        }

    def snapshot() -> dict[str, Any]:
        return {"active_runs": [codec.run_to_json(r) for r in controller.runner.active()]}

    with serving(
        cfg.listen_host, cfg.listen_port, registry, health, snapshot, on_listening
    ) as port:
        _log.info("controller listening", host=cfg.listen_host, port=port, backend=cfg.backend)
        for started in periodic.values():
            started.start()
        scheduler = start_plan(planned, cfg.timezone, cfg.misfire_grace_seconds)
        stop.wait()
        scheduler.shutdown(wait=False)
        for stopped in periodic.values():
            stopped.join(cfg.shutdown_deadline_seconds / len(periodic))
        cancelled = controller.stop()
        if composition.inference is not None:
            composition.inference.stop()
        _log.info("controller stopped", cancelled_runs=len(cancelled))
    controller.backend.close()
    store.close()
