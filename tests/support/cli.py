"""The `observer` command line run in this process, as a person would type it, with none of
the settings this environment holds: its exit code and what it wrote."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from observer.cli import main
from observer.settings import ENV_PREFIX


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(*argv: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> CliResult:
    """`observer ARGV` in `cwd`, with no OBSERVER_* variable of this environment but `env`'s
    (set over the rest of it)."""
    out, err = io.StringIO(), io.StringIO()
    logging = structlog.get_config()
    with pytest.MonkeyPatch.context() as patch, redirect_stdout(out), redirect_stderr(err):
        for name in [name for name in os.environ if name.startswith(ENV_PREFIX)]:
            patch.delenv(name)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        if cwd is not None:
            patch.chdir(cwd)
        try:
            code = main(argv)
        except SystemExit as refused:  # argparse's way to refuse a command line
            assert isinstance(refused.code, int)
            code = refused.code
        finally:
            structlog.configure(**logging)  # the command pointed it at `err`
    return CliResult(code, out.getvalue(), err.getvalue())
