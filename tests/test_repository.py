"""Nothing in the repository hides from git, the linters or the test collector: a folder
named like a build output (`build/`, `dist/`) is source like any other."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tomllib
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(shutil.which("ruff") or REPO / ".venv/bin/ruff")

pytestmark = pytest.mark.skipif(
    not (REPO / ".git").exists(), reason="needs the git checkout, not an installed copy"
)


def _git(*args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=REPO, input=stdin, capture_output=True, text=True, check=False
    ).stdout


def tracked() -> list[str]:
    return _git("ls-files").splitlines()


def test_git_ignores_no_tracked_path():
    ignored = _git("check-ignore", "--no-index", "--stdin", stdin="\n".join(tracked()))
    assert ignored.splitlines() == []


def test_ruff_reads_every_tracked_python_file_but_the_generated_ones():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    generated = config["tool"]["ruff"]["extend-exclude"]
    shown = subprocess.run(
        [str(RUFF), "check", "--show-files", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    read = {str(PurePosixPath(Path(line).relative_to(REPO))) for line in shown if line}
    python = {p for p in tracked() if p.endswith(".py")}
    unread = {p for p in python - read if not any(fnmatch.fnmatch(p, g) for g in generated)}
    assert unread == set()
    assert python & read, "ruff listed none of the tracked files"


def test_pytest_recurses_into_every_tracked_test_folder():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    skipped = config["tool"]["pytest"]["ini_options"]["norecursedirs"]
    folders = {part for p in tracked() if p.startswith("tests/") for part in Path(p).parts[1:-1]}
    hidden = {f for f in folders if any(fnmatch.fnmatch(f, pattern) for pattern in skipped)}
    assert hidden == set()
