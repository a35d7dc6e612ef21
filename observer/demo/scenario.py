"""What the demo plays: its platform and plan (as the settings it changes from the defaults,
said in a few lines and written as a config file), and the other tenants' load."""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import date, datetime, time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from observer.backends.simulated import SimulatedCluster
from observer.domain import Workload
from observer.settings.detectors import FairnessSettings

TIMEZONE = ZoneInfo("Asia/Shanghai")
NODES = 6
GPUS_PER_NODE = 8


def overrides(out: Path, language: str) -> dict[str, Any]:
    """Every setting the demo changes from the defaults, as a settings tree: three tenants with
    different weights on six 8-GPU nodes in two pools, a weekday peak and a night window in
    Shanghai, the full probe plan, fairness judged over fewer windows (a day has two), the
    database and reports in `out`."""
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
    return {
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
            "logs": {"settle_seconds": 30},
            "heartbeat_labels": {"job": "observer-controller"},
            "simulation": {
                "nodes": NODES,
                "gpus_per_node": GPUS_PER_NODE,
                "pools": ["h200-a", "h200-b"],
            },
        },
        "detectors": {
            "fairness": {"persistence_k": 2, "persistence_m": 3},
            # The demo's agents run in process (no controller.agent_urls to derive it from).
            "monitoring_lag": {"freshness_series": ["observer_gpu_up"]},
        },
        "storage": {"url": f"sqlite:///{out.resolve() / 'observer.db'}"},
        "reports": {"output_dir": str(out.resolve() / "reports"), "language": language},
    }


def describe(tree: Mapping[str, Any]) -> list[str]:
    """The settings tree `overrides` made, in a few lines a person reads at the start."""
    controller = tree["controller"]
    fairness = tree["detectors"]["fairness"]
    simulation = controller["simulation"]
    windows = ", ".join(
        f"{w['name']} {w['days']} {w['start']}-{w['end']}" for w in controller["windows"]
    )
    tenants = ", ".join(
        f"{t['name']} weight {t['weight']}"
        + (f" quota {t['quota_gpus']} GPUs" if "quota_gpus" in t else "")
        for t in controller["tenants"]
    )
    probes = sorted({entry["probe"] for entry in controller["plan"]})
    tuned = "; ".join(
        f"{probe} " + ", ".join(f"{k} {v}" for k, v in values.items())
        for probe, values in controller["probes"].items()
    )
    intervals = ", ".join(f"{k} {v}" for k, v in controller.items() if k.endswith("_seconds"))
    default = FairnessSettings()
    return [
        f"timezone {controller['timezone']}; windows {windows}",
        f"tenants {tenants}",
        f"plan {len(controller['plan'])} entries of {len(probes)} probes ({', '.join(probes)}); "
        f"{tuned}",
        f"simulated {simulation['nodes']} nodes x {simulation['gpus_per_node']} GPUs in pools "
        f"{', '.join(simulation['pools'])}; gpus_per_node {controller['gpus_per_node']}, "
        f"max_probe_gpus {controller['max_probe_gpus']}, "
        f"max_probe_gpus_per_tenant {controller['max_probe_gpus_per_tenant']}",
        f"controller {intervals}; heartbeat_labels "
        + ", ".join(f"{k}={v}" for k, v in controller["heartbeat_labels"].items()),
        f"fairness persistence {fairness['persistence_k']} of {fairness['persistence_m']} "
        f"windows (default {default.persistence_k} of {default.persistence_m}: a day has two)",
        f"storage.url {tree['storage']['url']}",
        f"reports.output_dir {tree['reports']['output_dir']}, "
        f"language {tree['reports']['language']}",
    ]


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
