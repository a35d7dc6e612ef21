"""Probe pods every tenant namespace admits: their CPU and memory, their pool's placement, and,
where admission still refuses them, an outcome in the API server's words at once rather than
a wait until the deadline. Against the emulated API server's admission (admission.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from observer.backends.kubernetes.manifests import job_manifest, job_name
from observer.domain import Expectation, JobPhase, JobRequest, JobStatus, Outcome, Workload
from observer.errors import ConfigError
from observer.probes.outcome import judge
from observer.settings import load_settings
from observer.settings.controller import KubernetesSettings
from tests.backends.admission import LimitRange
from tests.backends.k8s_harness import POOL_LABEL, KubernetesHarness


def probe(run_id: str, tenant: str = "research", **workload: Any) -> JobRequest:
    workload.setdefault("gpus_per_node", 1)
    workload.setdefault("duration_seconds", 5.0)
    return JobRequest(run_id, "hold", tenant, None, Workload(**workload))


def pod_spec(settings: KubernetesSettings, request: JobRequest) -> dict[str, Any]:
    job = job_manifest(settings, request, "observer-hold-0123456789")
    spec: dict[str, Any] = client.ApiClient().sanitize_for_serialization(job)["spec"]
    return spec["template"]["spec"]


@pytest.fixture
def k8s() -> Iterator[KubernetesHarness]:
    with KubernetesHarness() as harness:
        yield harness


def settled(k8s: KubernetesHarness, job_id: str) -> JobStatus:
    k8s.settle(lambda: k8s.backend.jobs([job_id])[job_id].phase.finished, timeout_seconds=60)
    return k8s.backend.jobs([job_id])[job_id]


def refused(k8s: KubernetesHarness, job_id: str) -> JobStatus:
    k8s.settle(lambda: k8s.backend.jobs([job_id])[job_id].reason is not None, timeout_seconds=10)
    status = k8s.backend.jobs([job_id])[job_id]
    assert (status.phase, status.reason, k8s.pods_of(job_id)) == (
        JobPhase.PENDING,
        "FailedCreate",
        [],
    )
    return status


# --- what the pod asks for -------------------------------------------------------------------


def test_every_probe_pod_states_cpu_and_memory_requests_within_its_limits() -> None:
    spec = pod_spec(KubernetesSettings(), probe("r"))

    [resources] = [c["resources"] for c in spec["containers"]]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert {"cpu", "memory"} <= set(resources["limits"])


def test_a_probes_size_and_then_its_tenants_override_the_programs() -> None:
    settings = KubernetesSettings.model_validate(
        {
            "probe_resources": {"hold": {"cpu_limit": "2", "memory_limit": "1Gi"}},
            "tenant_resources": {"prod": {"memory_limit": "256Mi"}},
        }
    )

    research = pod_spec(settings, probe("r"))["containers"][0]["resources"]
    prod = pod_spec(settings, probe("r", "prod"))["containers"][0]["resources"]

    assert (research["limits"]["cpu"], research["limits"]["memory"]) == ("2", "1Gi")
    assert (prod["limits"]["cpu"], prod["limits"]["memory"]) == ("2", "256Mi")
    assert prod["requests"] == research["requests"]  # neither changed a request


def test_a_tenants_probes_take_their_pools_placement() -> None:
    settings = KubernetesSettings.model_validate(
        {
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "node_selector": {"soak": "yes"},
            "priority_class_name": "soak",
            "runtime_class_name": "runc-gpu",
            "pools": {
                "H200": {
                    "node_selector": {"zone": "a"},
                    "tolerations": [{"key": "h200", "value": "x", "effect": "NoSchedule"}],
                    "runtime_class_name": "nvidia",
                    "priority_class_name": "h200-probes",
                }
            },
            "tenant_pools": {"prod": "H200"},
        }
    )

    pooled, anywhere = pod_spec(settings, probe("r", "prod")), pod_spec(settings, probe("r"))

    assert pooled["nodeSelector"] == {"soak": "yes", POOL_LABEL: "H200", "zone": "a"}
    assert [t["key"] for t in pooled["tolerations"]] == ["gpu", "h200"]
    assert (pooled["runtimeClassName"], pooled["priorityClassName"]) == ("nvidia", "h200-probes")
    assert anywhere["nodeSelector"] == {"soak": "yes"}
    assert [t["key"] for t in anywhere["tolerations"]] == ["gpu"]
    assert (anywhere["runtimeClassName"], anywhere["priorityClassName"]) == ("runc-gpu", "soak")


def test_placement_and_sizes_naming_what_does_not_exist_are_refused_at_load(
    tmp_path: Path,
) -> None:
    config = tmp_path / "observer.yaml"
    config.write_text(
        "controller:\n  tenants: [{name: prod}]\n  kubernetes:\n"
        "    pools: {H200: {}}\n"
        "    tenant_pools: {prod: A100, dev: H200}\n"
        "    tenant_resources: {dev: {cpu_limit: '1'}}\n"
        "    probe_resources: {shrot: {cpu_limit: '1'}}\n"
    )

    with pytest.raises(ConfigError) as caught:
        load_settings(config)

    assert sorted(p.split(":")[0] for p in caught.value.problems) == [
        "controller.kubernetes.probe_resources.shrot",
        "controller.kubernetes.tenant_pools.dev",
        "controller.kubernetes.tenant_pools.prod",
        "controller.kubernetes.tenant_resources.dev",
    ]


def test_a_size_that_is_not_a_quantity_is_refused_at_load(tmp_path: Path) -> None:
    config = tmp_path / "observer.yaml"
    config.write_text(
        "controller:\n  kubernetes:\n    runtime_class_name: nvidia\n"
        "    tenant_resources: {x: {cpu_limit: 2 cores}}\n"
    )

    with pytest.raises(ConfigError) as caught:
        load_settings(config)

    assert any("tenant_resources.x.cpu_limit" in p for p in caught.value.problems)


# --- admitted where a namespace asks for it --------------------------------------------------


def test_a_probe_runs_where_a_compute_quota_covers_cpu_and_memory(k8s: KubernetesHarness) -> None:
    covered = {"requests.cpu": "8", "limits.cpu": "16", "requests.memory": "8Gi"}
    k8s.set_quota("research", gpus=8, compute=covered | {"limits.memory": "16Gi"})

    done = settled(k8s, k8s.backend.submit(probe("run-1")))

    assert done.phase is JobPhase.SUCCEEDED


def test_a_limit_range_defaults_what_a_pod_leaves_out(k8s: KubernetesHarness) -> None:
    k8s.set_quota("research", compute={"requests.cpu": "8"})
    k8s.set_limit_range("research", LimitRange("defaults", default={"cpu": "1"}))
    body = {"metadata": {"name": "own"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}

    k8s.core.create_namespaced_pod("research", body)

    [own] = k8s.core.list_namespaced_pod("research", field_selector="metadata.name=own").items
    assert own.spec is not None
    resources = own.spec.containers[0].resources
    assert resources is not None
    assert (resources.limits, resources.requests) == ({"cpu": "1"}, {"cpu": "1"})


def test_a_tenants_override_fits_its_limit_range() -> None:
    small = {"prod": {"cpu_request": "100m", "cpu_limit": "250m"}}
    with KubernetesHarness(overrides={"tenant_resources": small}) as sized:
        sized.set_limit_range("prod", LimitRange("small", max={"cpu": "250m"}))

        done = settled(sized, sized.backend.submit(probe("run-1", "prod")))

    assert done.phase is JobPhase.SUCCEEDED


# --- refused for good: an outcome in the API server's words at once ---------------------------


def _without_resources(k8s: KubernetesHarness) -> tuple[str, str]:
    """A Job whose pod states no CPU or memory, in a namespace whose quota covers both."""
    k8s.set_quota("research", compute={"requests.cpu": "8", "limits.memory": "8Gi"})
    job_id = _create(k8s, "research", lambda spec: setattr(spec.containers[0], "resources", None))
    return job_id, "failed quota: research-quota: must specify limits.memory for: probe; " + (
        "requests.cpu for: probe"
    )


def _over_its_limit_range(k8s: KubernetesHarness) -> tuple[str, str]:
    k8s.set_limit_range("research", LimitRange("small", max={"cpu": "250m"}))
    job_id = k8s.backend.submit(probe("run-1"))
    namespace, name = job_id.split("/")
    spec = k8s.batch.read_namespaced_job(name, namespace).spec
    assert spec is not None and spec.template.spec is not None
    [container] = spec.template.spec.containers
    assert container.resources is not None and container.resources.limits is not None
    limit = container.resources.limits["cpu"]
    return job_id, f"maximum cpu usage per Container is 250m, but limit is {limit}"


def _without_a_security_context(k8s: KubernetesHarness) -> tuple[str, str]:
    def unsecured(spec: client.V1PodSpec) -> None:
        spec.security_context = None
        spec.containers[0].security_context = None

    return _create(k8s, "prod", unsecured), 'violates PodSecurity "restricted:latest"'


def _denied_by_a_webhook(k8s: KubernetesHarness) -> tuple[str, str]:
    k8s.deny_pods("research", "validate.kyverno.svc-fail", "probes need a cost-centre label")
    words = (
        'admission webhook "validate.kyverno.svc-fail" denied the request: probes need a '
        "cost-centre label"
    )
    return k8s.backend.submit(probe("run-1")), words


def _create(k8s: KubernetesHarness, tenant: str, change: Callable[[client.V1PodSpec], None]) -> str:
    request = probe("run-x", tenant)
    name = job_name(request.probe, request.run_id)
    job = job_manifest(k8s.settings, request, name)
    assert job.spec is not None and job.spec.template.spec is not None
    change(job.spec.template.spec)
    k8s.batch.create_namespaced_job(tenant, job)
    return f"{tenant}/{name}"


@pytest.mark.parametrize(
    "refuse",
    [_without_resources, _over_its_limit_range, _without_a_security_context, _denied_by_a_webhook],
)
@pytest.mark.parametrize("expectation", [Expectation.SUCCEED, Expectation.BLOCKED])
def test_a_pod_admission_refuses_ends_the_probe_rejected_in_the_api_servers_words(
    k8s: KubernetesHarness,
    refuse: Callable[[KubernetesHarness], tuple[str, str]],
    expectation: Expectation,
) -> None:
    job_id, words = refuse(k8s)

    status = refused(k8s, job_id)

    assert status.message is not None and words in status.message
    assert status.message.startswith("Error creating: ")
    assert judge(expectation, status) is Outcome.REJECTED
