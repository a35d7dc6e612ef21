"""A real Slurm 24.11 beside the 22.05, for what a newer release answers differently.

deploy/local/infra/slurm24-up.sh runs once per test session: about 100 s the first time
(debootstrap of Debian 13 and its packages), a few seconds to start the daemons of an
installed chroot, a fraction of a second when it is up. Slurm that cannot start skips the tests
here and fails them when CI=true. Its programs are the wrappers in $INFRA_DIR/slurm24/bin,
which run the chroot's with the chroot's SLURM_CONF: the Slurm backend's `commands_dir`.
`slurm24_cluster()` hands the cluster to one test at a time across sessions.
"""

from __future__ import annotations

import fcntl
import functools
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests import components

REPO = Path(__file__).resolve().parents[2]
SLURM24_UP = REPO / "deploy" / "local" / "infra" / "slurm24-up.sh"


def slurm24_dir() -> Path:
    return Path(os.environ.get("INFRA_DIR", "/tmp/observer-infra")) / "slurm24"


@dataclass(frozen=True)
class Slurm24:
    commands_dir: Path

    def cli(self, *args: str) -> str:
        """Run a Slurm 24.11 program, as a person would; its standard output."""
        done = subprocess.run(
            [str(self.commands_dir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        return done.stdout


@functools.cache
def _start_slurm24() -> str | None:
    """Why Slurm 24.11 is not available, or None once slurm24-up.sh has brought it up."""
    why_root = "the local Slurm 24.11 needs root (slurm24-up.sh chroots and starts daemons)"
    if os.geteuid() != 0:
        return why_root
    lock_path = slurm24_dir() / "tests.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return components.bring_up(SLURM24_UP, 600, why_root)


@contextmanager
def slurm24_cluster() -> Iterator[Slurm24]:
    """The 24.11 cluster, held by this test alone (its tests.lock); skips (fails with CI=true)
    without one."""
    components.require("slurm24")
    reason = _start_slurm24()
    if reason is not None:
        components.unavailable(reason)
    with (slurm24_dir() / "tests.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield Slurm24(slurm24_dir() / "bin")
