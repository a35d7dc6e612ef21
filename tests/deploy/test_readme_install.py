"""The README's Kubernetes install is self-contained: its commands, run as they are written
(kubectl and `helm install` with `--dry-run=client`, a label with `--local`, and the README's
own `my-values.yaml`), make every
namespace and Secret the release then uses, push the image its pods run, and leave each pod in
a namespace whose Pod Security level admits it. The chart's README shows the same commands."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.backends.pod_security import (
    ENFORCE_LABEL,
    PRIVILEGED,
    RESTRICTED,
    pod_security_refusal,
)
from tests.deploy.chart import CHART, REPO, all_containers, config_of, pod_spec, run, tool

pytestmark = pytest.mark.chart

WORKLOADS = ("Deployment", "DaemonSet", "Pod")


def install_section(readme: Path, heading: str | None) -> tuple[list[list[str]], str | None]:
    """The first sh block (after `heading`), as commands with their continuation lines joined,
    and the yaml block that follows it (my-values.yaml), if any."""
    text = readme.read_text()
    if heading:
        text = text[text.index(heading) :]
    sh = re.search(r"```sh\n(.*?)```", text, re.S)
    assert sh, f"{readme.name}: no sh block"
    values = re.search(r"```yaml\n(.*?)```", text[sh.end() :], re.S)
    lines = sh.group(1).replace("\\\n", " ").splitlines()
    commands = [shlex.split(line) for line in lines if line.strip() and not line.startswith("#")]
    return commands, values.group(1) if values else None


class Cluster:
    """What the commands made: objects by (kind, namespace, name), the images pushed."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.built: list[str] = []
        self.pushed: list[str] = []
        self.release: list[dict[str, Any]] = []
        self.tested: list[str] = []

    def play(self, command: list[str], my_values: str) -> None:
        tool_name, args = command[0], command[1:]
        if tool_name == "docker":  # no daemon here: what was built and pushed is recorded
            if args[0] == "build":
                self.built.append(args[args.index("-t") + 1])
            else:
                assert args[0] == "push", command
                self.pushed.append(args[1])
        elif tool_name == "kubectl":
            self.kubectl(args)
        else:
            assert tool_name == "helm", command
            self.helm(args, my_values)

    def kubectl(self, args: list[str]) -> None:
        if "label" in args:
            at = args.index("label")
            kind, name, labels = args[at + 1], args[at + 2], args[at + 3 :]
            key = next(k for k in self.objects if k[0].lower() == kind and k[2] == name)
            made = self.work / "object.yaml"
            made.write_text(yaml.safe_dump(self.objects[key]))
            out = run(tool("kubectl"), "label", "--local", "-f", made, *labels, "-o", "yaml")
        else:
            out = run(tool("kubectl"), *args, "--dry-run=client", "-o", "yaml")
        self.add(yaml.safe_load(out.stdout))

    def helm(self, args: list[str], my_values: str) -> None:
        if args[0] == "test":
            self.tested.append(args[1])
            return
        assert args[0] == "install", args
        (self.work / "my-values.yaml").write_text(my_values)
        # relative paths (the chart, my-values.yaml) as the reader's: the clone, their file
        where = {"helm/observer": str(CHART), "my-values.yaml": str(self.work / "my-values.yaml")}
        args = [where.get(a, a) for a in args]
        out = run(tool("helm"), *args, "--dry-run=client", "-o", "json", timeout=120)
        release = json.loads(out.stdout)
        documents = [release["manifest"], *(hook["manifest"] for hook in release["hooks"])]
        for document in documents:
            for obj in yaml.safe_load_all(document):
                if obj:
                    self.release.append(obj)
                    self.add(obj)

    def add(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        namespace = None if obj["kind"] == "Namespace" else meta.get("namespace")
        self.objects[(obj["kind"], namespace, meta["name"])] = obj

    def namespaces(self) -> dict[str, dict[str, str]]:
        return {
            name: obj["metadata"].get("labels") or {}
            for (kind, _, name), obj in self.objects.items()
            if kind == "Namespace"
        }


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    commands, my_values = install_section(REPO / "README.md", "## Install on Kubernetes")
    assert my_values, "the README's install shows no my-values.yaml"
    cluster = Cluster(tmp_path_factory.mktemp("install"))
    for command in commands:
        cluster.play(command, my_values)
    return cluster


def test_the_chart_readme_shows_the_same_install():
    readme, _ = install_section(REPO / "README.md", "## Install on Kubernetes")
    chart, _ = install_section(CHART / "README.md", None)
    assert chart == readme


def test_every_namespace_the_release_uses_is_made_by_the_install(installed):
    namespaces = installed.namespaces()
    used = {
        obj["metadata"]["namespace"] for obj in installed.release if "namespace" in obj["metadata"]
    }
    probed = config_of(installed.release)["controller"]["kubernetes"]["namespaces"]

    assert used and probed
    assert used | set(probed) <= set(namespaces)


def test_every_secret_a_pod_reads_is_made_by_the_install(installed):
    wanted = set()
    for obj in installed.release:
        if obj["kind"] not in WORKLOADS:
            continue
        namespace, spec = obj["metadata"]["namespace"], pod_spec(obj)
        for container in all_containers(spec):
            for env in container.get("env", []):
                if ref := env.get("valueFrom", {}).get("secretKeyRef"):
                    wanted.add((namespace, ref["name"], ref["key"], bool(ref.get("optional"))))
    made = {
        (ns, name): obj.get("data", {})
        for (kind, ns, name), obj in installed.objects.items()
        if kind == "Secret"
    }

    assert wanted, "the README's install uses no Secret: the test would check nothing"
    for namespace, name, key, optional in wanted:
        assert optional or key in made.get((namespace, name), {}), f"{namespace}/{name} {key}"


def test_every_pod_runs_the_pushed_image(installed):
    images = {
        container["image"]
        for obj in installed.release
        if obj["kind"] in WORKLOADS
        for container in all_containers(pod_spec(obj))
    }
    assert installed.built == installed.pushed
    assert images == set(installed.pushed)
    assert installed.tested == ["observer"]


def test_every_pod_is_admitted_by_its_namespaces_pod_security_level(installed):
    namespaces = installed.namespaces()
    levels = {}
    for obj in installed.release:
        if obj["kind"] not in WORKLOADS:
            continue
        namespace = obj["metadata"]["namespace"]
        level = namespaces[namespace].get(ENFORCE_LABEL, PRIVILEGED)  # unlabelled: privileged
        levels[namespace] = level
        assert pod_security_refusal(level, obj["metadata"]["name"], pod_spec(obj)) is None
    assert RESTRICTED in levels.values(), "no namespace enforces restricted: nothing is checked"
