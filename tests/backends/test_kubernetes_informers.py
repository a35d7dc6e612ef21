"""The snapshot's nodes and pods come from informers (informer.py): one list, then a watch
that carries every change; a version the server has forgotten (410 Gone) costs one list again;
a watch that fails is blind time until it is back. Over real HTTP against the emulated API
server speaking versions, pages and watches (watches.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from observer.backends.kubernetes.informer import View
from observer.errors import BackendError
from tests.backends.k8s_harness import KubernetesHarness


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
