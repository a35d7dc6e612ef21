"""The agent runs on every GPU node, and most of its memory is the modules it imports: its
composition, built as `observer agent` builds it, loads none of the controller's libraries,
and the kubelet's gRPC client only on a node whose owners it asks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What the controller, the store, the reports and the scheduler backends need; never an agent.
CONTROLLER_ONLY = (
    "alembic",
    "apscheduler",
    "httpx",
    "kubernetes",
    "psycopg",
    "sqlalchemy",
    "sqlmodel",
    "observer.backends",
    "observer.controller",
    "observer.delivery",
    "observer.reports",
    "observer.storage",
)

BUILD = """
import json, sys
from prometheus_client import CollectorRegistry
import observer.cli
from observer.agent.main import build_agent
from observer.clock import SystemClock
from observer.settings import Settings

settings = Settings.model_validate({"agent": {"owners": sys.argv[1]}})
build_agent(settings, SystemClock(), CollectorRegistry())
print(json.dumps(sorted(sys.modules)))
"""


def _modules_of_an_agent(owners: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", BUILD, owners],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(done.stdout))


def _loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(p for p in packages if any(m == p or m.startswith(f"{p}.") for m in modules))


@pytest.mark.parametrize("owners", ["none", "slurm", "kubelet"])
def test_an_agent_loads_nothing_the_controller_alone_needs(owners: str) -> None:
    assert _loaded(_modules_of_an_agent(owners), CONTROLLER_ONLY) == []


@pytest.mark.parametrize(("owners", "grpc"), [("none", False), ("slurm", False), ("kubelet", True)])
def test_only_an_agent_that_asks_the_kubelet_loads_grpc(owners: str, grpc: bool) -> None:
    assert bool(_loaded(_modules_of_an_agent(owners), ("grpc",))) is grpc
