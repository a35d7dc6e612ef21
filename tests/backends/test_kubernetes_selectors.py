"""The emulated API server's lists apply label and field selectors as a real one does, so the
backend's own selectors are tested: one that selects the wrong objects leaves the backend
blind, and its tests fail."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from observer.backends.base import MANAGED_BY_LABEL
from observer.domain import JobPhase, JobRequest, Workload
from tests.backends.k8s_harness import KubernetesHarness


@pytest.fixture
def k8s() -> Iterator[KubernetesHarness]:
    with KubernetesHarness() as harness:
        yield harness


LABELLED = {
    "plain": {},
    "a": {"tier": "gpu"},
    "b": {"tier": "cpu", "team": "x"},
    "c": {"tier": "gpu", "team": "y", "rank": "3"},
}


def pods_selected(
    k8s: KubernetesHarness, label_selector: str | None = None, field_selector: str | None = None
) -> list[str]:
    listed = k8s.core.list_namespaced_pod(
        "research", label_selector=label_selector, field_selector=field_selector
    ).items
    return sorted(str(pod.metadata.name) for pod in listed if pod.metadata)


@pytest.fixture
def labelled(k8s: KubernetesHarness) -> KubernetesHarness:
    for name, labels in LABELLED.items():
        body = {"metadata": {"name": name, "labels": labels}, "spec": {"containers": []}}
        k8s.core.create_namespaced_pod("research", body)
    return k8s


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("", ["a", "b", "c", "plain"]),
        ("tier=gpu", ["a", "c"]),
        ("tier==gpu", ["a", "c"]),
        ("tier!=gpu", ["b", "plain"]),  # an object without the label matches !=
        ("tier in (cpu, gpu)", ["a", "b", "c"]),
        ("tier notin (gpu)", ["b", "plain"]),  # ... and notin
        ("team", ["b", "c"]),
        ("!team", ["a", "plain"]),
        ("tier=gpu,team", ["c"]),  # every requirement holds
        ("team in (x,y),tier!=cpu", ["c"]),
        ("rank>2", ["c"]),
        ("rank<3", []),
    ],
)
def test_a_label_selector_keeps_what_each_requirement_says(
    labelled: KubernetesHarness, selector: str, selected: list[str]
) -> None:
    assert pods_selected(labelled, label_selector=selector) == selected


def test_a_label_selector_it_cannot_parse_is_a_bad_request(labelled: KubernetesHarness) -> None:
    with pytest.raises(client.ApiException) as refused:
        pods_selected(labelled, label_selector="tier in gpu")

    assert refused.value.status == 400
    assert "unable to parse requirement" in str(refused.value.body)


def test_field_selectors_read_the_fields_each_resource_declares(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(
        JobRequest("run-1", "hold", "research", None, Workload(1, duration_seconds=60))
    )
    k8s.settle(lambda: k8s.backend.jobs([job_id])[job_id].phase is JobPhase.RUNNING, 30)
    [pod] = k8s.pods_of(job_id)
    assert pod.spec is not None and pod.metadata is not None
    node, name = pod.spec.node_name, pod.metadata.name
    k8s.core.create_namespaced_pod(
        "research", {"metadata": {"name": "unscheduled"}, "spec": {"containers": []}}
    )

    assert pods_selected(k8s, field_selector=f"spec.nodeName={node}") == [name]
    assert pods_selected(k8s, field_selector="spec.nodeName=") == ["unscheduled"]
    assert pods_selected(k8s, field_selector="status.phase=Running") == [name]
    assert pods_selected(k8s, field_selector=f"metadata.name!={name}") == ["unscheduled"]
    assert pods_selected(k8s, field_selector=f"metadata.name={name},status.phase=Pending") == []


def test_a_field_no_registry_declares_is_refused_in_the_api_servers_words(
    k8s: KubernetesHarness,
) -> None:
    with pytest.raises(client.ApiException) as refused:
        k8s.batch.list_namespaced_job("research", field_selector="spec.parallelism=1")

    assert refused.value.status == 400
    assert "field label not supported: spec.parallelism" in str(refused.value.body)


def test_events_are_selected_by_type_and_involved_object(k8s: KubernetesHarness) -> None:
    for name, kind, event_type in (("w", "Pod", "Warning"), ("n", "Pod", "Normal")):
        body = {
            "metadata": {"name": name},
            "involvedObject": {"kind": kind, "name": f"pod-{name}"},
            "type": event_type,
            "reason": "Test",
        }
        k8s.core.create_namespaced_event("research", body)

    def events(selector: str) -> list[str]:
        listed = k8s.core.list_namespaced_event("research", field_selector=selector).items
        return sorted(str(event.metadata.name) for event in listed)

    assert events("type=Warning") == ["w"]
    assert events("involvedObject.name=pod-n,involvedObject.kind=Pod") == ["n"]


def test_the_backend_finds_its_probe_jobs_among_decoys(k8s: KubernetesHarness) -> None:
    """A tenant's own Jobs, one labelled like a probe's pods: the backend's selectors must
    keep them out, and keep its own in."""
    probe = k8s.backend.submit(
        JobRequest("run-1", "hold", "research", None, Workload(1, duration_seconds=60))
    )
    for name, labels in (("tenant-train", {}), ("tenant-mimic", {MANAGED_BY_LABEL: "someone"})):
        k8s.batch.create_namespaced_job(
            "research",
            {
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": k8s.settings.image, "resources": {}}
                            ],
                        },
                    }
                },
            },
        )
    k8s.settle(lambda: k8s.backend.jobs([probe])[probe].phase is JobPhase.RUNNING, 30)

    held = k8s.backend.probe_jobs()

    assert [(job.job_id, job.phase, job.run_id) for job in held] == [
        (probe, JobPhase.RUNNING, "run-1")
    ]
