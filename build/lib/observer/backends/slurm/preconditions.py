"""What the Slurm backend needs of the machine it runs on, checked before anything runs: the
SLURM_CONF its commands read, an output directory it can write, and Slurm's programs. Pure
reads of the filesystem and the environment; each problem one line naming the setting."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from observer.settings.controller import SlurmSettings

# Every program the backend runs (commands.py)
PROGRAMS = ("sbatch", "squeue", "sacct", "sinfo", "scancel", "scontrol")


def preconditions(settings: SlurmSettings, environ: Mapping[str, str] = os.environ) -> list[str]:
    """One `setting: problem (path)` line per unmet need; none when the backend can start."""
    problems = [_slurm_conf(settings, environ), _output_dir(settings.output_dir)]
    problems.append(_programs(settings.commands_dir, environ.get("PATH", os.defpath)))
    return [problem for problem in problems if problem is not None]


def _slurm_conf(settings: SlurmSettings, environ: Mapping[str, str]) -> str | None:
    if settings.slurm_conf is not None:
        setting, path = "controller.slurm.slurm_conf", settings.slurm_conf
    elif environ.get("SLURM_CONF"):
        setting, path = "SLURM_CONF", Path(environ["SLURM_CONF"])
    else:
        return None  # Slurm's default file, or configless from slurmctld: nothing to read here
    if not path.is_file():
        problem = "is not a file" if path.exists() else "no such file"
        return f"{setting}: {problem} ({path})"
    try:
        path.read_bytes()
    except OSError as exc:
        return f"{setting}: cannot be read, {exc.strerror} ({path})"
    return None


def _output_dir(output_dir: Path) -> str | None:
    """A directory the controller can write, or one it can create there (submit does)."""
    path = output_dir.absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())  # "/" always does
    if not existing.is_dir():
        problem = "is not a directory" if existing == path else f"{existing} is not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = "is not writable" if existing == path else f"{existing} is not writable"
    else:
        return None
    return f"controller.slurm.output_dir: {problem} ({path})"


def _programs(commands_dir: Path | None, search_path: str) -> str | None:
    if commands_dir is None:
        missing = [name for name in PROGRAMS if shutil.which(name, path=search_path) is None]
        where = f"unset, and {', '.join(missing)} not on PATH ({search_path})"
    else:
        missing = [name for name in PROGRAMS if shutil.which(name, path=commands_dir) is None]
        where = f"{', '.join(missing)} not in it ({commands_dir})"
    return f"controller.slurm.commands_dir: {where}" if missing else None
