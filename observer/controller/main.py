"""The controller daemon: the one composition (compose.py) run on threads, each task a
PeriodicLoop and the plan's entries on APScheduler, behind the HTTP surface, with an orderly
stop that leaves no probe behind."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from observer import codec
from observer.alerting.alertmanager import AlertmanagerHttp
from observer.backends.counted import ACCOUNTING, SCHEDULER
from observer.clock import Clock, SystemClock
from observer.controller.compose import (
    Sources,
    build_backend,
    compose,
    log_reader_preconditions,
)
from observer.controller.schedule import start_plan
from observer.domain import STALE_AFTER_INTERVALS
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

    counted, began = controller.backend, clock.monotonic()
    limits = {
        "follow": STALE_AFTER_INTERVALS * cfg.follow_interval_seconds,
        "scheduler": STALE_AFTER_INTERVALS * cfg.snapshot_interval_seconds,
        "jobs": STALE_AFTER_INTERVALS * cfg.job_listing_interval_seconds,
    }

    def health() -> tuple[bool, dict[str, Any]]:
        ages = {name: periodic[name].last_success_age_seconds() for name in limits}
        outages = {
            "store": store.outage,
            SCHEDULER: counted.outage(SCHEDULER),
            ACCOUNTING: counted.outage(ACCOUNTING),
        }
        ok, body = health_body(
            ages, limits, clock.monotonic() - began, outages, counted.partial_view()
        )
        return ok, {**body, "active_runs": len(controller.runner.active())}

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


class Outage(Protocol):
    @property
    def error(self) -> str: ...


# The parts /healthz judges, in the order its status words name them; the follow loop is the
# observer's own work, the others what it reads.
PARTS = ("follow", SCHEDULER, ACCOUNTING, "store")
# Without these the controller can neither follow its probes nor keep what it sees: 503. The
# accounting's outage blinds only the all-jobs figures and the quota audit, which the reports
# say, and the probes go on: 200, with its words in the status; so does a scheduler that shows
# only part of its jobs (the observer's own, probes included, among them).
SERVING = frozenset({"follow", SCHEDULER, "store"})
_WORDS = {"follow": "follow loop"}
PARTLY_BLIND = "partly blind"


def health_body(
    ages: Mapping[str, float | None],
    limits: Mapping[str, float],
    uptime_seconds: float,
    outages: Mapping[str, Outage | None],
    partial: Outage | None = None,
) -> tuple[bool, dict[str, Any]]:
    """Each part's state and the status words that name those not ok. `ages`: seconds since
    each loop's last good tick (None: none yet), stale past its limit; the accounting is
    listed seldom, and its first listing may read days back, so its age counts from the start
    until then. A part whose last read failed is failing, with the platform's words; a
    scheduler that answers but hides part of its jobs (`partial`) is partly blind, with its."""

    def stale(loop: str, before_first: float | None = None) -> bool:
        age = ages[loop] if ages[loop] is not None else before_first
        return age is None or age > limits[loop]

    stale_by_part = {
        "follow": stale("follow"),
        SCHEDULER: stale("scheduler"),
        ACCOUNTING: stale("jobs", uptime_seconds),
        "store": False,
    }
    parts, errors = {}, {}
    for part in PARTS:
        if (outage := outages.get(part)) is not None:
            parts[part], errors[part] = "failing", outage.error
        elif part == SCHEDULER and partial is not None and not stale_by_part[part]:
            parts[part], errors[part] = PARTLY_BLIND, partial.error
        else:
            parts[part] = "stale" if stale_by_part[part] else "ok"
    trouble = [part for part in PARTS if parts[part] != "ok"]
    status = ", ".join(f"{_WORDS.get(p, p)} {parts[p]}" for p in trouble) or "ok"
    serving = SERVING.intersection(p for p in trouble if parts[p] != PARTLY_BLIND)
    return not serving, {
        "status": status,
        "parts": parts,
        "errors": errors,
        "last_good_tick_age_seconds": dict(ages),
        "blind": trouble,
        "store_error": errors.get("store"),
    }
