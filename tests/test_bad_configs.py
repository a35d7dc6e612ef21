"""Every bad config under tests/fixtures/bad-configs/ is refused by the real CLI with exactly
the lines beside it (NAME.expected), exit 2 and no traceback: by `check-config` and by
`controller --config`, which then never starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli

BAD_CONFIGS = Path(__file__).parent / "fixtures" / "bad-configs"
CASES = sorted(p.stem for p in BAD_CONFIGS.glob("*.expected"))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory where the configs are `bad-configs/NAME.yaml`, the path
    their expected lines name."""
    (tmp_path / "bad-configs").symlink_to(BAD_CONFIGS)
    return tmp_path


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 15
    assert not (BAD_CONFIGS / "missing.yaml").exists()


@pytest.mark.parametrize("name", CASES)
def test_check_config_refuses_it_with_exactly_its_lines(workdir: Path, name: str) -> None:
    result = run_cli("check-config", f"bad-configs/{name}.yaml", cwd=workdir)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (BAD_CONFIGS / f"{name}.expected").read_text()
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", CASES)
def test_the_controller_refuses_it_the_same_way_before_starting(workdir: Path, name: str) -> None:
    result = run_cli("controller", "--config", f"bad-configs/{name}.yaml", cwd=workdir)

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (BAD_CONFIGS / f"{name}.expected").read_text()
    assert "controller listening" not in result.stderr
    assert sorted(p.name for p in workdir.iterdir()) == ["bad-configs"]  # no database file


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("agent: {}\n")
    config.chmod(0)

    result = run_cli("check-config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 2
    assert result.stderr == "c.yaml: cannot be read (Permission denied)\n"
