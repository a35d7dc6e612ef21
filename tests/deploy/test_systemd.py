"""The systemd units of a Slurm site (deploy/systemd/), installed as the README's guide installs
them, into a temporary root instead of /: a fresh venv from the working tree's files, the
configs in /etc/observer, the units in /etc/systemd/system. systemd-analyze verifies the units
against that root, their command lines go through the real CLI, their configs through the fresh
venv's check-config, and the agent started with its unit's command line, user, capabilities and
stop signal serves /healthz on the stand-in NVML and names another user's Slurm job."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from observer.cli import _parser
from observer.settings import load_settings
from tests import components
from tests.backends.slurm_harness import require_slurm
from tests.deploy.chart import REPO
from tests.gpu import fake_nvml
from tests.support.waiting import wait_until

# The venv is made once, from PyPI or pip's cache.
pytestmark = [pytest.mark.systemd, pytest.mark.timeout(300)]

UNITS = REPO / "deploy" / "systemd"
VENV = Path("/opt/observer/venv")
# What the guide installs: source in the repository -> where it goes on the machine.
INSTALLED = {
    "agent.yaml": Path("/etc/observer/agent.yaml"),
    "controller-slurm.yaml": Path("/etc/observer/controller.yaml"),
    "observer-agent.service": Path("/etc/systemd/system/observer-agent.service"),
    "observer-controller.service": Path("/etc/systemd/system/observer-controller.service"),
}
# Each unit's config, as named in the repository.
CONFIG_OF = {
    "observer-agent.service": "agent.yaml",
    "observer-controller.service": "controller-slurm.yaml",
}
# The system's interpreter, as on a node: the venv's python must be executable by the unit's
# user, which a root-only interpreter (pyenv under /root) is not.
SYSTEM_PYTHON = Path("/usr/bin/python3")
AGENT_UID = 61000  # stands in for the unit's User=observer-agent (no such user here)
TENANT_UID = 61001  # another user, whose job runs on the GPU
JOB_ID = "4242"


def _require(present: bool, why: str) -> None:
    components.require("systemd")
    if not present:
        components.unavailable(why)


def section(unit: Path, name: str = "Service") -> dict[str, list[str]]:
    """One section of a unit file: each key's values in order."""
    current, keys = "", dict[str, list[str]]()
    for line in map(str.strip, unit.read_text().splitlines()):
        if line.startswith("["):
            current = line.strip("[]")
        elif line and not line.startswith("#") and current == name:
            key, _, value = line.partition("=")
            keys.setdefault(key, []).append(value)
    return keys


def paths(values: list[str]) -> list[Path]:
    """A list-of-paths setting (ReadWritePaths=, RequiresMountsFor=) over all its lines."""
    return [Path(p) for value in values for p in value.split()]


def exec_lines(unit: Path, key: str) -> list[list[str]]:
    return [shlex.split(line) for line in section(unit).get(key, [])]


@dataclass(frozen=True)
class Installed:
    root: Path

    def at(self, path: Path) -> Path:
        """Where a path of the machine is in the temporary root."""
        return self.root / path.relative_to("/")

    def observer(self, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        """The fresh venv's own `observer`, the console script pip made."""
        return subprocess.run(
            [str(self.at(VENV / "bin" / "observer")), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def _install(command: list[str], root: Path) -> None:
    done = subprocess.run(
        command, cwd=root, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{shlex.join(command)}: {done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    """The guide's steps into a temporary root, readable by the unit's user as / would be."""
    _require(shutil.which("systemd-analyze") is not None, "systemd-analyze is not installed")
    _require(SYSTEM_PYTHON.is_file(), f"{SYSTEM_PYTHON} (Python >= 3.11 with venv) is missing")
    with tempfile.TemporaryDirectory(prefix="observer-systemd-") as name:
        root = Path(name)
        root.chmod(0o755)
        target = Installed(root)
        # A fresh clone's files: what git tracks or would track, nothing built or cached.
        source = root / "src"
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        for relative in filter(None, (p.decode() for p in listed)):
            if (REPO / relative).is_file():
                (source / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / relative, source / relative)
        venv = target.at(VENV)
        _install([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], root)
        _install([str(venv / "bin" / "pip"), "install", "-q", str(source)], root)
        for name_in_repo, path in INSTALLED.items():
            copied = source / UNITS.relative_to(REPO) / name_in_repo
            _install(["install", "-d", "-m", "0755", str(target.at(path.parent))], root)
            _install(["install", "-m", "0644", str(copied), str(target.at(path))], root)
        # The host's own units (sysinit.target, network-online.target, ...) the verify resolves.
        shutil.copytree(
            "/lib/systemd/system", target.at(Path("/usr/lib/systemd/system")), symlinks=True
        )
        yield target


def test_both_units_pass_systemd_analyze_verify(installed: Installed) -> None:
    verify = subprocess.run(
        ["systemd-analyze", "verify", f"--root={installed.root}", *CONFIG_OF],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    # An unknown key, a bad value or an ExecStart missing from the root's venv is said on stderr.
    assert (verify.returncode, verify.stderr) == (0, "")


# What each unit runs, in order: (command, subcommand).
RUNS = {
    "observer-agent.service": [("agent", None)],
    "observer-controller.service": [("db", "upgrade"), ("controller", None)],
}


@pytest.mark.parametrize("unit", CONFIG_OF)
def test_each_command_line_is_the_venv_observer_reading_the_installed_config(
    installed: Installed, unit: str
) -> None:
    config = INSTALLED[CONFIG_OF[unit]]
    lines = exec_lines(UNITS / unit, "ExecStartPre") + exec_lines(UNITS / unit, "ExecStart")

    runs = []
    for argv in lines:
        assert argv[0] == str(VENV / "bin" / "observer")
        assert os.access(installed.at(Path(argv[0])), os.X_OK)
        args = _parser().parse_args(argv[1:])  # argparse exits 2 on a line the CLI does not take
        assert args.config == config
        runs.append((args.command, getattr(args, f"{args.command}_command", None)))
    assert runs == RUNS[unit]
    assert installed.at(config).is_file()


@pytest.fixture
def slurm_env() -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(require_slurm())}


@pytest.mark.slurm
def test_the_installed_configs_pass_the_fresh_venvs_check_config(
    installed: Installed, slurm_env: dict[str, str]
) -> None:
    env = {k: v for k, v in slurm_env.items() if k != "OBSERVER_CONFIG" and "__" not in k}
    for path in (INSTALLED["agent.yaml"], INSTALLED["controller-slurm.yaml"]):
        checked = installed.observer("check-config", str(installed.at(path)), env=env)

        assert checked.returncode == 0, checked.stderr
        assert checked.stdout.splitlines()[0] == f"{installed.at(path)}: valid"
    # The controller's example lists the agents: the agents' freshness check is on.
    assert "no agents configured" not in checked.stdout


def _under(path: Path, parents: list[Path]) -> bool:
    return any(path.is_relative_to(parent) for parent in parents)


def test_the_controller_writes_only_where_its_unit_lets_it() -> None:
    unit = UNITS / "observer-controller.service"
    keys = section(unit)
    writable = paths(keys["ReadWritePaths"])
    writable += [Path("/var/lib") / state for state in paths(keys["StateDirectory"])]
    settings = load_settings(UNITS / "controller-slurm.yaml")

    writes = [
        settings.storage.sqlite_path.parent,
        settings.reports.output_dir,
        settings.controller.slurm.output_dir,
    ]

    assert keys["ProtectSystem"] == ["strict"]
    assert [path for path in writes if not _under(path, writable)] == []
    # The shared output directory is mounted before the controller starts.
    assert settings.controller.slurm.output_dir in paths(section(unit, "Unit")["RequiresMountsFor"])


def test_the_agent_writes_nothing() -> None:
    unit = section(UNITS / "observer-agent.service")

    assert unit["ProtectSystem"] == ["strict"]
    writable = {"ReadWritePaths", "StateDirectory", "CacheDirectory", "LogsDirectory"}
    assert writable & unit.keys() == set()


@pytest.mark.parametrize("unit", CONFIG_OF)
def test_systemd_waits_longer_than_the_shutdown_deadline_before_killing(unit: str) -> None:
    keys = section(UNITS / unit)
    settings = load_settings(UNITS / CONFIG_OF[unit])
    deadline = (
        settings.agent.shutdown_deadline_seconds
        if unit == "observer-agent.service"
        else settings.controller.shutdown_deadline_seconds
    )

    assert keys["KillSignal"] == ["SIGTERM"]
    assert float(keys["TimeoutStopSec"][0]) > deadline


def _exposure(installed: Installed, unit: str) -> float:
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", f"--root={installed.root}", unit],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = re.search(r"Overall exposure level for \S+: ([0-9.]+)", security.stdout)
    assert found, security.stdout + security.stderr
    return float(found.group(1))


@pytest.mark.parametrize("unit", CONFIG_OF)
def test_systemd_rates_each_unit_exposure_ok_or_better(installed: Installed, unit: str) -> None:
    # systemd 252 rates the agent 2.2 and the controller 1.4 of 10; "OK" ends at 4.9. A margin
    # for other systemd versions' weights, and a weakened sandbox still shows.
    assert _exposure(installed, unit) < 3.0


def _capabilities(unit: Path) -> list[str]:
    """AmbientCapabilities= as setpriv names them: CAP_SYS_PTRACE -> sys_ptrace."""
    values = " ".join(section(unit).get("AmbientCapabilities", [])).split()
    return [value.removeprefix("CAP_").lower() for value in values]


def _as_the_unit(capabilities: list[str]) -> list[str]:
    """What the agent's User=, AmbientCapabilities=, CapabilityBoundingSet= (the same set) and
    NoNewPrivileges= do, by setpriv (no systemd as PID 1 here)."""
    wanted = "".join(f",+{cap}" for cap in capabilities)
    return [
        "setpriv",
        f"--reuid={AGENT_UID}",
        f"--regid={AGENT_UID}",
        "--clear-groups",
        f"--inh-caps=-all{wanted}",
        f"--ambient-caps=-all{wanted}",
        f"--bounding-set=-all{wanted}",
        "--no-new-privs",
    ]


@pytest.fixture
def tenant_process() -> Iterator[int]:
    """Another user's job step: its environ says SLURM_JOB_ID, its cgroup names no job (as
    under proctrack/linuxproc)."""
    _require(os.geteuid() == 0, "running processes as other users needs root (setpriv)")
    with subprocess.Popen(
        [
            "setpriv",
            f"--reuid={TENANT_UID}",
            f"--regid={TENANT_UID}",
            "--clear-groups",
            "sleep",
            "300",
        ],
        env={"PATH": os.defpath, "SLURM_JOB_ID": JOB_ID},
    ) as process:
        try:
            yield process.pid
        finally:
            process.kill()


def _listening_port(agent: subprocess.Popen[str]) -> int:
    assert agent.stderr is not None
    for line in agent.stderr:
        event = json.loads(line)
        if event.get("event") == "agent listening":
            return int(event["port"])
    raise AssertionError(f"the agent exited ({agent.wait()}) before listening")


def _healthy_snapshot(base: str) -> dict[str, Any]:
    wait_until(
        lambda: httpx.get(f"{base}/healthz").status_code == 200,
        "the agent never became healthy",
        seconds=30,
    )
    snapshot: dict[str, Any] = httpx.get(f"{base}/v1/snapshot").json()
    return snapshot


UNIT_CAPABILITIES = _capabilities(UNITS / "observer-agent.service")
# The capabilities the agent gets -> the owner it names for the tenant's process.
CASES = {
    "the-units": (UNIT_CAPABILITIES, ("slurm_job", JOB_ID)),
    **{
        f"without-{cap}": ([c for c in UNIT_CAPABILITIES if c != cap], ("none", ""))
        for cap in UNIT_CAPABILITIES
    },
}


@pytest.mark.fake_nvml
@pytest.mark.parametrize(("capabilities", "owner"), CASES.values(), ids=CASES.keys())
def test_the_agent_as_its_unit_runs_it_serves_healthz_and_names_another_users_job(
    installed: Installed,
    tenant_process: int,
    capabilities: list[str],
    owner: tuple[str, str],
) -> None:
    unit = section(UNITS / "observer-agent.service")
    assert unit["CapabilityBoundingSet"] == unit["AmbientCapabilities"]  # what setpriv is given
    assert unit["NoNewPrivileges"] == ["yes"]
    library = installed.root / "lib" / "libnvidia-ml.so.1"
    library.parent.mkdir(exist_ok=True)
    shutil.copy(fake_nvml.require_library(), library)
    state = installed.root / "fake-nvml-state"
    fake_nvml.write_state(state, [fake_nvml.FakeNvmlGpu(processes=((tenant_process, 2**30),))])
    state.chmod(0o644)
    (argv,) = exec_lines(UNITS / "observer-agent.service", "ExecStart")
    # What a drop-in would set: the stand-in NVML, and a free port on loopback.
    env = {
        "PATH": os.defpath,
        "FAKE_NVML_STATE": str(state),
        "OBSERVER_AGENT__NVML_LIBRARY_PATH": str(library),
        "OBSERVER_AGENT__LISTEN_HOST": "127.0.0.1",
        "OBSERVER_AGENT__LISTEN_PORT": "0",
        "PYTHONUNBUFFERED": "1",
    }
    command = [str(installed.at(Path(w))) if w.startswith("/") else w for w in argv]

    with subprocess.Popen(
        _as_the_unit(capabilities) + command, env=env, stderr=subprocess.PIPE, text=True
    ) as agent:
        try:
            snapshot = _healthy_snapshot(f"http://127.0.0.1:{_listening_port(agent)}")
        finally:
            agent.send_signal(getattr(signal, unit["KillSignal"][0]))
            exited = agent.wait(timeout=float(unit["TimeoutStopSec"][0]))

    (process,) = snapshot["processes"]
    assert exited == 0
    assert process["pid"] == tenant_process
    assert process["uid"] == TENANT_UID
    assert (process["owner"]["kind"], process["owner"]["id"]) == owner
