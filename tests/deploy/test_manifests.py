"""Every rendered manifest against the Kubernetes API schemas (kubernetes-validate, strict:
unknown fields rejected) of the oldest and newest Kubernetes the chart supports, and the
prometheus-operator objects against the fields of their CRDs that the chart uses."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.chart import CI_VALUES, optional, render, tool

pytestmark = pytest.mark.chart

# Chart.yaml: kubeVersion >=1.27; the newest schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.27.0", "1.35.0")
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}

DURATION = {
    "type": "string",
    "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
    "(([0-9]+)s)?(([0-9]+)ms)?)$",
}
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"matchLabels": LABELS, "matchExpressions": {"type": "array"}},
}
RELABELINGS = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "sourceLabels": {"type": "array", "items": {"type": "string"}},
            "separator": {"type": "string"},
            "targetLabel": {"type": "string"},
            "regex": {"type": "string"},
            "modulus": {"type": "integer"},
            "replacement": {"type": "string"},
            "action": {"type": "string"},
        },
    },
}
ENDPOINT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["port"],
    "properties": {
        "port": {"type": "string"},
        "path": {"type": "string"},
        "interval": DURATION,
        "scrapeTimeout": DURATION,
        "honorLabels": {"type": "boolean"},
        "relabelings": RELABELINGS,
        "metricRelabelings": RELABELINGS,
    },
}


def _crd(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"type": "string"},
            "metadata": {
                "type": "object",
                "required": ["name", "namespace"],
                "properties": {"name": {"type": "string"}, "labels": LABELS},
            },
            "spec": spec,
        },
    }


def _monitor(endpoints_key: str) -> dict[str, Any]:
    return _crd(
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["selector", endpoints_key],
            "properties": {
                "jobLabel": {"type": "string"},
                "selector": SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                endpoints_key: {"type": "array", "minItems": 1, "items": ENDPOINT},
            },
        }
    )


# The fields of the prometheus-operator CRDs (monitoring.coreos.com/v1) the chart renders.
CRD_SCHEMAS = {
    "ServiceMonitor": _monitor("endpoints"),
    "PodMonitor": _monitor("podMetricsEndpoints"),
    "PrometheusRule": _crd(
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": DURATION,
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["expr"],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": "string", "minLength": 1},
                                        "for": DURATION,
                                        "labels": LABELS,
                                        "annotations": LABELS,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        }
    ),
}


@pytest.fixture(scope="module")
def manifests() -> list[tuple[str, dict[str, Any]]]:
    helm = tool("helm")
    out = []
    for values in [None, *CI_VALUES]:
        name = values.name if values else "defaults"
        api = ("kueue.x-k8s.io/v1beta1",)
        for obj in render(helm, *([values] if values else []), api_versions=api):
            out.append((f"{name}: {obj['kind']}/{obj['metadata']['name']}", obj))
    return out


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_for_kubernetes(manifests, version: str):
    kubernetes_validate = optional("kubernetes_validate", "kubernetes-validate")
    problems = []
    checked = 0
    for where, obj in manifests:
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
            checked += 1
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{where}: {exc.message} at {'/'.join(map(str, exc.path))}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{where}: no schema ({exc})")
    assert not problems, "\n".join(problems)
    assert checked > 50


def test_prometheus_operator_objects_match_their_crds(manifests):
    jsonschema = optional("jsonschema", "kubernetes-validate")
    seen = set()
    for where, obj in manifests:
        if obj["kind"] in CRD_KINDS:
            seen.add(obj["kind"])
            errors = list(
                jsonschema.Draft202012Validator(CRD_SCHEMAS[obj["kind"]]).iter_errors(obj)
            )
            assert not errors, f"{where}: " + "; ".join(e.message for e in errors)
    assert seen == CRD_KINDS


def test_a_broken_manifest_is_caught():
    """The validation above is not vacuous: a misspelt field fails it."""
    kubernetes_validate = optional("kubernetes_validate", "kubernetes-validate")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "c", "image": "i", "securityContex": {}}]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, KUBERNETES_VERSIONS[0], strict=True)
