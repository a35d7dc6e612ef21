"""deploy/Dockerfile, as far as it can be checked without a container engine: its shape
(multi-stage, nothing but the built environment in the final stage, a fixed non-root user
that the chart names, the `observer` entry point) and its build stage's install, run in a
clean virtual environment on the very files the build stage copies."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.deploy.chart import CHART, REPO, observer_metric_names, run, tool

pytestmark = pytest.mark.chart

DOCKERFILE = REPO / "deploy" / "Dockerfile"
BUILD_TOOLS = re.compile(r"\b(apt-get|apk|gcc|g\+\+|make|build-essential|pip install)\b")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def stages() -> list[Stage]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = args.split()
            result.append(Stage(words[0], words[2] if len(words) > 2 else None))
        elif result:
            result[-1].instructions.append((keyword, args.strip()))
    return result


def test_is_multi_stage_with_a_lean_non_root_final_stage():
    build, final = stages()
    assert build.name == "build"
    assert final.base == build.base == "${PYTHON_IMAGE}"
    (arg,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim-\w+", arg), "a pinned slim Python 3.11"
    for command in final.all("RUN"):
        assert not BUILD_TOOLS.search(command), command
        assert "pip uninstall" in command
    copies = final.all("COPY")
    assert copies == ["--from=build /opt/observer /opt/observer"], "only the built environment"
    (user,) = final.all("USER")
    uid, gid = (int(part) for part in user.split(":"))
    assert uid != 0 and gid != 0
    assert final.all("ENTRYPOINT") == ['["observer"]']


def test_hadolint_finds_nothing():
    result = run(tool("hadolint"), "--no-color", DOCKERFILE, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_chart_runs_the_controller_as_the_image_user():
    (user,) = stages()[-1].all("USER")
    uid = int(user.split(":")[0])
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["controller"]["podSecurityContext"]["runAsUser"] == uid
    assert values["controller"]["podSecurityContext"]["fsGroup"] == uid


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    os.environ.get("CI") != "true" and not os.environ.get("OBSERVER_TEST_IMAGE_INSTALL"),
    reason="about a minute of installing from the package index: runs in CI "
    "(CI=true) or with OBSERVER_TEST_IMAGE_INSTALL=1",
)
def test_build_stage_install_works_in_a_clean_venv(tmp_path: Path):
    """The build stage's RUN, word for word but for its paths, on a context holding only
    what its COPY lines copy: the wheel builds, installs from wheels alone, and the
    installed `observer` prints the same metrics as the development install and runs the
    probes' programs."""
    build = stages()[0]
    context = tmp_path / "src"
    context.mkdir()
    for copy in build.all("COPY"):
        *sources, _dest = shlex.split(copy)
        for source in sources:
            origin = REPO / source.rstrip("/")
            if origin.is_dir():
                shutil.copytree(
                    origin, context / origin.name, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy(origin, context / origin.name)
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").symlink_to(sys.executable)
    (run,) = build.all("RUN")
    script = run.replace("/opt/observer", str(tmp_path / "venv")).replace(
        "/tmp/wheels", str(tmp_path / "wheels")
    )
    env = {
        **os.environ,
        "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=context,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    if result.returncode != 0 and "NewConnectionError" in result.stdout + result.stderr:
        pytest.skip("no package index reachable for the install")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    venv = tmp_path / "venv"
    assert not list(venv.glob("lib/python*/site-packages/pip")), "pip left in the image"
    listed = subprocess.run(
        [str(venv / "bin" / "observer"), "metrics", "list"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    ).stdout
    assert frozenset(listed.split()) == observer_metric_names()
    # the probes' own programs are in the image: nothing else to pull
    probe = [str(venv / "bin" / "observer"), "probe"]
    clean = {"PATH": os.environ["PATH"]}
    assert subprocess.run([*probe, "exit", "--code", "7"], env=clean, check=False).returncode == 7
    canary = subprocess.run(
        [*probe, "log-canary", "--run-id", "r", "--lines", "2"],
        env=clean, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert canary.stdout.startswith("observer-canary run=r seq=0 ts=")
