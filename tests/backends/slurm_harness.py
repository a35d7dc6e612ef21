"""A real Slurm 22.05 for the Slurm backend's tests and the scheduler contract suite.

deploy/local/infra/slurm-up.sh runs once per test session (it returns in a fraction of a
second when Slurm is already up); Slurm that cannot start skips the tests here and fails them
when CI=true. `slurm_harness()` hands out the cluster emptied of jobs, to one test at a time
across sessions, and empties it again afterwards.
"""

from __future__ import annotations

import fcntl
import functools
import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from observer.backends.slurm.backend import SlurmBackend
from observer.clock import SystemClock
from observer.settings.controller import SlurmSettings
from tests import components
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
SLURM_UP = REPO / "deploy" / "local" / "infra" / "slurm-up.sh"
POLL_SECONDS = 0.2


def slurm_conf_path() -> Path:
    return Path(os.environ.get("INFRA_DIR", "/tmp/observer-infra")) / "slurm" / "etc" / "slurm.conf"


@functools.cache
def _start_slurm() -> str | None:
    """Why Slurm is not available, or None once slurm-up.sh has brought it up. Under the
    cluster's lock: slurm-up.sh starts whatever is down, and a test holding the cluster may
    have stopped slurmdbd or munge on purpose."""
    why_root = "the local Slurm needs root (slurm-up.sh starts munge, slurmdbd and slurmd)"
    if os.geteuid() != 0:
        return why_root
    lock_path = _lock_path(slurm_conf_path())
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return components.bring_up(SLURM_UP, 600, why_root)


def _lock_path(slurm_conf: Path) -> Path:
    return slurm_conf.parent.parent / "tests.lock"


def require_slurm() -> Path:
    """SLURM_CONF of the running test cluster; skips (fails with CI=true) without one."""
    components.require("slurm")
    reason = _start_slurm()
    if reason is not None:
        components.unavailable(reason)
    return slurm_conf_path()


class SlurmHarness:
    """What the contract suite needs: the backend, two tenants, a queue and the cluster's
    shape (3 nodes with 4 GPUs each), and a way to wait for Slurm in real time."""

    def __init__(self, slurm_conf: Path, output_dir: Path) -> None:
        self.slurm_conf = slurm_conf
        self.settings = SlurmSettings(slurm_conf=slurm_conf, output_dir=output_dir)
        self.backend = SlurmBackend(self.settings, SystemClock())
        self.tenants: tuple[str, str] = ("research", "prod")
        self.queue: str | None = "gpu"
        self.gpus_per_node = 4
        self.nodes = 3

    def settle(self, until: Callable[[], bool], timeout_seconds: float) -> None:
        wait_until(
            until,
            f"Slurm did not get there within {timeout_seconds} s",
            seconds=timeout_seconds,
            poll_seconds=POLL_SECONDS,
        )

    def owner_ids(self, job_id: str) -> set[str]:
        return {job_id}  # the agents read it from the job's cgroup (job_<id>) or SLURM_JOB_ID

    def cli(self, *args: str, env: dict[str, str] | None = None) -> str:
        """Run a Slurm command against this cluster, as a person would; its standard output."""
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "SLURM_CONF": str(self.slurm_conf), **(env or {})},
        )
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        return done.stdout

    def clear(self) -> None:
        """Cancel every unfinished job, return drained nodes to service, wait until idle."""
        active = [j.job_id for j in self.backend.snapshot().jobs]
        if active:
            self.cli("scancel", *active)
        down = [n.name for n in self.backend.snapshot().nodes if n.state.startswith("drain")]
        if down:
            self.cli("scontrol", "update", f"nodename={','.join(down)}", "state=resume")
        self.settle(self._idle, 30)

    @contextmanager
    def private_data(self, value: str, *, slurmdbd: bool = True) -> Iterator[None]:
        """PrivateData=`value` while inside, as slurm-up.sh sets it with SLURM_PRIVATE_DATA:
        a reconfiguration of slurmctld and (unless `slurmdbd` is False, the half-done set-up
        of many sites) slurmdbd, no restart; undone on the way out. Only users other than root
        notice: the backend runs as root, Slurm's SlurmUser."""
        include = self.slurm_conf.parent / "private-data.conf"
        before = include.read_text()
        restored = [line for line in before.splitlines() if line.startswith("PrivateData=")]
        old = restored[0].split("=", 1)[1] if restored else "none"
        include.write_text(f"PrivateData={value}\n")
        try:
            self._reconfigure(value, value if slurmdbd else old, hup_slurmdbd=slurmdbd)
            yield
        finally:
            include.write_text(before)
            self._reconfigure(old, old, hup_slurmdbd=True)

    def _reconfigure(self, slurmctld: str, slurmdbd: str, *, hup_slurmdbd: bool) -> None:
        self.cli("scontrol", "reconfigure")
        if hup_slurmdbd:  # slurmdbd re-reads slurmdbd.conf on SIGHUP
            pid = (self.slurm_conf.parent.parent / "run" / "slurmdbd.pid").read_text()
            os.kill(int(pid.strip()), signal.SIGHUP)

        def private_data(config: str) -> str:
            lines = [line for line in config.splitlines() if line.startswith("PrivateData ")]
            return lines[-1].split("=", 1)[1].strip() if lines else "?"

        def applied() -> bool:
            return (
                private_data(self.cli("scontrol", "show", "config")),
                # the last of sacctmgr's two sections is slurmdbd's own
                private_data(self.cli("sacctmgr", "show", "config")),
            ) == (slurmctld, slurmdbd)

        self.settle(applied, 10)

    def _idle(self) -> bool:
        snap = self.backend.snapshot()
        return not snap.jobs and all(n.state == "idle" for n in snap.nodes)


@contextmanager
def slurm_harness() -> Iterator[SlurmHarness]:
    """The test cluster, free of jobs; every job left behind is cancelled on the way out.
    Test sessions running at once share one cluster: a lock file gives it to one test at a
    time, so one session's clear() never cancels another's jobs."""
    slurm_conf = require_slurm()
    with (
        _lock_path(slurm_conf).open("w") as lock,
        tempfile.TemporaryDirectory(prefix="observer-slurm-") as output_dir,
    ):
        fcntl.flock(lock, fcntl.LOCK_EX)
        harness = SlurmHarness(slurm_conf, Path(output_dir))
        harness.clear()
        try:
            yield harness
        finally:
            harness.clear()
