"""What the Slurm backend needs of its machine is refused in one line naming the setting and the
path, exit 2: by `observer check-config`, and by `observer controller` before it does anything
(no database is created). On the real Slurm, so that a good config is known to pass."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.backends.slurm_harness import require_slurm
from tests.support.cli import run_cli

pytestmark = pytest.mark.slurm


def _config(tmp_path: Path, output_dir: Path) -> Path:
    config = tmp_path / "observer.yaml"
    config.write_text(f"controller:\n  backend: slurm\n  slurm:\n    output_dir: {output_dir}\n")
    return config


@pytest.fixture
def slurm_env() -> dict[str, str]:
    return {"SLURM_CONF": str(require_slurm())}


def _refused_in_one_line(cwd: Path, env: dict[str, str], config: Path, line: str) -> None:
    for args in (["check-config", str(config)], ["controller", "--config", str(config)]):
        result = run_cli(*args, cwd=cwd, env=env)
        assert result.exit_code == 2, args
        assert result.stdout == ""
        assert result.stderr == line + "\n"
    assert sorted(p.name for p in cwd.iterdir()) == ["observer.yaml"]  # no database file


def test_a_good_config_passes(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = _config(tmp_path, tmp_path / "out")

    result = run_cli("check-config", str(config), cwd=tmp_path, env=slurm_env)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{config}: valid"  # then the checks that are off


def test_an_output_dir_that_cannot_be_created_is_named(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    # root writes any directory whatever its mode: a path under a regular file is unwritable
    blocker = tmp_path / "observer.yaml"
    config = _config(tmp_path, blocker / "out")

    _refused_in_one_line(
        tmp_path,
        slurm_env,
        config,
        f"controller.slurm.output_dir: {blocker} is not a directory ({blocker / 'out'})",
    )


def test_a_slurm_conf_that_is_missing_is_named(tmp_path: Path, slurm_env: dict[str, str]) -> None:
    config = _config(tmp_path, tmp_path)
    missing = tmp_path / "no-such" / "slurm.conf"

    _refused_in_one_line(
        tmp_path,
        {**slurm_env, "SLURM_CONF": str(missing)},
        config,
        f"SLURM_CONF: no such file ({missing})",
    )


def test_slurm_programs_missing_from_path_are_named(
    tmp_path: Path, slurm_env: dict[str, str]
) -> None:
    config = _config(tmp_path, tmp_path)
    python_only = str(Path(sys.executable).parent)
    assert shutil.which("sbatch", path=python_only) is None

    _refused_in_one_line(
        tmp_path,
        {**slurm_env, "PATH": python_only},
        config,
        "controller.slurm.commands_dir: unset, and sbatch, squeue, sacct, sinfo, scancel, "
        f"scontrol not on PATH ({python_only})",
    )
