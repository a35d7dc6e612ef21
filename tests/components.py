"""The real components a test may need, as pytest markers, and the rule that keeps the
markers true: a test that reaches a component without its marker fails, so `make check`
(`-m "not real"`) can never start a daemon by accident.

Every place a test reaches a component calls `require(component)`; a component that cannot
be had skips the test here and fails it in CI (CI=true).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

# Each marker: what the test needs. The `real` ones run in `make test` only.
REAL = {
    "slurm": "the local Slurm 22.05 with slurmdbd (deploy/local/infra/slurm-up.sh)",
    "slurm24": "the local Slurm 24.11 in a Debian 13 chroot (deploy/local/infra/slurm24-up.sh)",
    "postgres": "the PostgreSQL server (OBSERVER_TEST_POSTGRES_URL)",
    "prometheus": "a local Prometheus (deploy/local/infra/prometheus-up.sh)",
    "rsyslog": "rsyslog and logrotate (deploy/local/infra/logs-up.sh)",
    "chromium": "headless Chromium (Debian's chromium)",
    "chart": "helm, kubectl, checkov, hadolint (deploy/chart-tools/install.sh)",
    "systemd": "systemd-analyze and setpriv (Debian's systemd)",
}
STAND_INS = {
    "fake_nvml": "the stand-in libnvidia-ml.so.1 (OBSERVER_TEST_FAKE_NVML_LIB)",
}
# One xdist worker runs all of a component's tests where they share one instance: PostgreSQL,
# which one of them stops (the store outage); each Slurm cluster, which takes one test at a
# time; what starts once per worker (the systemd test's venv, Prometheus, rsyslog,
# Chromium). A test of two goes with the first: it waits for the Slurm cluster's lock.
SHARED_INSTANCE = ("postgres", "systemd", "prometheus", "rsyslog", "chromium", "slurm", "slurm24")
# Fixtures that cost tens of seconds once per process (the reports' played week, the demo as
# a process, checkov over every render): their tests stay on one worker.
EXPENSIVE_FIXTURES = ("played", "demo", "checkov_report")

_running: pytest.Item | None = None


def running(item: pytest.Item | None) -> None:
    global _running  # noqa: PLW0603 - the one test a pytest process runs at a time
    _running = item


def require(component: str) -> None:
    """Called where a test reaches `component`: the test must be marked for it."""
    if _running is not None and _running.get_closest_marker(component) is None:
        pytest.fail(
            f"{_running.nodeid} uses {component} ({(REAL | STAND_INS)[component]}) "
            f"but is not marked @pytest.mark.{component}",
            pytrace=False,
        )


def bring_up(
    script: Path, timeout_seconds: int, needs_root: str, env: dict[str, str] | None = None
) -> str | None:
    """Why `script` (a deploy/local/infra/*-up.sh) could not bring its component up, or None
    once it has; `needs_root`: why it needs root; `env`: added to the script's environment."""
    if os.geteuid() != 0:
        return needs_root
    try:
        done = subprocess.run(
            ["bash", str(script)],
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
            check=False,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired:
        return f"{script.name} did not finish within {timeout_seconds} s"
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        return f"{script.name} failed: " + " | ".join(tail)
    return None


def unavailable(reason: str) -> NoReturn:
    """A component that cannot be had: skipped here, failed in CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(f"{reason} (CI=true makes this fail)")


def mark(items: list[pytest.Item]) -> None:
    """`real` on every test that needs a real component, and one xdist group per shared
    instance or expensive fixture."""
    for item in items:
        needed = [name for name in REAL if item.get_closest_marker(name)]
        if needed:
            item.add_marker(pytest.mark.real)
        shared = [n for n in SHARED_INSTANCE if n in needed]
        fixtures = [n for n in EXPENSIVE_FIXTURES if n in getattr(item, "fixturenames", ())]
        if group := (shared + fixtures)[:1]:
            item.add_marker(pytest.mark.xdist_group(group[0]))


def named(value: object, name: str) -> object:
    """A parameter named for a platform or a value set: marked for its component when the
    name is a real one's."""
    return pytest.param(value, id=name, marks=[getattr(pytest.mark, name)] if name in REAL else [])


def params(*names: str) -> list[object]:
    """Fixture parameters named by platform, each real one marked for its component."""
    return [named(name, name) for name in names]
