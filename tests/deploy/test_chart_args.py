"""Every command line the chart renders for the observer goes through the real CLI parser, for
every value set: the image's entrypoint followed by the container's args (or its command)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from observer.cli import _parser
from tests.deploy.chart import CI_VALUES, REPO, all_containers, pod_spec, render, tool

pytestmark = pytest.mark.chart

VALUE_SETS = [None, *CI_VALUES]
VALUE_IDS = ["defaults", *(p.name.removesuffix("-values.yaml") for p in CI_VALUES)]


def entrypoint() -> list[str]:
    """The image's ENTRYPOINT (exec form), what a container without `command` runs."""
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    found = re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, flags=re.MULTILINE)
    assert found, "deploy/Dockerfile has no exec-form ENTRYPOINT"
    words: list[str] = json.loads(found.group(1))
    return words


def observer_command_lines(objects: list[dict[str, Any]]) -> dict[str, list[str]]:
    """container name -> its words after `observer`, for every container that runs it."""
    lines = {}
    for obj in objects:
        if obj["kind"] not in ("DaemonSet", "Deployment", "Pod"):
            continue
        for container in all_containers(pod_spec(obj)):
            argv = [*(container.get("command") or entrypoint()), *container.get("args", [])]
            if Path(argv[0]).name == "observer":
                lines[f"{obj['metadata']['name']}/{container['name']}"] = argv[1:]
    return lines


@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_every_rendered_observer_command_line_parses(values: Path | None) -> None:
    lines = observer_command_lines(render(tool("helm"), *([values] if values else [])))

    assert any(argv[:2] == ["db", "upgrade"] for argv in lines.values()), lines
    assert any(argv[:1] == ["controller"] for argv in lines.values()), lines
    for argv in lines.values():
        _parser().parse_args(argv)  # argparse exits 2 on a line the CLI does not take


def test_the_init_container_upgrades_the_database_of_the_mounted_config() -> None:
    lines = observer_command_lines(render(tool("helm")))

    upgrades = [argv for argv in lines.values() if argv[:2] == ["db", "upgrade"]]
    assert [_parser().parse_args(argv).config for argv in upgrades] == [
        Path("/etc/observer/config.yaml")
    ]
