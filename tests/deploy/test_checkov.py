"""checkov over the rendered chart: the defaults, every value set under helm/observer/ci/ and
an image pinned by digest. A plain `checkov -f rendered.yaml --framework kubernetes` reports
no failed check; every exception is a `checkov.io/skip<N>: CKV_..=<why>` annotation on the
object it concerns. All renders are scanned by one checkov run (-d): a few seconds in all."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import CHART, CI_VALUES, helm_args, run, tool

pytestmark = pytest.mark.chart

DIGEST = "sha256:" + "0" * 64
RENDERS: dict[str, list[str]] = {
    "defaults": [],
    **{p.name.removesuffix("-values.yaml"): helm_args(p) for p in CI_VALUES},
    "digest": helm_args(sets={"image.digest": DIGEST}),
}
SKIP_KEY = re.compile(r"^checkov\.io/skip\d+$")
SKIP_VALUE = re.compile(r"^(?P<check>CKV2?_K8S_\d+)=(?P<reason>.*)$")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    helm = tool("helm")
    folder = tmp_path_factory.mktemp("rendered")
    for name, args in RENDERS.items():
        out = run(helm, "template", "t", CHART, "--namespace", "gpu-soak", *args).stdout
        (folder / f"{name}.yaml").write_text(out)
    return folder


@pytest.fixture(scope="module")
def checkov_report(rendered: Path) -> dict[str, Any]:
    result = run(
        tool("checkov"),
        "-d",
        rendered,
        "--framework",
        "kubernetes",
        "--output",
        "json",
        check=False,
        timeout=600,
    )
    assert result.returncode in (0, 1), result.stderr  # 1: failed checks, read below
    parsed = json.loads(result.stdout)
    (kubernetes,) = parsed if isinstance(parsed, list) else [parsed]
    assert kubernetes["check_type"] == "kubernetes", kubernetes
    return dict(kubernetes)


def test_every_render_was_scanned(checkov_report):
    files = {Path(c["file_path"]).stem for c in checkov_report["results"]["passed_checks"]}
    assert files == set(RENDERS)


def test_no_check_fails(checkov_report):
    failed = [
        f"{Path(c['file_path']).stem}: {c['check_id']} {c['check_name']} ({c['resource']})"
        for c in checkov_report["results"]["failed_checks"]
    ]
    assert failed == []


def test_every_skip_carries_its_reason(checkov_report):
    skipped = checkov_report["results"]["skipped_checks"]
    assert skipped, "the chart has justified exceptions (hostPID, uid 0): none was read"
    for check in skipped:
        assert check["check_result"]["suppress_comment"].strip(), check["check_id"]


def test_every_skip_annotation_names_a_check_and_a_reason(rendered: Path):
    annotations = 0
    for path in sorted(rendered.glob("*.yaml")):
        for obj in (doc for doc in yaml.safe_load_all(path.read_text()) if doc):
            for key, value in (obj["metadata"].get("annotations") or {}).items():
                if not key.startswith("checkov.io/"):
                    continue
                annotations += 1
                where = f"{path.stem} {obj['kind']}/{obj['metadata']['name']} {key}"
                assert SKIP_KEY.match(key), where
                found = SKIP_VALUE.match(value)
                assert found, where
                assert len(found["reason"].split()) >= 3, where


def test_a_digest_leaves_nothing_to_excuse_about_the_image(rendered: Path):
    def image_skips(name: str) -> set[str]:
        text = (rendered / f"{name}.yaml").read_text()
        return set(re.findall(r"CKV_K8S_(?:43|15)=", text))

    assert image_skips("defaults") == {"CKV_K8S_43=", "CKV_K8S_15="}
    assert image_skips("digest") == set()
