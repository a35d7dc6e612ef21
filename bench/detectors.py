"""Rule conformance on scripted cases: each rule against faults scripted to its own definition.

Each scenario runs the real detector code (the agent's node detectors over a fake node, the
controller's detection over the simulated cluster) on a manual clock, injects faults of one
kind at known times on known subjects, and scores the findings against them: a finding of the
fault's detector on the fault's subject, opened while the fault is on (or within two
sampling intervals after it ends), is a hit; any other finding is a false alarm. Each fault
is what its rule describes and the fault-free stretches are clean by construction, so a
precision and recall of 1.0 show that the rules do what they say, not how well they detect
faults in the wild: detection quality, with confounders, is bench/scenarios.py.

Prints one JSON line: {"measures": "rule conformance on scripted cases", "detectors": {name:
{precision, recall, median_delay_seconds, ...}}}. The delay runs from the fault's start to
the finding's opening, so it includes the hold the rule itself asks for
(`rule_hold_seconds`, from the settings the scenario ran with: a grace period, an idle
threshold, a canary's run to its end); what the observer adds is the delay beyond it.

    .venv/bin/python bench/detectors.py [--seed N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.backends.simulated import SimulatedCluster
from observer.clock import ManualClock
from observer.controller.compose import Sources, Task
from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    Finding,
    GpuIdentity,
    GpuReading,
    GpuSample,
    JobPhase,
    NodeSnapshot,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
    Workload,
)
from observer.fleet.local import LocalFleet
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.logging_setup import configure_logging
from observer.metrics import HEARTBEAT_METRIC, AgentMetrics
from observer.monitoring.fake import Exposition, FakePrometheus, FakeTarget
from observer.ownership.fake import FakeHost
from observer.probes.windows import occurrences
from observer.settings import Settings
from observer.settings.detectors import NodeLeakSettings
from observer.simulation.nights import FIRST_EVENING, ContendedNights
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.database import upgrade
from observer.storage.store import Store

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
MEASURES = "rule conformance on scripted cases"


@dataclass(frozen=True)
class Fault:
    detector: str
    subject: dict[str, str]
    start: datetime
    end: datetime


@dataclass(frozen=True)
class Played:
    """One scenario's outcome: its faults and findings, how long after a fault's end a
    finding still counts, and the hold of each rule it scripts faults for, from the settings
    it ran with."""

    faults: list[Fault]
    findings: list[Finding]
    slack_seconds: float
    hold_seconds: dict[str, float]


@dataclass
class Score:
    faults: int = 0
    hits: int = 0
    findings: int = 0
    false_alarms: int = 0
    delays: list[float] | None = None

    def merged(self, other: Score) -> Score:
        """One detector's scores from two scenarios, as one: a false alarm anywhere counts."""
        return Score(
            self.faults + other.faults,
            self.hits + other.hits,
            self.findings + other.findings,
            self.false_alarms + other.false_alarms,
            [*(self.delays or []), *(other.delays or [])],
        )

    def as_json(self) -> dict[str, float | int | None]:
        delays = self.delays or []
        return {
            "precision": round(self.hits / self.findings, 3) if self.findings else None,
            "recall": round(self.hits / self.faults, 3) if self.faults else None,
            "median_delay_seconds": round(statistics.median(delays), 1) if delays else None,
            "faults": self.faults,
            "findings": self.findings,
            "false_alarms": self.false_alarms,
        }


def score(faults: list[Fault], findings: list[Finding], slack_seconds: float) -> dict[str, Score]:
    scores: dict[str, Score] = {}
    for fault in faults:
        scores.setdefault(fault.detector, Score(delays=[])).faults += 1
    matched: set[int] = set()
    for finding in findings:
        s = scores.setdefault(finding.detector, Score(delays=[]))
        s.findings += 1
        hit = next(
            (
                i
                for i, f in enumerate(faults)
                if i not in matched
                and f.detector == finding.detector
                and all(finding.subject.get(k) == v for k, v in f.subject.items())
                and f.start <= finding.opened_at <= f.end + timedelta(seconds=slack_seconds)
            ),
            None,
        )
        if hit is None:
            s.false_alarms += 1
            continue
        matched.add(hit)
        s.hits += 1
        assert s.delays is not None
        s.delays.append((finding.opened_at - faults[hit].start).total_seconds())
    return scores


class FakeNode:
    """One 8-GPU node whose jobs start, end and misbehave on command."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.gpus = FakeGpuBackend([FakeGpu(f"GPU-{i}") for i in range(8)], clock)
        self.host = FakeHost()
        self.rules = NodeLeakSettings(grace_seconds=30, idle_seconds=120)
        metrics = AgentMetrics(CollectorRegistry())
        self.agent = NodeAgent(
            "n1",
            Sampler(self.gpus, clock, metrics, 60),
            Attributor(self.host, self.host),
            self.rules,
            clock,
            metrics,
        )

    def place(self, gpu: int, pid: int, owner: Owner, used: int, util: int) -> None:
        self.gpus.gpus[gpu].processes[pid] = used
        self.gpus.gpus[gpu].memory_used_bytes = 600 * 2**20 + used
        self.gpus.gpus[gpu].utilization_gpu_percent = util
        self.host.spawn(pid, owner)

    def free(self, gpu: int) -> None:
        for pid in list(self.gpus.gpus[gpu].processes):
            self.host.kill(pid)
        self.gpus.gpus[gpu].processes.clear()
        self.gpus.gpus[gpu].memory_used_bytes = 600 * 2**20
        self.gpus.gpus[gpu].utilization_gpu_percent = 0

    def set_owner(self, owner: Owner, phase: OwnerPhase) -> None:
        ended = self.clock.now() if phase is OwnerPhase.ENDED else None
        self.host.owners[owner] = OwnerState(phase, ended)


KINDS = ("normal", "normal", "unreleased", "orphan", "idle", "vanished", "hidden")


def node_scenario(rng: random.Random, hours: float) -> Played:
    """Jobs come and go on one node, a tick a second; one in three misbehaves: memory kept
    after its job ended, a process in no job, a job idle on its memory, a pid the host no
    longer has, memory held with no process listed."""
    clock = ManualClock(START)
    node = FakeNode(clock)
    faults: list[Fault] = []
    findings: list[Finding] = []
    pids = iter(range(1000, 10**6))
    busy_until: dict[int, datetime] = {}
    later: list[tuple[datetime, Callable[[], None]]] = []
    end = START + timedelta(hours=hours)
    while clock.now() < end:
        now = clock.now()
        for due in [d for d in later if d[0] <= now]:
            due[1]()
            later.remove(due)
        idle = [g for g in range(8) if busy_until.get(g, START) <= now]
        if idle and rng.random() < 0.02:
            gpu, kind = rng.choice(idle), rng.choice(KINDS)
            length = rng.uniform(300, 900)
            until = now + timedelta(seconds=length)
            busy_until[gpu] = until + timedelta(seconds=60)
            owner, pid = Owner(OwnerKind.POD, f"pod-{next(pids)}"), next(pids)
            fault = (
                Fault(_DETECTOR[kind], {"pid": str(pid)}, now, until) if kind in _DETECTOR else None
            )
            if kind == "hidden":
                node.gpus.gpus[gpu].memory_used_bytes = 600 * 2**20 + 8 * GIB
                fault = Fault("memory_without_process", {"gpu_uuid": f"GPU-{gpu}"}, now, until)
            elif kind == "orphan":
                node.place(gpu, pid, Owner(OwnerKind.NONE), 4 * GIB, 0)
            else:
                node.place(gpu, pid, owner, 20 * GIB, 0 if kind in ("idle", "vanished") else 90)
                node.set_owner(owner, OwnerPhase.RUNNING)
                if kind == "vanished":
                    node.host.kill(pid)
            if kind == "unreleased":
                # The job ends halfway; its process keeps the memory to the end.
                ended = now + timedelta(seconds=length / 2)
                later.append((ended, partial(node.set_owner, owner, OwnerPhase.ENDED)))
                fault = Fault("unreleased_memory", {"pid": str(pid)}, ended, until)
            else:
                later.append((until, partial(node.set_owner, owner, OwnerPhase.ENDED)))
            later.append((until, partial(node.free, gpu)))
            if fault is not None:
                faults.append(fault)
        findings += [f for f in node.agent.tick() if f.is_open]
        clock.advance(1)
    rules = node.rules
    # The node rules (detectors/node_leaks.py): the grace, unreleased_memory's counted from
    # the owner's end; allocated_idle the idle threshold.
    holds = {
        "unreleased_memory": rules.grace_seconds,
        "orphan_process": rules.grace_seconds,
        "vanished_process": rules.grace_seconds,
        "memory_without_process": rules.grace_seconds,
        "allocated_idle": rules.idle_seconds,
    }
    # A fault due to begin after the run ended was never shown to the detectors.
    return Played([f for f in faults if f.start < end], findings, 2.0, holds)


_DETECTOR = {"orphan": "orphan_process", "idle": "allocated_idle", "vanished": "vanished_process"}


def cluster_scenario(rng: random.Random, hours: float) -> Played:
    """The simulated cluster under the real controller: leaked GPU allocations on random
    nodes for random stretches, and log canaries of which some lose a stretch of lines."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.model_validate(
            {
                "controller": {
                    "windows": [{"name": "always", "days": "*", "start": "00:00", "end": "00:00"}],
                    "plan": [
                        {"window": "always", "probe": "log-canary", "every_seconds": 900},
                        {"window": "always", "probe": "short", "every_seconds": 300},
                    ],
                    "probes": {"log-canary": {"log_lines": 600, "log_interval_seconds": 0.1}},
                    "logs": {"settle_seconds": 30},
                    "follow_interval_seconds": 5,
                    "snapshot_interval_seconds": 15,
                    "simulation": {"nodes": 6, "gpus_per_node": 8, "pools": ["a", "b"]},
                },
                "detectors": {"node": {"grace_seconds": 30}},
            }
        )
        clock = ManualClock(START)
        schedule, cluster = _soak(settings, clock, Path(tmp))
        store = schedule.store
        cfg = settings.controller
        faults: list[Fault] = []
        end = START + timedelta(hours=hours)
        nodes = sorted(cluster.nodes)
        # Half the canary launches (every 900 s) lose the lines written 10-20 s in.
        for launch in range(900, int(hours * 3600), 900):
            if rng.random() < 0.5:
                at = START + timedelta(seconds=launch)
                cluster.faults.log_loss.append(
                    (at + timedelta(seconds=10), at + timedelta(seconds=20))
                )
        while clock.now() < end:
            # A leak on a random node for 5-20 minutes, then 10-30 fault-free minutes.
            node = rng.choice(nodes)
            leak = timedelta(minutes=rng.uniform(5, 20))
            cluster.faults.leaked_gpus[node] = rng.randint(1, 3)
            began = clock.now()
            schedule.run_for(leak.total_seconds())
            faults.append(Fault("allocated_without_job", {"node": node}, began, clock.now()))
            cluster.faults.leaked_gpus.clear()
            schedule.run_for(rng.uniform(10, 30) * 60)
        schedule.run_for(600)  # let the last canaries be read back
        for run in store.runs(probe="log-canary"):
            if run.started_at is None or run.finished_at is None:
                continue
            written = (run.started_at, run.started_at + timedelta(seconds=60))
            if any(a < written[1] and written[0] < b for a, b in cluster.faults.log_loss):
                # An event finding is stamped with the run's end: it counts when it lands by
                # then plus the settle time.
                faults.append(
                    Fault("log_loss", {"run_id": run.run_id}, run.started_at, run.finished_at)
                )
        findings = [f for f in store.findings() if f.detector != "log_delivery_latency"]
        store.close()
        holds = {
            # The controller holds it for the node rules' grace (controller/detect.py).
            "allocated_without_job": settings.detectors.node.grace_seconds,
            # An event stamped with the run's end: the canary's run, which the simulated
            # cluster plays for its workload's duration.
            "log_loss": schedule.controller.catalog["log-canary"].workload.duration_seconds,
        }
    return Played(faults, findings, 2 * cfg.snapshot_interval_seconds, holds)


def fairness_scenario(rng: random.Random, hours: float) -> Played:
    """Two tenants (weights 0.7 / 0.3) over persistence_m nights of contention (every night
    the rule weighs; 22:00-01:00 in Shanghai), fairness probes every quarter of an hour,
    background training keeping demand above the 12 GPUs: under fair share (nothing to
    find), then with a scheduler that always serves one tenant first, each in turn (the other
    is disadvantaged from the first night on; the rule can tell after K nights). `hours` does
    not apply."""
    faults: list[Fault] = []
    findings: list[Finding] = []
    holds: dict[str, float] = {}
    for favoured in (None, "prod", "research"):
        with tempfile.TemporaryDirectory() as tmp:
            nights = ContendedNights(
                Path(tmp), lambda: Workload(1, duration_seconds=rng.uniform(400, 800))
            )
            rules = nights.settings.detectors.fairness
            nights.cluster.faults.favoured_tenant = favoured
            for _ in range(rules.persistence_m):
                nights.night()
            window = nights.settings.controller.windows[0].name
            occurred = occurrences(
                nights.controller.calendar, window, FIRST_EVENING, nights.clock.now()
            )
            # The condition opens as the K-th disadvantaged night completes: K - 1 days and
            # the window's length after the first night's start.
            first, kth = occurred[0], occurred[rules.persistence_k - 1]
            holds["persistent_unfairness"] = (kth.end - first.start).total_seconds()
            if favoured is not None:
                other = "research" if favoured == "prod" else "prod"
                faults.append(
                    Fault(
                        "persistent_unfairness", {"tenant": other}, first.start, nights.clock.now()
                    )
                )
            findings += nights.store.findings(detector="persistent_unfairness")
            nights.store.close()
    return Played(faults, findings, 2 * 15.0, holds)


def unexplained_scenario(rng: random.Random, hours: float) -> Played:
    """Probes of two tenants every five and seven minutes on 6 x 8 GPUs. Each fault-free
    stretch begins with background training filling the cluster for a while, so probes
    really wait, for the reasons the scheduler gives; faults make the scheduler hold one
    tenant's jobs whatever is free, with no reason or with 'Resources' while GPUs are free.
    A run held longer than the grace plus two follow intervals must be reported; one held
    less may or may not be, and is scored neither way."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.model_validate(
            {
                "controller": {
                    "windows": [{"name": "always", "days": "*", "start": "00:00", "end": "00:00"}],
                    "tenants": [
                        {"name": "research", "weight": 0.7},
                        {"name": "prod", "weight": 0.3},
                    ],
                    "plan": [
                        {"window": "always", "probe": "fairness", "every_seconds": 300},
                        {"window": "always", "probe": "short", "every_seconds": 420},
                    ],
                    "follow_interval_seconds": 15,
                    "snapshot_interval_seconds": 15,
                    "simulation": {"nodes": 6, "gpus_per_node": 8, "pools": ["a"]},
                },
            }
        )
        clock = ManualClock(START)
        schedule, cluster = _soak(settings, clock, Path(tmp))
        store = schedule.store
        cfg = settings.controller
        held: list[tuple[str, datetime, datetime]] = []
        end = START + timedelta(hours=hours)
        while clock.now() < end:
            for _ in range(rng.randint(0, 6)):  # whole nodes busy for 5-8 minutes
                training = Workload(8, duration_seconds=rng.uniform(300, 480))
                cluster.submit_background("research", training)
            schedule.run_for(rng.uniform(10, 30) * 60)
            tenant = rng.choice(["research", "prod"])
            cluster.faults.held_tenants[tenant] = rng.choice(["", "Resources"])
            began = clock.now()
            schedule.run_for(rng.uniform(10, 20) * 60)
            cluster.faults.held_tenants.clear()
            held.append((tenant, began, clock.now()))
        schedule.run_for(600)
        grace = settings.detectors.fairness.unexplained_wait_grace_seconds
        limit = grace + 2 * cfg.follow_interval_seconds
        faults: list[Fault] = []
        unscored: set[str] = set()
        for run in store.runs():
            for tenant, began, ended in held:
                if run.tenant != tenant or run.submitted_at is None or run.submitted_at >= ended:
                    continue
                if run.started_at is not None and run.started_at < began:
                    continue  # it started before the hold
                start = max(run.submitted_at, began)
                stop = min(ended, run.finished_at or ended)
                if (stop - start).total_seconds() > limit:
                    faults.append(Fault("unexplained_wait", {"run_id": run.run_id}, start, stop))
                else:
                    unscored.add(run.run_id)
        findings = [
            f
            for f in store.findings(detector="unexplained_wait")
            if f.subject["run_id"] not in unscored
        ]
        store.close()
    return Played(faults, findings, 2 * cfg.follow_interval_seconds, {"unexplained_wait": grace})


MONITORING_INTERVAL_SECONDS = 15.0
UTIL = "observer_gpu_utilization_ratio"
LAG_FAULTS = ("heartbeat", "target_down", "scrape_stalled", "paused", "flatline", "busy_lag")


def monitoring_scenario(rng: random.Random, hours: float) -> Played:
    """The controller's monitoring-lag watch over the scripted Prometheus scraping the
    observer's heartbeat and four 4-GPU agents every 15 s, the agents' own readings the
    same numbers; a GPU-busy probe at the start of every fault-free stretch. Faults, one at
    a time for 8-15 minutes: the heartbeat ingested late; an agent that stops answering; an
    agent Prometheus stops scraping; Prometheus paused; a GPU series frozen; the agents'
    samples ingested late while a GPU-busy probe runs. Each is scored on the checks it must
    open (`monitoring_lag.<check>`)."""
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = _MonitoredCluster(Path(tmp))
        faults: list[Fault] = []
        end = START + timedelta(hours=hours)
        kinds = itertools.cycle(rng.sample(LAG_FAULTS, len(LAG_FAULTS)))  # each as often
        while pipeline.clock.now() < end:
            pipeline.launch_busy_probe()
            pipeline.run_for(rng.uniform(10, 20) * 60)
            began = pipeline.clock.now()
            expected, undo = pipeline.inject(next(kinds), rng)
            pipeline.run_for(rng.uniform(8, 15) * 60)
            undo()
            for detector, subject in expected:
                faults.append(Fault(detector, subject, began, pipeline.clock.now()))
        pipeline.run_for(600)
        findings = [
            replace(f, detector=f"monitoring_lag.{f.subject['check']}")
            if f.detector == "monitoring_lag"
            else f
            for f in pipeline.store.findings()
            if f.detector in ("monitoring_lag", "prometheus_unreachable")
        ]
        pipeline.store.close()
    # detectors/monitoring_lag.py: past a lag or age limit, a symptom waits the hold before
    # its condition opens; flat-line and busy-lag span their own window and open at once.
    rules = pipeline.settings.detectors.monitoring_lag
    holds = {
        "monitoring_lag.heartbeat": rules.heartbeat_max_lag_seconds + rules.hold_seconds,
        "monitoring_lag.freshness": rules.series_max_age_seconds + rules.hold_seconds,
        # a failed scrape; a stalled one is past scrape_max_age_seconds first
        "monitoring_lag.scrape": rules.hold_seconds,
        # Prometheus keeps the value of its last scrape before the freeze and a window's
        # samples span one interval less: the line can show up to two scrapes sooner.
        "monitoring_lag.flatline": rules.flatline_window_seconds,
        "monitoring_lag.gpu_busy_lag": rules.busy_lag_max_seconds,
        "prometheus_unreachable": rules.hold_seconds,
    }
    return Played(faults, findings, 2 * MONITORING_INTERVAL_SECONDS, holds)


class _MonitoredCluster:
    """The simulated cluster's nodes as their agents read them and as their exporters show
    them to the scripted Prometheus: the same utilisation, moving every scrape interval, and
    0.97 on a GPU a GPU-busy probe holds (GPUs handed out in job order)."""

    def __init__(self, tmp: Path) -> None:
        self.settings = Settings.model_validate(
            {
                "controller": {
                    "windows": [{"name": "always", "days": "*", "start": "00:00", "end": "00:00"}],
                    "plan": [],
                    "probes": {"gpu-busy": {"duration_seconds": 300}},
                    "follow_interval_seconds": 5,
                    "snapshot_interval_seconds": 15,
                    "monitoring_interval_seconds": MONITORING_INTERVAL_SECONDS,
                    "heartbeat_labels": {"job": "observer"},
                    "simulation": {"nodes": 4, "gpus_per_node": 4, "pools": ["a"]},
                },
                "detectors": {"monitoring_lag": {"freshness_series": [UTIL]}},
            }
        )
        self.clock = ManualClock(START)
        self.prometheus = FakePrometheus(self.clock, scrape_interval_seconds=15)
        self.observer = self.prometheus.add_target(
            "observer", "controller:9401", lambda at: [(HEARTBEAT_METRIC, {}, at.timestamp())]
        )
        nodes = [f"node-{i:03d}" for i in range(self.settings.controller.simulation.nodes)]
        self.agents = {
            node: self.prometheus.add_target("agent", f"{node}:9400", partial(self._export, node))
            for node in nodes
        }
        fleet = LocalFleet({node: partial(self._snapshot, node) for node in nodes})
        self.schedule, self.cluster = _soak(
            self.settings,
            self.clock,
            tmp,
            Sources(fleet, self.prometheus),
            agents=[Task("prometheus", 5, self.prometheus.play)],
        )
        self.store = self.schedule.store
        self.controller = self.schedule.controller
        self.nodes = sorted(self.cluster.nodes)
        assert self.nodes == nodes

    def run_for(self, seconds: float) -> None:
        self.schedule.run_for(seconds, partial(self.clock.advance, 5))

    def launch_busy_probe(self) -> None:
        self.controller.runner.launch(self.controller.catalog["gpu-busy"], ("research",), "always")

    def inject(
        self, kind: str, rng: random.Random
    ) -> tuple[list[tuple[str, dict[str, str]]], Callable[[], None]]:
        """Break the pipeline one way; the conditions it must open, and how to mend it."""
        node = rng.choice(self.nodes)
        target = self.agents[node]
        instance = {"check": "scrape", "instance": f"{node}:9400"}
        if kind == "heartbeat":
            self.observer.ingest_delay_seconds = rng.uniform(150, 300)
            return [("monitoring_lag.heartbeat", {})], partial(self._delay, [self.observer], 0)
        if kind == "target_down":
            target.answering = False
            return [("monitoring_lag.scrape", instance)], partial(
                setattr, target, "answering", True
            )
        if kind == "scrape_stalled":
            target.scraped = False
            return [
                ("monitoring_lag.scrape", instance),
                ("monitoring_lag.freshness", {}),
            ], partial(setattr, target, "scraped", True)
        if kind == "paused":
            self.prometheus.pause()
            return [("prometheus_unreachable", {})], self.prometheus.resume
        if kind == "flatline":
            uuid = f"GPU-{node}-{rng.randrange(4)}"
            self.prometheus.freeze({"uuid": uuid})
            series = f'{UTIL}{{uuid="{uuid}"}}'
            return [("monitoring_lag.flatline", {"series": series})], partial(
                self.prometheus.thaw, {"uuid": uuid}
            )
        agents = list(self.agents.values())
        self._delay(agents, rng.uniform(120, 200))
        self.launch_busy_probe()
        return [
            ("monitoring_lag.gpu_busy_lag", {}),
            ("monitoring_lag.freshness", {}),
        ], partial(self._delay, agents, 0)

    def _delay(self, targets: list[FakeTarget], seconds: float) -> None:
        for target in targets:
            target.ingest_delay_seconds = seconds

    def _busy(self) -> dict[tuple[str, int], str]:
        """(node, GPU index) -> the GPU-busy job on it."""
        taken: dict[tuple[str, int], str] = {}
        for job in sorted(self.cluster.snapshot().jobs, key=lambda j: j.job_id):
            if job.phase is JobPhase.RUNNING:
                for node in job.nodes:
                    taken[(node, sum(1 for n, _ in taken if n == node))] = job.job_id
        return taken

    def _utilization(self, node: str, gpu: int, at: datetime, busy: set[tuple[str, int]]) -> float:
        if (node, gpu) in busy:
            return 0.97
        tick = int((at - START).total_seconds()) // 15
        return round(0.1 + 0.01 * ((tick * 7 + gpu * 13 + self.nodes.index(node) * 5) % 30), 2)

    def _export(self, node: str, at: datetime) -> Exposition:
        busy = set(self._busy())
        return [
            (UTIL, {"uuid": f"GPU-{node}-{i}", "gpu": str(i)}, self._utilization(node, i, at, busy))
            for i in range(4)
        ]

    def _snapshot(self, node: str) -> NodeSnapshot:
        now = self.clock.now()
        busy = self._busy()
        gpus = tuple(
            GpuReading(
                i,
                GpuIdentity(i, f"GPU-{node}-{i}", "NVIDIA H200", None, None),
                GpuSample(
                    now,
                    i,
                    utilization_gpu_percent=round(100 * self._utilization(node, i, now, set(busy))),
                ),
                None,
                None,
            )
            for i in range(4)
        )
        processes = tuple(
            AttributedProcess(
                gpu_index=i,
                gpu_uuid=f"GPU-{node}-{i}",
                pid=5000 + i,
                used_memory_bytes=2**30,
                exists=True,
                command="gpu-burn",
                owner=Owner(OwnerKind.SLURM_JOB, job),
                owner_state=OwnerState(OwnerPhase.RUNNING),
            )
            for (n, i), job in busy.items()
            if n == node
        )
        return NodeSnapshot(node, now, DriverStatus(DriverState.OK), gpus, processes, ())


RELEASE_PLAN = [{"window": "always", "probe": "short", "every_seconds": 120}]


class _ProbeNodes:
    """The simulated cluster's nodes as their agents see them: each job the scheduler shows
    on a node (running, or ending while it holds its GPUs) has one process per GPU there,
    owned by its job id, on its node's least used GPUs. A job in `leave` keeps its
    processes after the scheduler let it go, until the given moment."""

    def __init__(self, cluster: SimulatedCluster, clock: ManualClock) -> None:
        self.cluster = cluster
        self.clock = clock
        self.leave: dict[str, datetime] = {}  # job id -> when its leftovers go
        self.on_end: Callable[[str], None] = lambda job_id: None
        self._placed: dict[str, tuple[str, tuple[int, ...]]] = {}  # job id -> node, GPUs

    def read(self) -> None:
        """Once per agent read: follow the scheduler's placements."""
        now = self.clock.now()
        holding = {
            j.job_id: j
            for j in self.cluster.snapshot().jobs
            if j.nodes and (j.phase is JobPhase.RUNNING or j.ending_since is not None)
        }
        for job_id in [k for k in self._placed if k not in holding]:
            self.on_end(job_id)
            if self.leave.get(job_id, now) <= now:
                del self._placed[job_id]
        for job in holding.values():
            if job.job_id not in self._placed:
                node = job.nodes[0]
                # The scheduler sees a leftover's GPU as free: the next job may share it.
                used = Counter(g for n, gpus in self._placed.values() if n == node for g in gpus)
                least = sorted(range(self.cluster.nodes[node].gpus), key=lambda g: used[g])
                self._placed[job.job_id] = (node, tuple(least[: job.gpus // len(job.nodes)]))

    def snapshot(self, node: str) -> NodeSnapshot:
        now = self.clock.now()
        processes = [
            AttributedProcess(
                gpu,
                f"GPU-{node}-{gpu}",
                10_000 + n,
                20 * GIB,
                True,
                "python probe.py",
                Owner(OwnerKind.JOB, job_id),
                OwnerState(OwnerPhase.UNKNOWN),
            )
            for n, (job_id, (where, gpus)) in enumerate(self._placed.items())
            if where == node
            for gpu in gpus
        ]
        baseline = 600 * 2**20
        gpus = tuple(
            GpuReading(
                i,
                GpuIdentity(i, f"GPU-{node}-{i}", "NVIDIA H200", 141 * GIB, None),
                GpuSample(
                    now,
                    i,
                    memory_used_bytes=baseline
                    + 20 * GIB * sum(p.gpu_index == i for p in processes),
                ),
                None,
                baseline,
            )
            for i in range(self.cluster.nodes[node].gpus)
        )
        return NodeSnapshot(node, now, DriverStatus(DriverState.OK), gpus, tuple(processes), ())


def _probe_cluster(
    tmp: Path, agents: bool
) -> tuple[Store, SimulatedCluster, ManualClock, SimulatedSoak, _ProbeNodes]:
    """Short probes every two minutes on 6 x 8 GPUs under the real controller, with the
    nodes' agents read every 15 s through the controller's fleet reader when `agents`."""
    settings = Settings.model_validate(
        {
            "controller": {
                "windows": [{"name": "always", "days": "*", "start": "00:00", "end": "00:00"}],
                "plan": RELEASE_PLAN,
                "follow_interval_seconds": 5,
                "snapshot_interval_seconds": 15,
                "simulation": {"nodes": 6, "gpus_per_node": 8, "pools": ["a", "b"]},
            }
        }
    )
    clock = ManualClock(START)
    cluster = simulated_cluster(settings, clock)
    nodes = _ProbeNodes(cluster, clock)
    sources = None
    tasks = []
    if agents:
        sources = Sources(
            LocalFleet({node: partial(nodes.snapshot, node) for node in cluster.nodes})
        )
        tasks = [Task("agents", 15.0, nodes.read)]
    schedule, _ = _soak(settings, clock, tmp, sources, agents=tasks, cluster=cluster)
    return schedule.store, cluster, clock, schedule, nodes


def probe_release_scenario(rng: random.Random, hours: float) -> Played:
    """The controlled experiment: of the short probes that end, one in three leaves its
    process on its GPU for 5-20 minutes after the scheduler has let the job go (the rest,
    and the stretches between, are fault-free)."""
    with tempfile.TemporaryDirectory() as tmp:
        store, _, clock, schedule, nodes = _probe_cluster(Path(tmp), agents=True)

        end = START + timedelta(hours=hours)

        def ended(job_id: str) -> None:
            if job_id not in nodes.leave and clock.now() < end and rng.random() < 1 / 3:
                nodes.leave[job_id] = clock.now() + timedelta(minutes=rng.uniform(5, 20))

        nodes.on_end = ended
        schedule.run_for(hours * 3600 + 1800)  # fault-free at the end: the last ones are found
        runs = {run.job_id: run for run in store.runs(probe="short")}
        faults = [
            Fault("probe_unreleased", {"run_id": runs[job_id].run_id}, finished_at, until)
            for job_id, until in nodes.leave.items()
            if (finished_at := runs[job_id].finished_at) is not None
        ]
        findings = store.findings()
        store.close()
    # The probe's grace, from its end.
    grace = schedule.settings.detectors.probe_release.grace_seconds
    return Played(faults, findings, 2 * 15.0, {"probe_unreleased": grace})


def stuck_scenario(rng: random.Random, hours: float) -> Played:
    """A short probe's job that will not go once it ends (a pod stuck Terminating, a job
    stuck COMPLETING) for 5-20 minutes, then 10-30 fault-free minutes; no agent is read, so
    this is the scheduler's layer alone."""
    with tempfile.TemporaryDirectory() as tmp:
        store, cluster, clock, schedule, _ = _probe_cluster(Path(tmp), agents=False)
        faults: list[Fault] = []
        end = START + timedelta(hours=hours)
        while clock.now() < end:
            running = [
                j for j in cluster.snapshot().jobs if j.run_id and j.phase is JobPhase.RUNNING
            ]
            if not running:
                schedule.run_for(15)
                continue
            job_id = rng.choice(running).job_id
            cluster.faults.stuck_jobs.add(job_id)
            schedule.run_for(rng.uniform(5, 20) * 60)
            finished_at = cluster.jobs([job_id])[job_id].finished_at
            cluster.faults.stuck_jobs.discard(job_id)
            if finished_at is not None:  # it ended while stuck: it held on
                faults.append(
                    Fault("stuck_terminating", {"job_id": job_id}, finished_at, clock.now())
                )
            schedule.run_for(rng.uniform(10, 30) * 60)
        findings = store.findings()
        store.close()
    # The grace, from the platform's start of the job's end.
    grace = schedule.settings.detectors.stuck_terminating.grace_seconds
    return Played(faults, findings, 2 * 15.0, {"stuck_terminating": grace})


def _soak(
    settings: Settings,
    clock: ManualClock,
    tmp: Path,
    sources: Sources | None = None,
    *,
    agents: Sequence[Task] = (),
    cluster: SimulatedCluster | None = None,
) -> tuple[SimulatedSoak, SimulatedCluster]:
    """The production composition over the simulated cluster, with a store in `tmp`."""
    url = f"sqlite:///{tmp / 'observer.db'}"
    upgrade(url)
    cluster = cluster or simulated_cluster(settings, clock)
    return SimulatedSoak(settings, clock, Store(url), cluster, sources, agents=agents), cluster


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hours", type=float, default=8.0)
    args = parser.parse_args()
    configure_logging("warning")  # the findings are scored, not logged; stdout is the result
    rng = random.Random(args.seed)
    scores: dict[str, Score] = {}
    holds: dict[str, float] = {}
    for scenario in (
        node_scenario,
        cluster_scenario,
        fairness_scenario,
        unexplained_scenario,
        monitoring_scenario,
        probe_release_scenario,
        stuck_scenario,
    ):
        played = scenario(rng, args.hours)
        holds |= played.hold_seconds
        for name, s in score(played.faults, played.findings, played.slack_seconds).items():
            scores[name] = scores[name].merged(s) if name in scores else s
    results = {
        name: {**s.as_json(), "rule_hold_seconds": holds.get(name)} for name, s in scores.items()
    }
    print(
        json.dumps(
            {"measures": MEASURES, "detectors": results, "seed": args.seed, "hours": args.hours}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
