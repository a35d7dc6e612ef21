"""The real components a test may need, as pytest markers, and the rule that keeps the
markers true: a test that reaches a component without its marker fails, so `make check`
(`-m "not real"`) can never start a daemon by accident.

Every place a test reaches a component calls `require(component)`; a component that cannot
be had skips the test here and fails it in CI (CI=true).
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

# Each marker: what the test needs. The `real` ones run in `make test` only.
REAL = {
    "slurm": "the local Slurm 22.05 with slurmdbd (deploy/local/infra/slurm-up.sh)",
    "postgres": "the PostgreSQL server (OBSERVER_TEST_POSTGRES_URL)",
    "prometheus": "a local Prometheus (deploy/local/infra/prometheus-up.sh)",
    "rsyslog": "rsyslog and logrotate (deploy/local/infra/logs-up.sh)",
    "chromium": "headless Chromium (Debian's chromium)",
    "chart": "helm, kubectl, checkov, hadolint (deploy/chart-tools/install.sh)",
    "systemd": "systemd-analyze and setpriv (Debian's systemd)",
    "alone": "stops a component other tests use at the same time: runs after the rest, alone",
}
STAND_INS = {
    "fake_nvml": "the stand-in libnvidia-ml.so.1 (OBSERVER_TEST_FAKE_NVML_LIB)",
}
# One xdist worker runs all of a component's tests where they share one instance that takes
# one test at a time (the Slurm cluster) or starts once per worker (Prometheus, rsyslog).
SHARED_INSTANCE = ("slurm", "prometheus", "rsyslog", "chromium")
# Fixtures that play minutes of simulated time once per process (the reports' week, the demo
# as a process): their tests stay on one worker, so each is played once.
PLAYED_ONCE = ("played", "demo")

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


def unavailable(reason: str) -> NoReturn:
    """A component that cannot be had: skipped here, failed in CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(f"{reason} (CI=true makes this fail)")


def mark(items: list[pytest.Item]) -> None:
    """`real` on every test that needs a real component, and one xdist group per shared
    instance or fixture played once."""
    for item in items:
        needed = [name for name in REAL if item.get_closest_marker(name)]
        if needed:
            item.add_marker(pytest.mark.real)
        shared = [n for n in needed if n in SHARED_INSTANCE]
        played = [n for n in PLAYED_ONCE if n in getattr(item, "fixturenames", ())]
        if group := (shared + played)[:1]:
            item.add_marker(pytest.mark.xdist_group(group[0]))


def named(value: object, name: str) -> object:
    """A parameter named for a platform or a value set: marked for its component when the
    name is a real one's."""
    return pytest.param(value, id=name, marks=[getattr(pytest.mark, name)] if name in REAL else [])


def params(*names: str) -> list[object]:
    """Fixture parameters named by platform, each real one marked for its component."""
    return [named(name, name) for name in names]
