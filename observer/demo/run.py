"""`observer demo`: a scenario played through the real controller, agents and detectors over
the simulated cluster, on an accelerated clock, with its faults injected at their times; then
the daily summaries and the verdict, and the score of what was found against what was
injected (printed, and written to `score.json`).

The clock is a ManualClock moved by the demo: five seconds a step while a window is open or
probes are in flight, a minute a step otherwise. /metrics serves the controller's registry
while the demo runs."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TextIO
from zoneinfo import ZoneInfo

import yaml

from observer import codec
from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.controller.work import Controller
from observer.demo.faults import Score, score
from observer.demo.nodes import DemoNodes
from observer.demo.scenario import Load, Scenario, describe
from observer.demo.script import FaultScript, World
from observer.domain import ProbeRun
from observer.fleet.local import LocalFleet
from observer.http import serving
from observer.metrics import HEARTBEAT_METRIC
from observer.monitoring.fake import FakePrometheus
from observer.reports.publish import write_daily, write_verdict
from observer.reports.render.i18n import Words
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.database import upgrade
from observer.storage.store import Store

BUSY_STEP_SECONDS = 5.0
QUIET_STEP_SECONDS = 60.0
LOAD_EVERY_SECONDS = 300.0
# Faults are armed this long before they are due, so the steps around them are fine.
ARMING = timedelta(minutes=10)
# In the demo's directory: the log lines of its run (`observer demo` writes them there).
LOG_FILE = "observer.log"


@dataclass(frozen=True)
class DemoResult:
    scenario: Scenario
    reports: list[Path]
    config: Path  # the demo's settings, for `observer report --config`
    score: Score
    score_file: Path

    @property
    def log(self) -> Path:
        return self.score_file.parent / LOG_FILE


def run_demo(
    scenario: Scenario,
    out: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    progress: TextIO = sys.stderr,
) -> DemoResult:
    _clear(out)
    cfg_all = scenario.settings
    config = out / "observer.yaml"
    config.write_text(yaml.safe_dump(scenario.tree, sort_keys=False), encoding="utf-8")
    url = str(cfg_all.storage.url)
    upgrade(url)
    clock = ManualClock(scenario.start)
    # The demo's database is rebuilt by every run: a commit need not reach the disk.
    store = Store(url, clock, durable=False)
    cluster = simulated_cluster(cfg_all, clock)
    nodes = DemoNodes(
        cluster,
        clock,
        cfg_all.controller.simulation.gpus_per_node,
        cfg_all.detectors.node,
        cfg_all.detectors.gpu_health,
    )
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
    load = Load(
        cluster,
        [t.name for t in cfg_all.controller.tenants],
        scenario.spec.load,
        scenario.spec.seed,
        3600 / LOAD_EVERY_SECONDS,
    )
    fleet = LocalFleet(nodes.snapshots)

    def in_flight() -> Sequence[ProbeRun]:  # the leak fault's probe is one of them
        return soak.controller.runner.active()

    script = FaultScript(scenario, World(cluster, nodes, fleet, targets, in_flight, store))
    soak = SimulatedSoak(
        cfg_all,
        clock,
        store,
        cluster,
        Sources(fleet, prometheus),
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

    w = words(scenario)
    with serving(host, port, soak.registry, health, snapshot) as bound:
        left_out = "; ".join(f"{n}: {why}" for n, why in soak.composition.left_out.items())
        print(
            w(
                "demo.started",
                days=scenario.spec.days,
                start=scenario.spec.start.isoformat(),
                timezone=str(scenario.timezone),
                url=f"http://{host}:{bound}/metrics",
            )
            + (w("demo.not_run", left_out=left_out) if left_out else ""),
            file=progress,
        )
        print("  " + w("demo.settings", config=str(config)), file=progress)
        print("\n".join(f"    {line}" for line in describe(scenario, w)), file=progress, flush=True)
        while clock.now() < scenario.end:
            soak.run_for(3600, step)
            _progress(progress, clock.now(), w, store, controller)
    controller.stop()
    now = clock.now()
    written = [path for day in scenario.days for path in write_daily(store, cfg_all, day, now)]
    written += write_verdict(store, cfg_all, now)
    result = score(script.injections, store.findings(), _causes(written))
    store.close()
    score_file = out / "score.json"
    score_file.write_text(
        json.dumps(score_json(scenario, result), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return DemoResult(scenario, written, config, result, score_file)


def _causes(reports: list[Path]) -> dict[str, str | None]:
    """The cause each day's summary gave each probe run, as its JSON says: what the score
    holds the GPU faults' runs to is what a person reads."""
    return {
        record["run_id"]: record["cause"]
        for path in reports
        if path.name.startswith("daily-") and path.suffix == ".json"
        for record in json.loads(path.read_text(encoding="utf-8"))["task_records"]
    }


def default_start(days: int, timezone: ZoneInfo) -> date:
    """The latest Monday from which `days` days end before today (platform time), so the
    demo's first day has a weekday peak and its reports are of days already over."""
    first = datetime.now(timezone).date() - timedelta(days=days)
    return first - timedelta(days=first.weekday())


def _clear(out: Path) -> None:
    """The demo owns its database, score and reports in `out`; a previous demo's are
    replaced."""
    for stale in [
        *out.glob("observer.db*"),
        *out.glob("score.json"),
        *(out / "reports").glob("daily-*"),
        *(out / "reports").glob("verdict*"),
    ]:
        stale.unlink()
    out.mkdir(parents=True, exist_ok=True)


def words(scenario: Scenario) -> Words:
    """The console's words, in the language of the scenario's reports."""
    return Words(scenario.settings.reports.language, scenario.timezone)


def _progress(
    progress: TextIO, now: datetime, w: Words, store: Store, controller: Controller
) -> None:
    open_findings = store.findings(open_only=True)
    detectors = sorted({f.detector for f in open_findings})
    print(
        "  "
        + w(
            "demo.progress",
            hour=f"{w.day(now.astimezone(w.timezone).date())} {now.astimezone(w.timezone):%H:%M}",
            runs=len(store.runs()),
            in_flight=len(controller.runner.active()),
            open=len(open_findings),
        )
        + (w("demo.open_detectors", detectors=w.names(detectors)) if detectors else ""),
        file=progress,
        flush=True,
    )


def _when(at: datetime, w: Words, time: str = "%H:%M") -> str:
    """A moment of the simulated days, as the console writes it: weekday and time."""
    local = at.astimezone(w.timezone)
    return w("demo.when", weekday=w(f"demo.weekday.{local.weekday()}"), time=f"{local:{time}}")


def _subject(subject: Mapping[str, str]) -> dict[str, str]:
    return dict(sorted(subject.items()))


def score_json(scenario: Scenario, result: Score) -> dict[str, Any]:
    """The score as `DIR/score.json`: per fault what it hit, its findings and their delays,
    what it missed; per detector recall, precision and median delay; every finding no fault
    explains, with the confounders that were on when it opened."""
    tz = scenario.timezone

    def at(value: datetime | None) -> str | None:
        return value.astimezone(tz).isoformat() if value else None

    faults = []
    for n, injection in enumerate(result.injections):
        fault = injection.fault
        faults.append(
            {
                "kind": fault.kind,
                "declared": fault.model_dump(mode="json"),
                "confounder": fault.confounder,
                "injected": injection.injected,
                "not_injected_because": None if injection.injected else fault.trigger or None,
                "start": at(injection.start),
                "end": at(injection.end),
                "hit": injection.hit,
                "findings": [
                    {
                        "detector": f.detector,
                        "subject": _subject(f.subject),
                        "opened_at": at(f.opened_at),
                        "delay_seconds": (f.opened_at - injection.start).total_seconds()
                        if injection.start
                        else None,
                    }
                    for f in result.found[n]
                ],
                "missed": [
                    {"detector": e.detector, "subject": subject} for e, subject in result.unmet[n]
                ],
                "miscaused": [
                    {"run_id": run, "cause": cause, "reported": reported}
                    for run, cause, reported in result.miscaused[n]
                ],
            }
        )
    return {
        "scenario": scenario.spec.name,
        "seed": scenario.spec.seed,
        "start": scenario.spec.start.isoformat(),
        "days": scenario.spec.days,
        "passed": result.passed,
        "faults": faults,
        "detectors": result.by_detector(),
        "unexplained": [
            {
                "detector": f.detector,
                "subject": _subject(f.subject),
                "opened_at": at(f.opened_at),
                "summary": f.summary,
                "confounders_on": result.confounders_on(f),
            }
            for f in result.unexpected
        ],
    }


def summary(result: DemoResult) -> str:
    """What a person reads at the end: where the reports are and how to rebuild them, each
    declared fault with what it hit and the findings that reported it, the confounders that
    had to stay quiet, and anything found that no fault explains."""
    w = words(result.scenario)
    score = result.score
    lines = ["", w("demo.reports")]
    lines += [f"  {path}" for path in result.reports]
    lines += [
        w("demo.rebuilt"),
        f"  observer report daily --config {result.config} --date <day>",
        w("demo.score", file=str(result.score_file)),
        w("demo.log", file=str(result.log)),
        "",
        w("demo.faults"),
    ]
    for n, injection in enumerate(score.injections):
        fault = injection.fault
        # The scenario's times are naive: they are the platform's, never the host's.
        when = _when(result.scenario.local(fault.at), w) + (
            f"-{fault.until:%H:%M}" if fault.until else ""
        )
        name = f"{fault.describe()} {when}"
        if not injection.injected:
            lines.append(f"  {w('demo.not_injected')}  {name}")
            lines.append(f"          {fault.trigger or w('demo.never_on')}")
            continue
        hit = "; ".join(injection.subjects)
        if fault.confounder:
            lines.append(f"  {w('demo.quiet')}   {name} {w('demo.confounder')}")
            continue
        unmet = score.unmet[n]
        wrong = unmet or score.miscaused[n]
        mark = w("demo.missed") if wrong else w("demo.found")
        lines.append(f"  {mark}  " + (w.aside(name, hit) if hit else name))
        lines += [
            "          "
            + w(
                "demo.opened",
                detector=f.detector,
                subject=str(_subject(f.subject)),
                when=_when(f.opened_at, w, "%H:%M:%S"),
            )
            for f in score.found[n]
        ]
        lines += [
            "          "
            + w("demo.nothing_reported", detector=e.detector, subject=str(subject))
            + (w("demo.not_subject", subject=str(dict(e.not_))) if e.not_ else "")
            for e, subject in unmet
        ]
        lines += [
            "          " + w("demo.miscaused", run=run, reported=str(reported), cause=cause)
            for run, cause, reported in score.miscaused[n]
        ]
        lines += [
            "          " + w("demo.caused", run=run, cause=cause)
            for run, cause in injection.expected_causes()
            if (run, cause) not in {(r, c) for r, c, _ in score.miscaused[n]}
        ]
    if score.unexpected:
        lines += ["", w("demo.unexpected")]
        for f in score.unexpected:
            confounders = score.confounders_on(f)
            lines.append(
                "  "
                + w(
                    "demo.opened",
                    detector=f.detector,
                    subject=str(_subject(f.subject)),
                    when=_when(f.opened_at, w),
                )
                + (w("demo.while_on", confounders=w.names(confounders)) if confounders else "")
            )
    else:
        lines += ["", w("demo.nothing_unexpected")]
    return "\n".join(lines)
