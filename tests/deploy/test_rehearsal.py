"""The chart's pods rehearsed on this machine (tests/deploy/rehearsal.py) for the default values
and every CI value set, and every observer command line any rendered pod runs through the real
parser."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from observer.cli import _parser
from tests import components
from tests.deploy.chart import pod_spec, render, tool
from tests.deploy.rehearsal import ROOT_PREFIX, Rehearsal, cluster_for, helm_test_pods, workloads
from tests.deploy.test_chart_args import VALUE_IDS, VALUE_SETS, entrypoint

pytestmark = pytest.mark.chart

# What the rehearsal reads of each render that passed: a value set that renders the same pods,
# Services and ConfigMaps as one before it (monitors and rules aside) has passed already.
_PASSED: set[str] = set()


def rehearsed_part(objects: list[dict[str, Any]]) -> str:
    pods = [*workloads(objects), *helm_test_pods(objects)]
    mounted = {
        v["configMap"]["name"]
        for p in pods
        for v in pod_spec(p).get("volumes", [])
        if "configMap" in v
    }
    read = pods + [o for o in objects if o["kind"] == "Service"]
    read += [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] in mounted]
    return json.dumps(read, sort_keys=True)


# The agents run on the stand-in NVML; the postgres and slurm value sets use those components.
@pytest.mark.fake_nvml
@pytest.mark.parametrize(
    "values", [components.named(v, name) for v, name in zip(VALUE_SETS, VALUE_IDS, strict=True)]
)
def test_every_pod_runs_as_rendered_until_ready_and_passes_the_helm_test(
    values: Path | None,
) -> None:
    objects = render(tool("helm"), *([values] if values else []))
    if rehearsed_part(objects) in _PASSED:
        return
    with tempfile.TemporaryDirectory(prefix=ROOT_PREFIX) as name:
        root = Path(name)
        root.chmod(0o755)  # the pods' users reach their roots through it
        with cluster_for(objects, root) as cluster:
            Rehearsal(objects, root, cluster).run()
    _PASSED.add(rehearsed_part(objects))


def pod_specs(node: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec inside an object, whatever its kind (Pod, Deployment, Job, CronJob...)."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield node
            return
        for value in node.values():
            yield from pod_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from pod_specs(value)


@pytest.mark.parametrize("values", VALUE_SETS, ids=VALUE_IDS)
def test_every_observer_command_line_of_every_pod_parses(values: Path | None) -> None:
    refused: dict[str, str] = {}
    parsed = []
    for obj in render(tool("helm"), *([values] if values else [])):
        for spec in pod_specs(obj.get("spec")):
            for container in [*spec.get("initContainers", []), *spec["containers"]]:
                argv = [*(container.get("command") or entrypoint()), *container.get("args", [])]
                if Path(argv[0]).name != "observer":
                    continue
                where = f"{obj['kind']} {obj['metadata']['name']}/{container['name']}"
                stderr = io.StringIO()
                with contextlib.redirect_stderr(stderr):
                    try:
                        _parser().parse_args(argv[1:])
                        parsed.append(where)
                    except SystemExit:
                        refused[where] = stderr.getvalue().strip().splitlines()[-1]

    assert refused == {}
    assert parsed, "no pod runs observer"
