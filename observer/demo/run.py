"""`observer demo`: the real controller, agents and detectors over the simulated cluster, on
an accelerated clock, with faults injected at known times; then the daily summaries and the
verdict, and a word on what was found against what was injected.

The clock is a ManualClock moved by the demo: five seconds a step while a window is open or
probes are in flight, a minute a step otherwise. /metrics serves the controller's registry
while the demo runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import yaml

from observer import codec
from observer.backends.simulated import SimulatedCluster
from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.controller.service import Controller
from observer.demo.faults import FAULTS, Injection, Score, score
from observer.demo.nodes import DemoNodes
from observer.demo.scenario import GPUS_PER_NODE, TIMEZONE, Load, describe, local, overrides
from observer.domain import JobPhase, ProbeRun
from observer.fleet.local import LocalFleet
from observer.http import serving
from observer.metrics import HEARTBEAT_METRIC
from observer.monitoring.fake import FakePrometheus, FakeTarget
from observer.reports.publish import write_daily, write_verdict
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.database import upgrade
from observer.storage.store import Store

BUSY_STEP_SECONDS = 5.0
QUIET_STEP_SECONDS = 60.0
LOAD_EVERY_SECONDS = 300.0
# Faults are armed this long before they are due, so the steps around them are fine.
ARMING = timedelta(minutes=10)


@dataclass(frozen=True)
class DemoResult:
    reports: list[Path]
    config: Path  # the demo's settings, for `observer report --config`
    injections: list[Injection]
    score: Score


class FaultScript:
    """Switches the declared faults on and off at their local times on the demo's first day;
    each becomes an Injection, with what it hit, or stays one that was not injected."""

    def __init__(
        self,
        day: date,
        cluster: SimulatedCluster,
        nodes: DemoNodes,
        active: Callable[[], Sequence[ProbeRun]],
        scraped: list[FakeTarget],
    ) -> None:
        self._cluster = cluster
        self._nodes = nodes
        self._active = active
        self._scraped = scraped
        self.injections = {fault.kind: Injection(fault) for fault in FAULTS}
        self._stuck_job = ""
        self._leak_from = local(day, 0)
        self._log_armed = False
        switches: dict[str, tuple[Callable[[datetime], None], Callable[[datetime], None]]] = {
            "unfair_scheduler": (self._unfair_on, self._unfair_off),
            "leaked_probe_process": (self._leak_on, self._leak_off),
            "log_loss": (self._arm_log_loss, self._disarm_log_loss),
            "stuck_terminating": (self._stick_on, self._stick_off),
            "prometheus_stall": (self._stall_on, self._stall_off),
        }
        steps = [
            step
            for fault in FAULTS
            for step in (
                (datetime.combine(day, fault.on, TIMEZONE), switches[fault.kind][0]),
                (datetime.combine(day, fault.off, TIMEZONE), switches[fault.kind][1]),
            )
        ]
        self._steps = sorted(steps, key=lambda step: step[0])

    def next_due(self) -> datetime | None:
        return self._steps[0][0] if self._steps else None

    def tick(self, now: datetime) -> None:
        while self._steps and self._steps[0][0] <= now:
            self._steps.pop(0)[1](now)
        if self._log_armed:
            self._lose_canary_lines(now)

    def _began(self, kind: str, now: datetime, *hit: dict[str, str]) -> None:
        injection = self.injections[kind]
        injection.start = now
        injection.hit = list(hit)

    def _ended(self, kind: str, now: datetime) -> None:
        injection = self.injections[kind]
        if injection.injected and injection.end is None:
            injection.end = now

    def _unfair_on(self, now: datetime) -> None:
        self._cluster.faults.favoured_tenant = "prod"
        self._began("unfair_scheduler", now)

    def _unfair_off(self, now: datetime) -> None:
        self._cluster.faults.favoured_tenant = None
        self._ended("unfair_scheduler", now)

    def _leak_on(self, now: datetime) -> None:
        self._nodes.leak_next_probe = True
        self._leak_from = now

    def _leak_off(self, now: datetime) -> None:
        # Injected only if a probe ended meanwhile; unarmed, none after the window leaks.
        self._nodes.leak_next_probe = False
        leaked = [{"node": node, "run_id": run} for run, node in self._nodes.leaked.values()]
        if leaked:
            self._began("leaked_probe_process", self._leak_from, *leaked)
            self._ended("leaked_probe_process", now)
        self._nodes.release_leaks()

    def _arm_log_loss(self, now: datetime) -> None:
        self._log_armed = True

    def _disarm_log_loss(self, now: datetime) -> None:
        self._log_armed = False

    def _lose_canary_lines(self, now: datetime) -> None:
        canaries = [
            run
            for run in self._active()
            if run.probe == "log-canary" and run.started_at is not None
        ]
        if not canaries:
            return
        started = canaries[0].started_at
        assert started is not None
        # Every canary in flight writes through these 10 s: they are launched together.
        self._cluster.faults.log_loss.append(
            (started + timedelta(seconds=20), started + timedelta(seconds=30))
        )
        self._began("log_loss", now, *({"run_id": run.run_id} for run in canaries))
        self.injections["log_loss"].end = now + timedelta(minutes=10)
        self._log_armed = False

    def _stall_on(self, now: datetime) -> None:
        for target in self._scraped:
            target.scraped = False
        self._began("prometheus_stall", now)

    def _stall_off(self, now: datetime) -> None:
        for target in self._scraped:
            target.scraped = True
        self._ended("prometheus_stall", now)

    def _stick_on(self, now: datetime) -> None:
        for job, _, placement in self._cluster.holdings():
            if job.run_id is None and job.phase is JobPhase.RUNNING:
                self._stuck_job = job.job_id
                self._cluster.faults.stuck_jobs.add(job.job_id)
                hit = {"job_id": job.job_id, "node": next(iter(placement))}
                self._began("stuck_terminating", now, hit)
                return

    def _stick_off(self, now: datetime) -> None:
        self._cluster.faults.stuck_jobs.discard(self._stuck_job)
        self._ended("stuck_terminating", now)


def run_demo(
    out: Path,
    days: int,
    start: date,
    *,
    language: str = "en",
    host: str = "127.0.0.1",
    port: int = 0,
    progress: TextIO = sys.stderr,
) -> DemoResult:
    _clear(out)
    tree = overrides(out, language)
    cfg_all = Settings.model_validate(tree)
    config = out / "observer.yaml"
    config.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    url = str(cfg_all.storage.url)
    upgrade(url)
    clock = ManualClock(local(start, 0))
    # The demo's database is rebuilt by every run: a commit need not reach the disk.
    store = Store(url, clock, durable=False)
    cluster = simulated_cluster(cfg_all, clock)
    nodes = DemoNodes(cluster, clock, GPUS_PER_NODE, cfg_all.detectors.node)
    prometheus = FakePrometheus(clock)
    targets = [
        prometheus.add_target(
            "observer-controller",
            "controller:9500",
            lambda at: [(HEARTBEAT_METRIC, {}, at.timestamp())],
        )
    ]
    targets += [
        prometheus.add_target("observer-agent", f"{name}:9400", partial(nodes.exposition, name))
        for name in nodes.names
    ]
    load = Load(cluster)

    def in_flight() -> Sequence[ProbeRun]:  # the leak fault's probe is one of them
        return soak.controller.runner.active()

    script = FaultScript(start, cluster, nodes, in_flight, targets)
    soak = SimulatedSoak(
        cfg_all,
        clock,
        store,
        cluster,
        Sources(LocalFleet(nodes.snapshots), prometheus),
        agents=[Task("nodes", BUSY_STEP_SECONDS, nodes.tick)],
        world=[
            Task("load", LOAD_EVERY_SECONDS, lambda: load.submit(in_window())),
            Task("faults", BUSY_STEP_SECONDS, lambda: script.tick(clock.now())),
        ],
    )
    controller = soak.controller

    def in_window() -> bool:
        return bool(controller.calendar.windows_at(clock.now()))

    def busy() -> bool:
        due = script.next_due()
        soon = due is not None and due - clock.now() <= ARMING
        return in_window() or bool(controller.runner.active()) or soon

    def step() -> None:
        clock.advance(BUSY_STEP_SECONDS if busy() else QUIET_STEP_SECONDS)

    def health() -> tuple[bool, dict[str, Any]]:
        return True, {"status": "ok", "simulated_time": clock.now().isoformat()}

    def snapshot() -> dict[str, Any]:
        return {"active_runs": [codec.run_to_json(r) for r in controller.runner.active()]}

    end = local(start + timedelta(days=days), 0)
    with serving(host, port, soak.registry, health, snapshot) as bound:
        left_out = "; ".join(f"{n}: {why}" for n, why in soak.composition.left_out.items())
        print(
            f"observer demo: {days} simulated day(s) from {start.isoformat()} "
            f"({TIMEZONE}); metrics on http://{host}:{bound}/metrics"
            + (f"; not run: {left_out}" if left_out else ""),
            file=progress,
        )
        print(f"  settings that differ from the defaults (in {config}):", file=progress)
        print("\n".join(f"    {line}" for line in describe(tree)), file=progress, flush=True)
        while clock.now() < end:
            soak.run_for(3600, step)
            _progress(progress, clock.now(), store, controller)
    controller.tally_jobs()  # the last day's jobs, up to its very end
    controller.stop()
    written = [
        path
        for day in (start + timedelta(days=i) for i in range(days))
        for path in write_daily(store, cfg_all, day, clock.now())
    ]
    written += _as_verdict(write_verdict(store, cfg_all, clock.now()))
    injections = list(script.injections.values())
    result = DemoResult(written, config, injections, score(injections, store.findings()))
    store.close()
    return result


def default_start(days: int) -> date:
    """The latest Monday from which `days` days end before today (platform time), so the
    demo's first day has a weekday peak and its reports are of days already over."""
    first = datetime.now(TIMEZONE).date() - timedelta(days=days)
    return first - timedelta(days=first.weekday())


def _clear(out: Path) -> None:
    """The demo owns its database and its reports in `out`; a previous demo's are replaced."""
    for stale in [
        *out.glob("observer.db*"),
        *(out / "reports").glob("daily-*"),
        *(out / "reports").glob("verdict*"),
    ]:
        stale.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _as_verdict(paths: list[Path]) -> list[Path]:
    named = []
    for path in paths:
        target = path.with_name("verdict" + path.suffix)
        os.replace(path, target)
        named.append(target)
    return named


def _progress(progress: TextIO, now: datetime, store: Store, controller: Controller) -> None:
    at = now.astimezone(TIMEZONE)
    open_findings = store.findings(open_only=True)
    detectors = sorted({f.detector for f in open_findings})
    print(
        f"  {at:%a %Y-%m-%d %H:%M}  runs {len(store.runs())}  in flight "
        f"{len(controller.runner.active())}  open findings {len(open_findings)}"
        + (f" ({', '.join(detectors)})" if detectors else ""),
        file=progress,
        flush=True,
    )


def summary(result: DemoResult) -> str:
    """What a person reads at the end: where the reports are and how to rebuild them, each
    declared fault with what it hit and the findings that reported it, and anything found that
    no fault explains."""
    lines = ["", "Reports:"]
    lines += [f"  {path}" for path in result.reports]
    lines += [
        "Rebuilt from the demo's settings:",
        f"  observer report daily --config {result.config} --date <day>",
        "",
        "Injected faults and what reported them:",
    ]
    for injection in result.injections:
        fault = injection.fault
        if not injection.injected:
            lines.append(f"  NOT INJECTED  {fault.name}")
            lines.append(
                f"          {fault.trigger} between {fault.on:%H:%M} and {fault.off:%H:%M}"
            )
            continue
        found = result.score.found.get(fault.kind, [])
        unmet = result.score.unmet.get(fault.kind, [])
        hit = "; ".join(injection.subjects)
        lines.append(
            f"  {'MISSED' if unmet else 'found '}  {fault.name}" + (f" ({hit})" if hit else "")
        )
        lines += [
            f"          {f.detector} {dict(f.subject)} opened "
            f"{f.opened_at.astimezone(TIMEZONE):%a %H:%M:%S}"
            for f in found
        ]
        lines += [f"          nothing reported {detector} {subject}" for detector, subject in unmet]
    if result.score.unexpected:
        lines += ["", "Findings no injected fault explains:"]
        lines += [
            f"  {f.detector} {dict(f.subject)} opened {f.opened_at.astimezone(TIMEZONE):%a %H:%M}"
            for f in result.score.unexpected
        ]
    else:
        lines += ["", "No finding that was not injected."]
    return "\n".join(lines)
