"""What the demo plays: its platform and plan (as settings), the other tenants' load, and the
faults it injects at known local times, each saying which findings it must produce.

Scoring is plain: a finding is explained by a fault when it is of one of the fault's
detectors, its subject carries the fault's subject, and it opened while the fault was on
(or within the slack after). A fault nobody found, or a finding no fault explains, is what
the demo exists to show does not happen."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from observer.backends.simulated import SimulatedCluster
from observer.domain import Finding, Workload
from observer.settings import Settings

TIMEZONE = ZoneInfo("Asia/Shanghai")
NODES = 6
GPUS_PER_NODE = 8
# Time to see a fault through: the node rule's grace, a snapshot, a detection cycle.
MATCH_SLACK = timedelta(minutes=5)


def settings(out: Path, language: str) -> Settings:
    """Three tenants with different weights on six 8-GPU nodes in two pools, a weekday peak
    and a night window in Shanghai, the full probe plan."""
    # Launches due at the same moment go in this order, the rarer probes first.
    plan: list[dict[str, Any]] = [
        {"window": "weekday-peak", "probe": "quota", "every_seconds": 3600, "tenants": ["batch"]},
        {"window": "night", "probe": "long", "every_seconds": 3600},
    ]
    every_probe_in = [
        ("isolation", 3600),
        ("fail-image", 3600),
        ("multi-gpu", 1800),
        ("fail-exit", 1800),
        ("log-canary", 1800),
        ("fairness", 1200),
        ("gpu-busy", 900),
        ("short", 600),
    ]
    plan += [
        {"window": window, "probe": probe, "every_seconds": every}
        for window in ("weekday-peak", "night")
        for probe, every in every_probe_in
    ]
    return Settings.model_validate(
        {
            "controller": {
                "timezone": str(TIMEZONE),
                "windows": [
                    {"name": "weekday-peak", "days": "mon-fri", "start": "10:00", "end": "12:00"},
                    {"name": "night", "days": "*", "start": "02:00", "end": "04:00"},
                ],
                "tenants": [
                    {"name": "research", "weight": 0.5},
                    {"name": "prod", "weight": 0.3},
                    {"name": "batch", "weight": 0.2, "quota_gpus": 8},
                ],
                "plan": plan,
                "probes": {"log-canary": {"log_lines": 600, "log_interval_seconds": 0.1}},
                "gpus_per_node": GPUS_PER_NODE,
                "max_probe_gpus": 48,
                "max_probe_gpus_per_tenant": 24,
                "follow_interval_seconds": 5,
                "snapshot_interval_seconds": 30,
                "observe_interval_seconds": 30,
                "gpu_sample_interval_seconds": 60,
                "log_settle_seconds": 30,
                "heartbeat_labels": {"job": "observer-controller"},
                "simulation": {
                    "nodes": NODES,
                    "gpus_per_node": GPUS_PER_NODE,
                    "pools": ["h200-a", "h200-b"],
                },
            },
            "detectors": {"fairness": {"persistence_k": 2, "persistence_m": 3}},
            "storage": {"url": f"sqlite:///{out / 'observer.db'}"},
            "reports": {"output_dir": str(out / "reports"), "language": language},
        }
    )


def local(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=TIMEZONE)


class Load:
    """The other tenants' jobs the probes compete with: training jobs of half a node or a
    whole one, more of them through the windows than outside."""

    def __init__(self, cluster: SimulatedCluster, seed: int = 7) -> None:
        self._cluster = cluster
        self._rng = random.Random(seed)

    def submit(self, busy: bool) -> None:
        """One round, every five minutes: in a window each tenant asks for about half the
        cluster, so demand is half as much again as there is and the scheduler's shares
        decide; outside, a trickle."""
        for tenant in ("research", "prod", "batch"):
            for _ in range(self._rng.choice((2, 3, 4)) if busy else self._rng.choice((0, 0, 1))):
                gpus = self._rng.choice((1, 2, 2, 4))
                minutes = self._rng.uniform(10, 30)
                self._cluster.submit_background(
                    tenant, Workload(gpus, duration_seconds=minutes * 60)
                )


@dataclass
class Fault:
    """An injected fault: what a person would call it, the detectors that must report it, the
    subject their findings name, and when it was on."""

    name: str
    detectors: frozenset[str]
    start: datetime
    end: datetime | None = None
    subject: dict[str, str] = field(default_factory=dict)

    def explains(self, finding: Finding) -> bool:
        end = (self.end or finding.opened_at) + MATCH_SLACK
        return (
            finding.detector in self.detectors
            and all(finding.subject.get(k) == v for k, v in self.subject.items())
            and self.start <= finding.opened_at <= end
        )


@dataclass(frozen=True)
class Score:
    found: Mapping[str, list[Finding]]  # fault name -> the findings it explains
    missed: list[Fault]
    unexpected: list[Finding]


def score(faults: Sequence[Fault], findings: Iterable[Finding]) -> Score:
    found: dict[str, list[Finding]] = {f.name: [] for f in faults}
    unexpected = []
    for finding in findings:
        fault = next((f for f in faults if f.explains(finding)), None)
        if fault is None:
            unexpected.append(finding)
        else:
            found[fault.name].append(finding)
    return Score(found, [f for f in faults if not found[f.name]], unexpected)
