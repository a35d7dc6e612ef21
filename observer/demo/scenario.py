"""What the demo plays: a scenario file (YAML) naming the platform, the other tenants' load,
the settings it changes from the demo's defaults and the faults it injects at local times,
validated like the settings (one 'field.path: problem' line each). The packaged default,
`default.yaml` beside this module, is the one-day demo `observer demo` plays without
`--scenario`."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import Field, TypeAdapter, ValidationError

from observer.backends.simulated import SimulatedCluster
from observer.demo.faults import AnyFault, FaultSpec
from observer.domain import Workload
from observer.errors import ConfigError
from observer.reports.render.i18n import Words
from observer.settings import Settings, merge, problems, read_yaml
from observer.settings.base import Group
from observer.settings.detectors import FairnessSettings

DEFAULT = Path(__file__).with_name("default.yaml")
_FAULT: TypeAdapter[FaultSpec] = TypeAdapter(AnyFault)


class Platform(Group):
    nodes: int = Field(6, ge=1, le=1000)
    gpus_per_node: int = Field(8, ge=1, le=16)
    pools: list[str] = Field(default_factory=lambda: ["h200-a", "h200-b"], min_length=1)


class LoadSpec(Group):
    """Other tenants' demand in and out of the windows, relative to the cluster's GPUs (1.5:
    half as much again as there is, so the scheduler's shares decide)."""

    busy_factor: float = Field(1.5, ge=0, le=10)
    quiet_factor: float = Field(0.1, ge=0, le=10)


class ScenarioFile(Group):
    name: str
    start: date
    days: int = Field(1, ge=1, le=31)
    seed: int = 7
    settings: dict[str, Any] = Field(default_factory=dict)
    platform: Platform = Platform()
    load: LoadSpec = LoadSpec()
    faults: list[dict[str, Any]] = Field(default_factory=list)  # each validated by its kind


class Scenario:
    """A validated scenario: its file's keys, the settings tree it runs with, its faults with
    their local times in the platform's timezone."""

    def __init__(self, spec: ScenarioFile, tree: dict[str, Any], faults: list[FaultSpec]) -> None:
        self.spec = spec
        self.tree = tree
        self.faults = faults
        self.settings = Settings.model_validate(tree)
        self.timezone = ZoneInfo(self.settings.controller.timezone)

    @property
    def start(self) -> datetime:
        return self.local(datetime.combine(self.spec.start, time()))

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=self.spec.days)

    @property
    def days(self) -> list[date]:
        return [self.spec.start + timedelta(days=i) for i in range(self.spec.days)]

    def local(self, at: datetime) -> datetime:
        return at.replace(tzinfo=self.timezone)


def load_scenario(
    path: Path | None,
    out: Path,
    language: str,
    *,
    start: date | None = None,
    days: int | None = None,
) -> Scenario:
    """The scenario at `path` (None: the packaged default) played from `start` for `days`
    if given (its faults move with its start), with the database and reports in `out`.
    Raises ConfigError with one line per problem, all of them."""
    raw = read_yaml(path or DEFAULT, holds="scenario keys")
    try:
        spec = ScenarioFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(problems(exc)) from None
    shift = timedelta(days=(start - spec.start).days) if start else timedelta()
    spec = spec.model_copy(update={"start": start or spec.start, "days": days or spec.days})
    found: list[str] = []
    faults: dict[int, FaultSpec] = {}
    for n, declared in enumerate(spec.faults):
        try:
            fault = _FAULT.validate_python(declared)
        except ValidationError as exc:
            found += [_fault_problem(n, line) for line in problems(exc)]
            continue
        faults[n] = fault.model_copy(update=_moved(fault, shift))
    tree = merge(merge(_defaults(spec.platform), spec.settings), _owned(out, language))
    controller = tree["controller"]
    if isinstance(controller, dict) and "plan" not in controller:
        controller["plan"] = default_plan(controller.get("windows"), controller.get("tenants"))
    try:
        settings = Settings.model_validate(tree)
        tree["reports"].update(_soak_end(spec, settings.controller.timezone))
        settings = Settings.model_validate(tree)
    except ValidationError as exc:
        found += [f"settings.{line}" for line in problems(exc)]
        settings = None
    found += _cross_check(spec, faults, settings)
    if found:
        raise ConfigError(sorted(found, key=_in_file_order))
    return Scenario(spec, tree, list(faults.values()))


def _in_file_order(line: str) -> tuple[int, int]:
    parts = line.split(".", 2)
    return (0, int(parts[1])) if parts[0] == "faults" and parts[1].isdigit() else (1, 0)


def _fault_problem(n: int, line: str) -> str:
    """A fault's problem at its place in the file; pydantic names the kind's model in the path
    (agent_down.node): drop it."""
    where, _, message = line.partition(": ")
    parts = where.split(".")
    if message.startswith("Input tag"):
        return f"faults.{n}.kind: unknown fault kind {message.split(chr(39))[1]!r}"
    if message == "unknown setting":
        message = f"unknown key for {parts[0]}"
    return ".".join([f"faults.{n}", *parts[1:]]) + f": {message}"


def _moved(fault: FaultSpec, shift: timedelta) -> dict[str, Any]:
    return {"at": fault.at + shift, "until": fault.until + shift if fault.until else None}


def _cross_check(
    spec: ScenarioFile, faults: Mapping[int, FaultSpec], settings: Settings | None
) -> list[str]:
    """What the faults name must exist (when the settings say what exists), and their times
    fall in the scenario's days, in order."""
    first = spec.start
    last = first + timedelta(days=spec.days - 1)
    begins, ends = datetime.combine(first, time()), datetime.combine(last, time()) + timedelta(1)
    # A fault starts within the days and ends within them or at their very end (the midnight
    # after the last day).
    within = {"at": lambda at: begins <= at < ends, "until": lambda at: begins < at <= ends}
    found = []
    for n, fault in faults.items():
        where = f"faults.{n}"
        for key in ("at", "until"):
            at = getattr(fault, key)
            if at is not None and not within[key](at):
                found.append(
                    f"{where}.{key}: {at:%Y-%m-%d %H:%M} is outside the scenario's days "
                    f"({first} to {last})"
                )
        if fault.until is None and fault.needs_until:
            found.append(f"{where}.until: is required for {fault.kind}")
        if fault.until is not None and fault.until <= fault.at:
            found.append(f"{where}.until: must be after at ({fault.at:%Y-%m-%d %H:%M})")
        if settings is None:
            continue
        nodes = settings.controller.simulation.node_names()
        node = getattr(fault, "node", None)
        if node is not None and node not in nodes:
            found.append(f"{where}.node: no node {node!r} (the platform has {_span(nodes)})")
        tenants = sorted(t.name for t in settings.controller.tenants)
        for key in ("tenant", "favoured"):
            tenant = getattr(fault, key, None)
            if tenant is not None and tenant not in tenants:
                found.append(f"{where}.{key}: no tenant {tenant!r} ({', '.join(tenants)})")
    return found


def _span(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} to {names[-1]}"


# Every probe in every window, and how often; launches due at the same moment go in this
# order, the rarer probes first.
EVERY_PROBE_IN_A_WINDOW = (
    ("isolation", 3600),
    ("fail-image", 3600),
    ("gpu-comm", 3600),
    ("multi-gpu", 1800),
    ("fail-exit", 1800),
    ("log-canary", 1800),
    ("fairness", 1200),
    ("gpu-busy", 900),
    ("short", 600),
)


def default_plan(windows: object, tenants: object) -> list[dict[str, Any]]:
    """The full probe plan over the scenario's own windows and tenants, so that renaming them
    needs no plan: the quota probe in the first window for the tenants with a quota (there is
    none without), the long one in the last, then every probe in each window. Whatever of the
    windows and tenants is not a name is left out: the settings' validation says what is
    wrong with them."""
    names = _names(windows)
    if not names:
        return []
    quota = [t["name"] for t in _named(tenants) if t.get("quota_gpus") is not None]
    plan: list[dict[str, Any]] = []
    if quota:
        plan.append({"window": names[0], "probe": "quota", "every_seconds": 3600, "tenants": quota})
    plan.append({"window": names[-1], "probe": "long", "every_seconds": 3600})
    plan += [
        {"window": window, "probe": probe, "every_seconds": every}
        for window in names
        for probe, every in EVERY_PROBE_IN_A_WINDOW
    ]
    return plan


def _named(items: object) -> list[dict[str, Any]]:
    """The mappings of `items` that have a name."""
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("name"), str)]


def _names(items: object) -> list[str]:
    return [i["name"] for i in _named(items)]


def _defaults(platform: Platform) -> dict[str, Any]:
    """The settings every scenario starts from: three tenants with different weights, a
    weekday peak and a night window in Shanghai, fairness judged over fewer windows (a day
    has two). The plan is `default_plan` over the windows and tenants, unless the scenario
    gives its own."""
    return {
        "controller": {
            "timezone": "Asia/Shanghai",
            "windows": [
                {"name": "weekday-peak", "days": "mon-fri", "start": "10:00", "end": "12:00"},
                {"name": "night", "days": "*", "start": "02:00", "end": "04:00"},
            ],
            "tenants": [
                {"name": "research", "weight": 0.5},
                {"name": "prod", "weight": 0.3},
                {"name": "batch", "weight": 0.2, "quota_gpus": 8},
            ],
            "probes": {"log-canary": {"log_lines": 600, "log_interval_seconds": 0.1}},
            "gpus_per_node": platform.gpus_per_node,
            "max_probe_gpus": 48,
            "max_probe_gpus_per_tenant": 24,
            "follow_interval_seconds": 5,
            "snapshot_interval_seconds": 30,
            "observe_interval_seconds": 30,
            "gpu_sample_interval_seconds": 60,
            "logs": {"settle_seconds": 30},
            "heartbeat_labels": {"job": "observer-controller"},
            "simulation": platform.model_dump(),
        },
        "detectors": {
            "fairness": {"persistence_k": 2, "persistence_m": 3},
            # The demo's agents run in process (no controller.agent_urls to derive it from).
            "monitoring_lag": {"freshness_series": ["observer_gpu_up"]},
        },
    }


def _owned(out: Path, language: str) -> dict[str, Any]:
    """What the demo decides whatever the scenario says: its database and reports in `out`."""
    return {
        "storage": {"url": f"sqlite:///{out.resolve() / 'observer.db'}"},
        "reports": {"output_dir": str(out.resolve() / "reports"), "language": language},
    }


def _soak_end(spec: ScenarioFile, timezone: str) -> dict[str, str]:
    """The soak's end in the settings, so that a verdict built later from the written
    settings covers the simulated days and counts none after them as blind."""
    start = datetime.combine(spec.start, time(), ZoneInfo(timezone))
    return {"soak_ended_at": (start + timedelta(days=spec.days)).isoformat()}


def describe(scenario: Scenario, w: Words) -> list[str]:
    """The settings the scenario runs with, in a few lines a person reads at the start;
    settings' names and values as the settings file spells them."""
    tree = scenario.tree
    controller = tree["controller"]
    fairness = tree["detectors"].get("fairness", {})
    simulation = controller["simulation"]
    windows = w.names(
        [f"{w['name']} {w['days']} {w['start']}-{w['end']}" for w in controller["windows"]]
    )
    tenants = w.names(
        [
            w("demo.tenant", name=t["name"], weight=str(t["weight"]))
            + (w("demo.tenant_quota", gpus=t["quota_gpus"]) if "quota_gpus" in t else "")
            for t in controller["tenants"]
        ]
    )
    probes = sorted({entry["probe"] for entry in controller["plan"]})
    tuned = "; ".join(
        f"{probe} " + ", ".join(f"{k} {v}" for k, v in values.items())
        for probe, values in controller.get("probes", {}).items()
    )
    intervals = ", ".join(f"{k} {v}" for k, v in controller.items() if k.endswith("_seconds"))
    default = FairnessSettings()
    load = scenario.spec.load
    lines = [
        w(
            "demo.scenario",
            name=repr(scenario.spec.name),
            days=scenario.spec.days,
            start=str(scenario.spec.start),
            seed=str(scenario.spec.seed),
            faults=len(scenario.faults),
        ),
        w("demo.windows", timezone=controller["timezone"], windows=windows),
        w(
            "demo.tenants",
            tenants=tenants,
            busy=str(load.busy_factor),
            quiet=str(load.quiet_factor),
        ),
        w("demo.plan", entries=len(controller["plan"]), count=len(probes), probes=", ".join(probes))
        + (f"; {tuned}" if tuned else ""),
        w(
            "demo.simulated",
            nodes=simulation["nodes"],
            gpus=simulation["gpus_per_node"],
            pools=", ".join(simulation["pools"]),
        )
        + f"; gpus_per_node {controller['gpus_per_node']}, "
        f"max_probe_gpus {controller['max_probe_gpus']}, "
        f"max_probe_gpus_per_tenant {controller['max_probe_gpus_per_tenant']}",
        f"controller {intervals}",
    ]
    if fairness:
        lines.append(
            w(
                "demo.fairness",
                k=fairness["persistence_k"],
                m=fairness["persistence_m"],
                default_k=default.persistence_k,
                default_m=default.persistence_m,
            )
        )
    return [
        *lines,
        f"storage.url {tree['storage']['url']}",
        f"reports.output_dir {tree['reports']['output_dir']}, "
        f"reports.language {tree['reports']['language']}",
    ]


def what_would_play(scenario: Scenario, source: str) -> list[str]:
    """`observer demo --check`: the scenario from `source` is valid, and what playing it
    would play: the settings as `describe` gives them, then each plan entry and each fault
    with its local times, as the files spell them."""
    w = Words(scenario.settings.reports.language, scenario.timezone)
    plan = [
        f"plan.{i}: window {e.window}, probe {e.probe}, every_seconds {e.every_seconds:g}, "
        f"tenants {', '.join(e.tenants) or 'all'}"
        for i, e in enumerate(scenario.settings.controller.plan)
    ]
    faults = [
        f"faults.{i}: {fault.describe()} at {fault.at:%Y-%m-%d %H:%M}"
        + (f" until {fault.until:%Y-%m-%d %H:%M}" if fault.until else "")
        for i, fault in enumerate(scenario.faults)
    ]
    return [
        w("demo.valid", scenario=source),
        *(f"  {line}" for line in [*describe(scenario, w), *plan, *faults]),
    ]


class Load:
    """The other tenants' jobs the probes compete with: training jobs of a few GPUs, more of
    them through the windows than outside."""

    # Jobs per tenant per round at factor 1 (a choice of these); the GPUs and minutes of each.
    _PER_TENANT = (2, 3, 4)
    _GPUS = (1, 2, 2, 4)
    _MINUTES = (10.0, 30.0)

    def __init__(
        self,
        cluster: SimulatedCluster,
        tenants: Sequence[str],
        load: LoadSpec,
        seed: int,
        rounds_per_hour: float,
    ) -> None:
        self._cluster = cluster
        self._tenants = tenants
        self._rng = random.Random(seed)
        gpus = sum(node.gpus for node in cluster.nodes.values())
        # GPUs one job holds on average over a round: its GPUs x its minutes / a round's.
        per_job = sum(self._GPUS) / len(self._GPUS) * sum(self._MINUTES) / 2 * rounds_per_hour / 60
        per_round = sum(self._PER_TENANT) / len(self._PER_TENANT) * len(tenants) * per_job
        self._scale = {
            True: load.busy_factor * gpus / per_round,
            False: load.quiet_factor * gpus / per_round,
        }

    def submit(self, busy: bool) -> None:
        """One round: each tenant a number of jobs whose GPUs, over their minutes, come to the
        load's factor of the cluster."""
        scale = self._scale[busy]
        for tenant in self._tenants:
            for _ in range(self._count(scale)):
                gpus = self._rng.choice(self._GPUS)
                minutes = self._rng.uniform(*self._MINUTES)
                self._cluster.submit_background(
                    tenant, Workload(gpus, duration_seconds=minutes * 60)
                )

    def _count(self, scale: float) -> int:
        wanted = self._rng.choice(self._PER_TENANT) * scale
        whole = int(wanted)
        return whole + (self._rng.random() < wanted - whole)
