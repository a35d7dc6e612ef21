"""What the backend reads comes from informers (informer.py, caches.py): nodes and pods, and in
the probe namespaces Jobs, Warning events, ResourceQuotas and the queues' objects. One list,
then a watch that carries every change; a version the server has forgotten (410 Gone) costs
one list again; a watch that fails is blind time until it is back; a queue system whose CRDs
the cluster lacks is no queue until it is installed. Over real HTTP against the emulated API
server speaking versions, pages, selectors and watches (watches.py)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from kubernetes import client

from observer.backends.kubernetes import informer
from observer.backends.kubernetes.informer import View
from observer.domain import JobPhase
from observer.errors import BackendError
from tests.backends.k8s_harness import GPU, KubernetesHarness, timestamp


@pytest.fixture
def k8s() -> Iterator[KubernetesHarness]:
    with KubernetesHarness(nodes=3) as harness:
        yield harness


def allocated(k8s: KubernetesHarness) -> dict[str, int]:
    return {node.name: node.gpus_allocated for node in k8s.backend.snapshot().nodes}


def pods_view(k8s: KubernetesHarness) -> View[Any]:
    return next(view for view in k8s.backend.watched() if view.what.startswith("pods"))


def wait_for(holds: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not holds():
        assert time.monotonic() < deadline, "the informer did not get there"
        time.sleep(0.01)


def test_pods_added_and_deleted_after_the_first_list_show_without_listing_again(k8s):
    assert allocated(k8s) == {"gpu-node-0": 0, "gpu-node-1": 0, "gpu-node-2": 0}
    lists = k8s.server.lists["pods"]

    k8s.add_pod("prod", "notebook", 3, node="gpu-node-1")
    k8s.add_pod("research", "bare", 1, node="gpu-node-2")
    assert allocated(k8s) == {"gpu-node-0": 0, "gpu-node-1": 3, "gpu-node-2": 1}
    k8s.core.delete_namespaced_pod("bare", "research")
    k8s.core.patch_namespaced_pod("bare", "research", {"metadata": {"finalizers": []}})
    k8s.cordon("gpu-node-0")
    snapshot = k8s.backend.snapshot()

    assert {n.name: n.gpus_allocated for n in snapshot.nodes}["gpu-node-2"] == 0
    assert "SchedulingDisabled" in {n.name: n.state for n in snapshot.nodes}["gpu-node-0"]
    assert k8s.server.lists["pods"] == lists
    assert k8s.server.watches["pods"] == 1


def test_the_list_is_read_in_pages(k8s):
    for index in range(7):
        k8s.add_pod("prod", f"p-{index}", 0)
    with KubernetesHarness(nodes=1) as fresh:
        before = fresh.server.lists["pods"]
        for index in range(1200):  # over two pages of 500
            fresh.add_pod("prod", f"p-{index}", 0)
        fresh.backend.snapshot()
        assert fresh.server.lists["pods"] - before == 3
        assert len(pods_view(fresh)) == 1200


def test_a_forgotten_version_costs_one_list_again(k8s):
    k8s.backend.snapshot()
    k8s.server.bookmark_seconds = 3600  # no bookmark brings the watch up to date
    lists = k8s.server.lists["pods"]
    k8s.add_secret("prod", "unrelated", {"k": "v"})  # a version no pod watch sees

    k8s.compact_versions()
    wait_for(lambda: pods_view(k8s).lists == 2)
    k8s.add_pod("prod", "after", 2, node="gpu-node-0")

    assert allocated(k8s)["gpu-node-0"] == 2
    assert k8s.server.lists["pods"] == lists + 1


def test_a_watch_that_fails_is_blind_time_until_it_is_back(k8s):
    k8s.backend.snapshot()

    k8s.refuse_reads("pods")
    wait_for(lambda: not pods_view(k8s).up)
    since = re.escape(k8s.clock.now().isoformat())
    with pytest.raises(BackendError, match=f"pods in all namespaces: not watched since {since}"):
        k8s.backend.snapshot()
    wait_for(lambda: "list pods in all namespaces: 503" in (pods_view(k8s).error or ""))
    k8s.clock.advance(60)
    with pytest.raises(BackendError, match=f"not watched since {since}"):  # blind since then
        k8s.backend.snapshot()

    k8s.allow_reads("pods")
    wait_for(lambda: pods_view(k8s).up)
    k8s.add_pod("prod", "back", 1, node="gpu-node-1")
    assert allocated(k8s)["gpu-node-1"] == 1


def test_bookmarks_keep_a_quiet_watch_fresh(k8s):
    k8s.backend.snapshot()
    first = pods_view(k8s).last_event_at
    k8s.clock.advance(30)

    wait_for(lambda: pods_view(k8s).last_event_at != first)

    assert pods_view(k8s).last_event_at == k8s.clock.now()


# --- the probe namespaces' Jobs, Warning events, quotas and the queues' objects ----------------


def gpu_job(name: str, gpus: int) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"limits": {GPU: str(gpus)}}}
    return {
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


def event(name: str, job: client.V1Job, kind: str, reason: str, message: str) -> dict[str, Any]:
    meta = job.metadata
    assert meta is not None
    involved = {"apiVersion": "batch/v1", "kind": "Job", "name": meta.name, "uid": meta.uid}
    return {
        "metadata": {"name": name},
        "involvedObject": {**involved, "namespace": meta.namespace},
        "type": kind,
        "reason": reason,
        "message": message,
    }


def view_of(k8s: KubernetesHarness, what: str) -> View[Any]:
    return next(view for view in k8s.backend.watched() if view.what == what)


def test_after_the_first_read_no_read_lists_jobs_events_quotas_or_queues(k8s):
    k8s.install_queues()
    k8s.backend.snapshot()
    listed = Counter(k8s.server.lists)

    k8s.batch.create_namespaced_job("research", gpu_job("train", 1))
    k8s.set_quota("research", gpus=8)
    k8s.play_kueue("gpu-pool", gpus=4)
    k8s.backend.snapshot()
    k8s.backend.probe_jobs()
    k8s.backend.finished_jobs(k8s.clock.now() - timedelta(hours=1), k8s.clock.now())
    k8s.backend.quota_changes(k8s.clock.now() - timedelta(hours=1), k8s.clock.now())

    assert k8s.server.lists == listed
    per_namespace = ("jobs", "events", "resourcequotas", "workloads", "localqueues", "podgroups")
    assert {plural: k8s.server.watches[plural] for plural in per_namespace} == dict.fromkeys(
        per_namespace, len(k8s.tenants)
    )
    assert {plural: k8s.server.watches[plural] for plural in ("clusterqueues", "queues")} == {
        "clusterqueues": 1,
        "queues": 1,
    }


def test_a_job_and_its_warning_event_reach_the_next_snapshot_through_their_watches(k8s):
    k8s.backend.snapshot()
    listed = Counter(k8s.server.lists)

    k8s.batch.create_namespaced_job("research", gpu_job("train", 2))
    [pending] = [job for job in k8s.backend.snapshot().jobs if job.job_id == "research/train"]
    job = k8s.batch.read_namespaced_job("train", "research")
    refused = 'pods "train-x" is forbidden: exceeded quota: gpus, requested: 2, used: 8'
    k8s.core.create_namespaced_event(
        "research", event("a", job, "Warning", "FailedCreate", refused)
    )
    k8s.core.create_namespaced_event("research", event("b", job, "Normal", "FailedCreate", "no"))
    [refusal] = [job for job in k8s.backend.snapshot().jobs if job.job_id == "research/train"]
    complete = {
        "type": "Complete",
        "status": "True",
        "lastTransitionTime": timestamp(k8s.clock.now()),
    }
    k8s.batch.patch_namespaced_job_status(
        "train", "research", {"status": {"conditions": [complete]}}
    )
    after = k8s.backend.snapshot()

    assert (pending.phase, pending.gpus, pending.reason) == (JobPhase.PENDING, 2, None)
    assert (refusal.phase, refusal.reason, refusal.message) == (
        JobPhase.PENDING,
        "FailedCreate",
        refused,
    )
    assert "research/train" not in {job.job_id for job in after.jobs}
    assert k8s.server.lists == listed


def test_a_queue_system_the_cluster_lacks_is_no_queue_and_one_installed_later_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(informer, "ABSENT_RECHECK_SECONDS", 0.05)
    with KubernetesHarness(nodes=1) as k8s:
        snapshot = k8s.backend.snapshot()
        absent = sorted(view.what for view in k8s.backend.watched() if view.absent)

        k8s.install_queues()
        k8s.play_kueue("gpu-pool", gpus=4)
        wait_for(lambda: not any(view.absent for view in k8s.backend.watched()))
        later = k8s.backend.snapshot()

    assert snapshot.quotas == ()
    assert absent == sorted(
        [
            "clusterqueues.kueue.x-k8s.io",
            "queues.scheduling.volcano.sh",
            *(
                f"{plural} in {tenant}"
                for plural in (
                    "workloads.kueue.x-k8s.io",
                    "localqueues.kueue.x-k8s.io",
                    "podgroups.scheduling.volcano.sh",
                )
                for tenant in k8s.tenants
            ),
        ]
    )
    assert [quota.name for quota in later.quotas] == ["gpu-pool"]


def test_a_stopped_watch_of_jobs_is_blind_time_naming_it_until_it_is_back(k8s):
    k8s.backend.snapshot()

    k8s.refuse_reads("jobs")
    wait_for(lambda: not view_of(k8s, "jobs in research").up)
    with pytest.raises(BackendError, match="jobs in research: not watched since"):
        k8s.backend.snapshot()

    k8s.allow_reads("jobs")
    wait_for(lambda: all(view.up for view in k8s.backend.watched()))
    k8s.batch.create_namespaced_job("prod", gpu_job("back", 1))
    assert "prod/back" in {job.job_id for job in k8s.backend.snapshot().jobs}
