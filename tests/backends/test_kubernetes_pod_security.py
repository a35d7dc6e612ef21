"""Probe pods in tenant namespaces that enforce Pod Security `restricted`: the Job the backend
builds from its settings, the emulated admission that refuses a pod as the API server does,
and probes that run to success in such a namespace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from observer.backends.kubernetes.manifests import job_manifest, job_name
from observer.domain import Behaviour, JobPhase, JobRequest, Workload
from observer.errors import ConfigError
from observer.settings import load_settings
from observer.settings.controller import KubernetesSettings
from tests.backends.k8s_harness import KubernetesHarness
from tests.backends.pod_security import BASELINE, ENFORCE_LABEL, RESTRICTED, pod_security_refusal

PLAIN_POD = {
    "containers": [{"name": "probe", "image": "cuda:12", "command": ["sleep", "5"]}],
    "restartPolicy": "Never",
}


def probe(run_id: str, tenant: str, priority: str | None = None, **workload: Any) -> JobRequest:
    workload.setdefault("gpus_per_node", 1)
    workload.setdefault("duration_seconds", 5.0)
    return JobRequest(run_id, "hold", tenant, None, Workload(**workload), priority)


def pod_spec(settings: KubernetesSettings, request: JobRequest) -> dict[str, Any]:
    """The probe's pod spec as the API receives it (camelCase JSON)."""
    job = job_manifest(settings, request, "observer-hold-0123456789")
    spec: dict[str, Any] = serialize(job)["spec"]["template"]["spec"]
    return spec


def serialize(job: client.V1Job) -> dict[str, Any]:
    body: dict[str, Any] = client.ApiClient().sanitize_for_serialization(job)
    return body


# --- admission ---------------------------------------------------------------------------------


def test_a_pod_without_a_security_context_is_refused_with_the_api_servers_words() -> None:
    refusal = pod_security_refusal(RESTRICTED, "observer-hold-abcde", PLAIN_POD)

    assert refusal == (
        'pods "observer-hold-abcde" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "probe" must set '
        "securityContext.allowPrivilegeEscalation=false), "
        'unrestricted capabilities (container "probe" must set '
        'securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "probe" must set '
        "securityContext.runAsNonRoot=true), "
        'seccompProfile (pod or container "probe" must set securityContext.seccompProfile.type '
        'to "RuntimeDefault" or "Localhost")'
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"hostPID": True}, "host namespaces (hostPID=true)"),
        (
            {"volumes": [{"name": "proc", "hostPath": {"path": "/proc"}}]},
            'restricted volume types (volume "proc" uses restricted volume type "hostPath")',
        ),
        (
            {"securityContext": {"runAsNonRoot": True, "runAsUser": 0}},
            "runAsUser=0 (pod must not set runAsUser=0)",
        ),
        (
            {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "Unconfined"}}},
            'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
        ),
    ],
)
def test_each_restricted_control_refuses_what_it_forbids(
    change: dict[str, Any], words: str
) -> None:
    compliant = pod_spec(KubernetesSettings(), probe("run-1", "prod"))

    assert pod_security_refusal(RESTRICTED, "p", compliant) is None
    refusal = pod_security_refusal(RESTRICTED, "p", {**compliant, **change})
    assert refusal is not None and words in refusal


def test_adding_a_capability_other_than_net_bind_service_is_refused() -> None:
    spec = pod_spec(KubernetesSettings(), probe("run-1", "prod"))
    [container] = spec["containers"]
    container["securityContext"]["capabilities"]["add"] = ["NET_BIND_SERVICE", "SYS_ADMIN"]

    refusal = pod_security_refusal(RESTRICTED, "p", spec)

    assert refusal is not None
    assert (
        'unrestricted capabilities (container "probe" must not include "SYS_ADMIN" in '
        "securityContext.capabilities.add)"
    ) in refusal


# --- the probe pod the backend builds ----------------------------------------------------------


def test_a_probe_pod_runs_unprivileged_without_an_api_token() -> None:
    spec = pod_spec(KubernetesSettings(run_as_user=2000, run_as_group=3000), probe("r", "prod"))

    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 2000,
        "runAsGroup": 3000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    [container] = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    [tmp] = container["volumeMounts"]
    [volume] = spec["volumes"]
    assert tmp["mountPath"] == "/tmp" and volume["name"] == tmp["name"]
    assert "emptyDir" in volume


def test_by_default_probes_run_as_a_non_root_uid_and_gid() -> None:
    context = pod_spec(KubernetesSettings(), probe("r", "prod"))["securityContext"]

    assert (context["runAsUser"], context["runAsGroup"]) == (65532, 65532)


def test_probe_pods_carry_the_configured_placement_and_pull_secrets() -> None:
    settings = KubernetesSettings.model_validate(
        {
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "soak", "value": "yes", "effect": "NoExecute", "toleration_seconds": 60},
            ],
            "node_selector": {"pool": "soak"},
            "priority_class_name": "soak-probes",
            "image_pull_secrets": ["registry-a", "registry-b"],
        }
    )

    spec = pod_spec(settings, probe("r", "prod"))

    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {
            "key": "soak",
            "operator": "Equal",
            "value": "yes",
            "effect": "NoExecute",
            "tolerationSeconds": 60,
        },
    ]
    assert spec["nodeSelector"] == {"pool": "soak"}
    assert spec["priorityClassName"] == "soak-probes"
    assert spec["imagePullSecrets"] == [{"name": "registry-a"}, {"name": "registry-b"}]


def test_a_tenants_own_priority_wins_over_the_probes_default() -> None:
    settings = KubernetesSettings(priority_class_name="soak-probes")
    request = probe("r", "prod", priority="prod-high")

    assert pod_spec(settings, request)["priorityClassName"] == "prod-high"


def test_without_placement_settings_the_pod_leaves_placement_to_the_cluster() -> None:
    spec = pod_spec(KubernetesSettings(), probe("r", "prod"))

    assert {"tolerations", "nodeSelector", "priorityClassName", "imagePullSecrets"}.isdisjoint(spec)


def test_tolerations_the_api_would_refuse_are_refused_at_load(tmp_path: Path) -> None:
    config = tmp_path / "observer.yaml"
    config.write_text(
        "controller:\n  kubernetes:\n    tolerations:\n"
        "      - {key: a, operator: Exists, value: x}\n"
        "      - {operator: Equal, value: x}\n"
        "      - {key: a, effect: NoSchedule, toleration_seconds: 5}\n"
    )

    with pytest.raises(ConfigError) as caught:
        load_settings(config)

    where = "controller.kubernetes.tolerations"
    assert caught.value.problems == [
        f"{where}.0.value: must be empty when operator is Exists",
        f"{where}.1.operator: must be Exists when key is unset",
        f"{where}.2.toleration_seconds: is allowed only with effect NoExecute",
    ]


# --- end to end in a namespace that enforces `restricted` --------------------------------------


@pytest.fixture
def k8s() -> Iterator[KubernetesHarness]:
    with KubernetesHarness() as harness:
        yield harness


def test_the_harness_enforces_restricted_on_one_tenant_namespace(k8s: KubernetesHarness) -> None:
    enforced = {
        tenant: k8s.server.namespace_labels[tenant].get(ENFORCE_LABEL) for tenant in k8s.tenants
    }

    assert enforced == {"research": None, "prod": "restricted"}


@pytest.mark.parametrize(
    "behaviour", [Behaviour.SLEEP, Behaviour.LOG_CANARY, Behaviour.GPU_BUSY, Behaviour.OOM]
)
def test_probes_run_in_a_restricted_namespace(k8s: KubernetesHarness, behaviour: Behaviour) -> None:
    job_id = k8s.backend.submit(
        probe(f"run-{behaviour}", "prod", behaviour=behaviour, log_lines=2, log_interval_seconds=1)
    )

    k8s.settle(lambda: k8s.backend.jobs([job_id])[job_id].phase.finished, timeout_seconds=60)

    done = k8s.backend.jobs([job_id])[job_id]
    expected = JobPhase.FAILED if behaviour is Behaviour.OOM else JobPhase.SUCCEEDED
    assert (done.phase, done.reason) == (
        expected,
        "OOMKilled" if behaviour is Behaviour.OOM else None,
    )
    assert len(k8s.pods_of(job_id)) == 1


def test_a_probe_without_a_security_context_never_gets_a_pod_there(k8s: KubernetesHarness) -> None:
    request = probe("run-plain", "prod")
    name = job_name(request.probe, request.run_id)
    job = job_manifest(k8s.settings, request, name)
    assert job.spec is not None and job.spec.template.spec is not None
    spec = job.spec.template.spec
    spec.security_context = None
    for container in spec.containers:
        container.security_context = None
    k8s.batch.create_namespaced_job("prod", job)
    job_id = f"prod/{name}"

    k8s.settle(lambda: k8s.backend.jobs([job_id])[job_id].reason is not None, timeout_seconds=10)

    refused = k8s.backend.jobs([job_id])[job_id]
    assert (refused.phase, refused.reason) == (JobPhase.PENDING, "FailedCreate")
    assert refused.message is not None
    assert refused.message.startswith(f'Error creating: pods "{name}-')
    assert 'violates PodSecurity "restricted:latest": allowPrivilegeEscalation' in refused.message
    assert k8s.pods_of(job_id) == []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"hostPID": True}, "host namespaces (hostPID=true)"),
        (
            {"volumes": [{"name": "proc", "hostPath": {"path": "/proc"}}]},
            'hostPath volumes (volume "proc")',
        ),
        (
            {"containers": [{"name": "probe", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
            'hostPort (container "probe" uses hostPort 80)',
        ),
        (
            {"containers": [{"name": "probe", "securityContext": {"privileged": True}}]},
            'privileged (container "probe" must not set securityContext.privileged=true)',
        ),
        (
            {
                "containers": [
                    {"name": "p", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}
                ]
            },
            'non-default capabilities (container "p" must not include "SYS_ADMIN" in '
            "securityContext.capabilities.add)",
        ),
    ],
)
def test_baseline_refuses_what_it_forbids_and_admits_what_only_restricted_forbids(
    change: dict[str, Any], words: str
) -> None:
    refusal = pod_security_refusal(BASELINE, "p", {**PLAIN_POD, **change})

    assert refusal is not None and 'violates PodSecurity "baseline:latest"' in refusal
    assert words in refusal
    assert pod_security_refusal(BASELINE, "p", PLAIN_POD) is None  # restricted would refuse it
    assert pod_security_refusal(RESTRICTED, "p", PLAIN_POD) is not None
