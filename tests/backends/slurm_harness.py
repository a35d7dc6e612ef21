"""The real Slurm releases the Slurm tests run on, one fixture over both: the 22.05 of
deploy/local/infra/slurm-up.sh on the host (test marker `slurm`) and the 24.11 of
slurm24-up.sh in a Debian 13 chroot (`slurm24`), the same cluster on both (3 nodes with 4
fake GPUs each, accounts research and prod, users alice and bob: slurm-conf.sh).

Each up script runs once per test session (a fraction of a second when its cluster is up);
a cluster that cannot start skips its tests here and fails them when CI=true.
`slurm_harness(cluster)` hands the cluster out emptied of jobs, to one test at a time across
sessions (its tests.lock, the lock the up scripts take to change it), and empties it again
afterwards. Job logs go to $INFRA_DIR/shared, which 24.11's chroot sees at the same path.
"""

from __future__ import annotations

import fcntl
import functools
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from observer.backends.slurm.backend import SlurmBackend
from observer.clock import SystemClock
from observer.settings.controller import SlurmSettings
from tests import components
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "deploy" / "local" / "infra"
POLL_SECONDS = 0.2


def infra_dir() -> Path:
    return Path(os.environ.get("INFRA_DIR", "/tmp/observer-infra"))


@dataclass(frozen=True)
class SlurmCluster:
    """One local release as a client reaches it: the backend's `slurm_conf` and
    `commands_dir`, and where its daemons keep their files on this machine (`files`: etc/,
    run/ with their pid files, log/). 24.11's programs are wrappers that run the chroot's: they
    read SLURM_CONF as a path on this machine, its own file or one under $INFRA_DIR/shared."""

    release: str  # major.minor
    marker: str  # the test marker, tests/components.py
    up_script: Path
    files: Path
    slurm_conf: Path
    commands_dir: Path | None  # None: Slurm's programs on PATH
    run_as_command: tuple[str, ...]  # the isolation probe's, as this cluster allows it
    munged_pid: Path
    lock: Path  # held by the test that has the cluster, and by its up script to change it
    chroot: Path | None  # where its daemons and munge are installed; None: this machine

    def program(self, name: str) -> str:
        return name if self.commands_dir is None else str(self.commands_dir / name)

    def installed(self, *argv: str) -> list[str]:
        """A program of the cluster's own installation (a daemon, munge) as the up script runs
        it, with SLURM_CONF as the daemons see it."""
        if self.chroot is None:
            return ["env", f"SLURM_CONF={self.slurm_conf}", *argv]
        conf = str(self.slurm_conf).removeprefix(str(self.chroot))
        return ["chroot", str(self.chroot), "env", f"SLURM_CONF={conf}", *argv]


def release_22_05() -> SlurmCluster:
    files = infra_dir() / "slurm"
    return SlurmCluster(
        release="22.05",
        marker="slurm",
        up_script=INFRA / "slurm-up.sh",
        files=files,
        slurm_conf=files / "etc" / "slurm.conf",
        commands_dir=None,
        run_as_command=SlurmSettings().run_as_command,
        munged_pid=Path("/run/munge/munged.pid"),
        lock=files / "tests.lock",
        chroot=None,
    )


def release_24_11() -> SlurmCluster:
    chroot = infra_dir() / "slurm24" / "root"
    return SlurmCluster(
        release="24.11",
        marker="slurm24",
        up_script=INFRA / "slurm24-up.sh",
        files=chroot / "srv" / "slurm",
        slurm_conf=chroot / "srv" / "slurm" / "etc" / "slurm.conf",
        commands_dir=infra_dir() / "slurm24" / "bin",
        run_as_command=("env", "SLURM24_RUN_AS={user}"),  # the wrappers chroot as that user
        munged_pid=chroot / "run" / "munge" / "munged.pid",
        lock=chroot.parent / "tests.lock",
        chroot=chroot,
    )


RELEASES = {"slurm": release_22_05, "slurm24": release_24_11}


@functools.cache
def start(marker: str) -> str | None:
    """Why the cluster is not available, or None once its up script has brought it up.
    Under the cluster's lock: the script starts whatever is down, and a test holding the
    cluster may have stopped slurmdbd or munge on purpose."""
    cluster = RELEASES[marker]()
    why_root = (
        f"the local Slurm {cluster.release} needs root ({cluster.up_script.name} starts daemons)"
    )
    if os.geteuid() != 0:
        return why_root
    cluster.lock.parent.mkdir(parents=True, exist_ok=True)
    with cluster.lock.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # the script would wait for the lock held here to change the configuration; 24.11's
        # jobs run this Python's `observer` in the chroot, which mounts it
        held = {"TESTS_LOCK_HELD": "1", "OBSERVER_PYTHON": sys.executable}
        return components.bring_up(cluster.up_script, 600, why_root, env=held)


def require(marker: str) -> SlurmCluster:
    """The running cluster of a release; skips (fails with CI=true) without one."""
    components.require(marker)
    reason = start(marker)
    if reason is not None:
        components.unavailable(reason)
    return RELEASES[marker]()


def require_slurm() -> Path:
    """SLURM_CONF of the running 22.05, for the tests that need a Slurm client on this machine
    (and not a release's behaviour)."""
    return require("slurm").slurm_conf


class SlurmHarness:
    """What the contract suite needs: the backend, two tenants, a queue and the cluster's
    shape (3 nodes with 4 GPUs each), and a way to wait for Slurm in real time."""

    def __init__(self, cluster: SlurmCluster, output_dir: Path) -> None:
        self.cluster = cluster
        self.settings = SlurmSettings(
            slurm_conf=cluster.slurm_conf,
            commands_dir=cluster.commands_dir,
            run_as_command=cluster.run_as_command,
            output_dir=output_dir,
        )
        self.backend = SlurmBackend(self.settings, SystemClock())
        self.tenants: tuple[str, str] = ("research", "prod")
        self.queue: str | None = "gpu"
        self.gpus_per_node = 4
        self.nodes = 3

    @property
    def slurm_conf(self) -> Path:
        return self.cluster.slurm_conf

    def settle(self, until: Callable[[], bool], timeout_seconds: float) -> None:
        wait_until(
            until,
            f"Slurm {self.cluster.release} did not get there within {timeout_seconds} s",
            seconds=timeout_seconds,
            poll_seconds=POLL_SECONDS,
        )

    def owner_ids(self, job_id: str) -> set[str]:
        return {job_id}  # the agents read it from the job's cgroup (job_<id>) or SLURM_JOB_ID

    def cli(self, *args: str, env: dict[str, str] | None = None, as_user: str = "") -> str:
        """Run a Slurm command against this cluster, as a person would (as root, or as
        `as_user` through the cluster's run-as prefix); its standard output."""
        run_as = [part.replace("{user}", as_user) for part in self.cluster.run_as_command]
        done = subprocess.run(
            [*(run_as if as_user else []), self.cluster.program(args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "SLURM_CONF": str(self.cluster.slurm_conf), **(env or {})},
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
        """PrivateData=`value` while inside, as the up scripts set it with SLURM_PRIVATE_DATA:
        a reconfiguration of slurmctld and (unless `slurmdbd` is False, the half-done set-up
        of many sites) slurmdbd, no restart; undone on the way out. Only users other than root
        notice: the backend runs as root, Slurm's SlurmUser."""
        etc = self.cluster.files / "etc"
        ctld, dbd = etc / "private-data.conf", etc / "private-data-dbd.conf"
        before = ctld.read_text(), dbd.read_text()
        restored = [line for line in before[0].splitlines() if line.startswith("PrivateData=")]
        old = restored[0].split("=", 1)[1] if restored else "none"
        ctld.write_text(f"PrivateData={value}\n")
        if slurmdbd:
            dbd.write_text(f"PrivateData={value}\n")
        try:
            self._reconfigure(value, value if slurmdbd else old)
            yield
        finally:
            ctld.write_text(before[0])
            dbd.write_text(before[1])
            self._reconfigure(old, old)

    def _reconfigure(self, slurmctld: str, slurmdbd: str) -> None:
        self.cli("scontrol", "reconfigure")
        # slurmdbd re-reads slurmdbd.conf on SIGHUP
        os.kill(
            int((self.cluster.files / "run" / "slurmdbd.pid").read_text().strip()), signal.SIGHUP
        )

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
def slurm_harness(cluster: SlurmCluster | None = None) -> Iterator[SlurmHarness]:
    """The test cluster (22.05 unless another is given), free of jobs; every job left behind
    is cancelled on the way out. Test sessions running at once share one cluster: a lock file
    gives it to one test at a time, so one session's clear() never cancels another's jobs."""
    cluster = cluster or require("slurm")
    shared = infra_dir() / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    with (
        cluster.lock.open("w") as lock,
        tempfile.TemporaryDirectory(prefix="observer-slurm-", dir=shared) as output_dir,
    ):
        fcntl.flock(lock, fcntl.LOCK_EX)
        harness = SlurmHarness(cluster, Path(output_dir))
        harness.clear()
        try:
            yield harness
        finally:
            harness.clear()
