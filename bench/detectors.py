"""Detection quality on scripted scenarios with injected faults and fault-free stretches.

Each scenario runs the real detector code (the agent's node detectors over a fake node, the
controller's detection over the simulated cluster) on a manual clock, injects faults of one
kind at known times on known subjects, and scores the findings against them: a finding of the
fault's detector on the fault's subject, opened while the fault is on (or within two
sampling intervals after it ends), is a hit; any other finding is a false alarm.

Prints one JSON line: {"detectors": {name: {precision, recall, median_delay_seconds, ...}}}.
The delay runs from the fault's start to the finding's opening, so it includes the hold the
rule itself asks for (`rule_hold_seconds`: a grace period, an idle threshold, a canary's run
to its end); what the observer adds is the delay beyond it.

    .venv/bin/python bench/detectors.py [--seed N]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.service import NodeAgent
from observer.clock import ManualClock
from observer.controller.main import build_backend, build_controller
from observer.domain import Finding, Owner, OwnerKind, OwnerPhase, OwnerState
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.metrics import AgentMetrics, ControllerMetrics
from observer.ownership.fake import FakeHost
from observer.settings import NodeLeakSettings, Settings
from observer.simulation.cluster import SimulatedCluster
from observer.simulation.driver import SteppedSchedule
from observer.storage.store import Store, upgrade

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Fault:
    detector: str
    subject: dict[str, str]
    start: datetime
    end: datetime


@dataclass
class Score:
    faults: int = 0
    hits: int = 0
    findings: int = 0
    false_alarms: int = 0
    delays: list[float] | None = None

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
        rules = NodeLeakSettings(grace_seconds=30, idle_seconds=120)
        metrics = AgentMetrics(CollectorRegistry())
        self.agent = NodeAgent(
            "n1",
            Sampler(self.gpus, clock, metrics, 60),
            Attributor(self.host, self.host),
            rules,
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


def node_scenario(rng: random.Random, hours: float) -> tuple[list[Fault], list[Finding], float]:
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
                later.append((ended, lambda o=owner: node.set_owner(o, OwnerPhase.ENDED)))
                fault = Fault("unreleased_memory", {"pid": str(pid)}, ended, until)
            else:
                later.append((until, lambda o=owner: node.set_owner(o, OwnerPhase.ENDED)))
            later.append((until, lambda g=gpu: node.free(g)))
            if fault is not None:
                faults.append(fault)
        findings += [f for f in node.agent.tick() if f.is_open]
        clock.advance(1)
    # A fault due to begin after the run ended was never shown to the detectors.
    return [f for f in faults if f.start < end], findings, 2.0


# What each rule waits for by design in these scenarios (see their settings above).
RULE_HOLD_SECONDS = {
    "unreleased_memory": 30.0,
    "orphan_process": 30.0,
    "vanished_process": 30.0,
    "memory_without_process": 30.0,
    "allocated_idle": 120.0,
    "allocated_without_job": 30.0,
    "log_loss": 120.0,
}
_DETECTOR = {"orphan": "orphan_process", "idle": "allocated_idle", "vanished": "vanished_process"}


def cluster_scenario(rng: random.Random, hours: float) -> tuple[list[Fault], list[Finding], float]:
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
                    "log_settle_seconds": 30,
                    "follow_interval_seconds": 5,
                    "snapshot_interval_seconds": 15,
                    "simulation": {"nodes": 6, "gpus_per_node": 8, "pools": ["a", "b"]},
                },
                "detectors": {"node": {"grace_seconds": 30}},
            }
        )
        clock = ManualClock(START)
        url = f"sqlite:///{Path(tmp) / 'observer.db'}"
        upgrade(url)
        store = Store(url)
        cluster = build_backend(settings.controller, clock)
        assert isinstance(cluster, SimulatedCluster)
        metrics = ControllerMetrics(CollectorRegistry())
        controller = build_controller(settings, cluster, store, clock, metrics)
        controller.start()
        cfg = settings.controller
        schedule = SteppedSchedule(
            controller,
            clock,
            metrics.loops,
            cfg.follow_interval_seconds,
            cfg.snapshot_interval_seconds,
        )
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
    return faults, findings, 2 * cfg.snapshot_interval_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hours", type=float, default=8.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results: dict[str, dict[str, float | int | None]] = {}
    for scenario in (node_scenario, cluster_scenario):
        faults, findings, slack = scenario(rng, args.hours)
        for name, s in score(faults, findings, slack).items():
            results[name] = {**s.as_json(), "rule_hold_seconds": RULE_HOLD_SECONDS.get(name)}
    print(json.dumps({"detectors": results, "seed": args.seed, "hours": args.hours}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
