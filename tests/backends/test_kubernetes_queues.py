"""A probe its queue holds waits in the queue's words, naming the queue and the quota: Kueue's
Workload whose quota reservation failed, Volcano's PodGroup its queue has not enqueued; both
a quota hold for the outcome and the failure causes. The snapshot reads the queues themselves
(ClusterQueues, LocalQueues, Volcano Queues) and gives each tenant its guarantee. Over the API
emulator, the harness playing Kueue and Volcano with their objects' shapes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from observer.domain import Expectation, JobPhase, LocalQueue, Outcome, QueueQuota
from observer.probes.outcome import is_quota_reason, judge
from tests.backends.k8s_harness import CLUSTER_QUEUE_RESOURCES, QUEUE_RESOURCES, KubernetesHarness
from tests.backends.test_kubernetes import request, settle_phase, status

# Kueue's scheduler's words when the ClusterQueue's quota is spent (pkg/scheduler/flavorassigner).
NO_FLAVOR = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
    "in flavor default-flavor, {} more needed"
)
QUEUE_PLURALS = tuple(resource.rsplit("/", 1)[1] for resource in QUEUE_RESOURCES)
QUEUES_PLURALS = tuple(resource.rsplit("/", 1)[1] for resource in CLUSTER_QUEUE_RESOURCES)
# Volcano's gang plugin's words for a PodGroup its queue has not enqueued.
GANG_NOT_READY = "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable"


@pytest.fixture
def k8s() -> Iterator[KubernetesHarness]:
    with KubernetesHarness() as harness:
        harness.install_queues()
        yield harness


def test_a_job_kueue_holds_for_quota_waits_in_kueues_words_naming_its_queues(
    k8s: KubernetesHarness,
) -> None:
    k8s.play_kueue("gpu-pool", gpus=4)
    first = k8s.backend.submit(request("run-1", queue="team-a", gpus_per_node=4))
    job_id = k8s.backend.submit(request("run-2", queue="team-a", gpus_per_node=4))

    k8s.step()

    held = status(k8s, job_id)
    assert (held.phase, held.reason, held.queue) == (
        JobPhase.PENDING,
        "QuotaReserved=False: Pending",
        "team-a",
    )
    words = NO_FLAVOR.format(4)
    quota = "4 of 4 nvidia.com/gpu nominal in use, borrowing limit 0, 1 workload pending"
    assert held.message == f"LocalQueue research/team-a (ClusterQueue gpu-pool: {quota}): {words}"
    assert k8s.pods_of(job_id) == []
    assert is_quota_reason(held.reason)
    assert judge(Expectation.BLOCKED, held) is Outcome.PASSED
    [followed] = [s for s in k8s.backend.probe_jobs() if s.job_id == job_id]
    [seen] = [s for s in k8s.backend.snapshot().jobs if s.job_id == job_id]
    assert followed.message == seen.message == held.message
    assert status(k8s, first).reason is None  # admitted: nothing holds it


def test_once_the_quota_is_free_kueue_admits_the_held_job_and_it_runs(
    k8s: KubernetesHarness,
) -> None:
    k8s.play_kueue("gpu-pool", gpus=4)
    first = k8s.backend.submit(request("run-1", queue="team-a", gpus_per_node=4))
    job_id = k8s.backend.submit(request("run-2", queue="team-a", gpus_per_node=4))
    k8s.step()
    assert status(k8s, job_id).reason == "QuotaReserved=False: Pending"

    settle_phase(k8s, first, JobPhase.SUCCEEDED)
    done = settle_phase(k8s, job_id, JobPhase.SUCCEEDED)

    assert done.exit_code == 0


def test_the_queues_are_listed_once_per_namespace_then_watched_however_many_jobs_they_hold(
    k8s: KubernetesHarness,
) -> None:
    k8s.play_kueue("gpu-pool", gpus=0)
    k8s.server.lists.clear()
    held = [k8s.backend.submit(request(f"run-{n}", queue="team-a")) for n in range(3)]
    grouped = [k8s.backend.submit(request(f"run-{n}")) for n in range(3, 6)]
    k8s.backend.jobs(held)  # the first read lists every kind once
    for job_id in grouped:
        k8s.volcano_holds(job_id, queue="q", reason="NotEnoughResources", message=GANG_NOT_READY)
    k8s.step()

    statuses = k8s.backend.jobs(held + grouped)

    assert {s.reason for s in statuses.values()} == {
        "QuotaReserved=False: Pending",
        "PodGroup Pending: NotEnoughResources",
    }
    per_namespace = len(k8s.tenants)
    assert {plural: k8s.server.lists[plural] for plural in QUEUE_PLURALS} == dict.fromkeys(
        QUEUE_PLURALS, per_namespace
    )
    assert {plural: k8s.server.watches[plural] for plural in QUEUE_PLURALS} == dict.fromkeys(
        QUEUE_PLURALS, per_namespace
    )


def test_nothing_of_the_queues_is_read_while_no_job_may_be_held(k8s: KubernetesHarness) -> None:
    k8s.play_kueue("gpu-pool", gpus=4)
    job_id = k8s.backend.submit(request("run-1", queue="team-a"))
    settle_phase(k8s, job_id, JobPhase.RUNNING)
    k8s.server.lists.clear()

    k8s.backend.jobs([job_id])
    k8s.backend.probe_jobs()

    assert not any(k8s.server.lists[plural] for plural in QUEUE_PLURALS + QUEUES_PLURALS)


def test_after_the_first_read_snapshots_list_none_of_the_queues_objects(
    k8s: KubernetesHarness,
) -> None:
    k8s.play_kueue("gpu-pool", gpus=4)
    job_id = k8s.backend.submit(request("run-1", queue="team-a"))
    settle_phase(k8s, job_id, JobPhase.RUNNING)
    k8s.server.lists.clear()

    for _ in range(3):
        k8s.step()
        assert [q.name for q in k8s.backend.snapshot().quotas] == ["gpu-pool"]

    assert not any(k8s.server.lists[plural] for plural in QUEUE_PLURALS + QUEUES_PLURALS)


def test_a_workload_of_an_earlier_namesake_is_not_the_jobs(k8s: KubernetesHarness) -> None:
    k8s.play_kueue("gpu-pool", gpus=0)
    first = k8s.backend.submit(request("run-1", queue="team-a"))
    k8s.step()
    k8s.backend.cancel(first)
    again = k8s.backend.submit(request("run-1", queue="team-a"))
    name = again.split("/")[1]
    k8s.batch.patch_namespaced_job(name, "research", {"spec": {"suspend": True}})

    held = status(k8s, again)

    assert (held.reason, held.message) == (
        "Suspended",
        "spec.suspend is true (waiting for admission)",
    )


def test_without_kueue_installed_a_suspended_job_is_only_suspended() -> None:
    with KubernetesHarness() as k8s:
        job_id = k8s.backend.submit(request("run-1", queue="team-a"))
        k8s.batch.patch_namespaced_job(
            job_id.split("/")[1], "research", {"spec": {"suspend": True}}
        )

        assert status(k8s, job_id).reason == "Suspended"


def test_a_job_volcanos_queue_does_not_enqueue_waits_in_volcanos_words(
    k8s: KubernetesHarness,
) -> None:
    job_id = k8s.backend.submit(request("run-1"))
    group = k8s.volcano_holds(
        job_id, queue="research-q", reason="NotEnoughResources", message=GANG_NOT_READY
    )

    k8s.step()

    held = status(k8s, job_id)
    assert (held.phase, held.reason, held.queue) == (
        JobPhase.PENDING,
        "PodGroup Pending: NotEnoughResources",
        "research-q",
    )
    assert held.message == f"Queue research-q: PodGroup {group}: {GANG_NOT_READY}"
    [pod] = k8s.pods_of(job_id)
    assert pod.spec is not None and pod.spec.node_name is None
    assert is_quota_reason(held.reason)


def test_the_snapshot_carries_the_cluster_queue_its_usage_and_the_tenants_guarantee(
    k8s: KubernetesHarness,
) -> None:
    k8s.play_kueue("team-a", gpus=4, borrowing_limit=2, cohort="gpu-cohort")
    running = k8s.backend.submit(request("run-1", queue="team-a", gpus_per_node=4))
    held = k8s.backend.submit(request("run-2", queue="team-a", gpus_per_node=2))
    settle_phase(k8s, running, JobPhase.RUNNING)
    k8s.step()

    snapshot = k8s.backend.snapshot()

    assert snapshot.quotas == (
        QueueQuota(
            system="kueue",
            name="team-a",
            resource="nvidia.com/gpu",
            tenants=("research",),
            local_queues=(LocalQueue("research", "team-a", "team-a", 1, 1),),
            nominal_gpus=4,
            borrowing_limit_gpus=2,
            used_gpus=4,
            reserved_gpus=4,
            pending_workloads=1,
            admitted_workloads=1,
            cohort="gpu-cohort",
        ),
    )
    rows = {(q.tenant, q.queue): q for q in snapshot.queues}
    mine = rows[("research", "team-a")]
    assert (mine.running_gpus, mine.pending_gpus) == (4, 2)
    assert (mine.nominal_gpus, mine.borrowing_limit_gpus) == (4, 2)
    assert (rows[("prod", None)].nominal_gpus, rows[("prod", None)].borrowing_limit_gpus) == (
        None,
        None,
    )
    assert status(k8s, held).message == (
        "LocalQueue research/team-a (ClusterQueue team-a: 4 of 4 nvidia.com/gpu nominal in use, "
        f"borrowing limit 2, 1 workload pending): {NO_FLAVOR.format(2)}"
    )


def test_a_cluster_queue_two_tenants_share_guarantees_neither(k8s: KubernetesHarness) -> None:
    k8s.play_kueue("shared", gpus=8)
    k8s.add_local_queue("research", "team-a", "shared")
    k8s.add_local_queue("prod", "team-b", "shared")

    snapshot = k8s.backend.snapshot()

    [quota] = snapshot.quotas
    assert (quota.tenants, quota.local_queues) == (
        ("prod", "research"),
        (LocalQueue("prod", "team-b", "shared"), LocalQueue("research", "team-a", "shared")),
    )
    assert all(q.nominal_gpus is None for q in snapshot.queues)


def test_without_the_queues_installed_the_snapshot_has_no_quotas() -> None:
    with KubernetesHarness() as k8s:
        snapshot = k8s.backend.snapshot()

    assert snapshot.quotas == ()
    assert {q.tenant for q in snapshot.queues} == {"research", "prod"}


def test_a_volcano_queue_is_read_and_names_itself_in_the_hold(k8s: KubernetesHarness) -> None:
    k8s.play_volcano_queue("research-q", weight=2, deserved=4, capability=8)
    job_id = k8s.backend.submit(request("run-1"))
    group = k8s.volcano_holds(
        job_id, queue="research-q", reason="NotEnoughResources", message=GANG_NOT_READY
    )
    k8s.step()

    snapshot = k8s.backend.snapshot()

    assert snapshot.quotas == (
        QueueQuota(
            system="volcano",
            name="research-q",
            resource="nvidia.com/gpu",
            tenants=("research",),
            nominal_gpus=4,
            borrowing_limit_gpus=4,
            weight=2,
            state="Open",
        ),
    )
    research = [q for q in snapshot.queues if q.tenant == "research"]
    assert {(q.queue, q.nominal_gpus, q.borrowing_limit_gpus) for q in research} == {
        ("research-q", 4, 4)
    }
    assert status(k8s, job_id).message == (
        "Queue research-q (Open, weight 2, 0 of 4 nvidia.com/gpu deserved allocated, "
        f"capability 8, 0 PodGroups pending, 0 running): PodGroup {group}: {GANG_NOT_READY}"
    )


# --- who changed a ClusterQueue's quota --------------------------------------------------------


def test_each_tenant_a_cluster_queue_serves_sees_who_last_set_its_gpu_quota_and_when(
    k8s: KubernetesHarness,
) -> None:
    created = k8s.clock.now()
    k8s.play_kueue("shared", gpus=8, borrowing_limit=2, cohort="gpus", by="kubectl-create")
    k8s.add_local_queue("research", "team-a", "shared")
    k8s.add_local_queue("prod", "team-b", "shared")
    k8s.play_kueue("unserved", gpus=4, by="kubectl-create")  # no tenant's LocalQueue feeds it
    k8s.clock.advance(60)
    raised = k8s.clock.now()
    k8s.set_cluster_queue_quota("shared", 12, borrowing_limit=4, by="ops-carol")
    k8s.step()  # Kueue writes the ClusterQueue's status: its quota's manager stays
    until = k8s.clock.now() + timedelta(seconds=1)

    changes = k8s.backend.quota_changes(created, until)

    words = (
        "nominalQuota[default-flavor/nvidia.com/gpu]=12 "
        "borrowingLimit[default-flavor/nvidia.com/gpu]=4"
    )
    assert [(c.at, c.actor, dict(c.subject), c.change, c.manager) for c in changes] == [
        (raised, "ops-carol", {"tenant": "prod", "queue": "shared"}, words, None),
        (raised, "ops-carol", {"tenant": "research", "queue": "shared"}, words, None),
    ]
    assert k8s.backend.quota_changes(created, raised) == []  # kubectl-create's is taken over


def test_a_cluster_queue_created_in_the_period_is_a_change_by_its_creator(
    k8s: KubernetesHarness,
) -> None:
    created = k8s.clock.now()
    k8s.play_kueue("team-a", gpus=8, borrowing_limit=None, by="kubectl-create")
    k8s.add_local_queue("research", "team-a", "team-a")

    [change] = k8s.backend.quota_changes(created, created + timedelta(seconds=1))

    assert (change.actor, change.change) == (
        "kubectl-create",
        "nominalQuota[default-flavor/nvidia.com/gpu]=8",
    )


def test_without_kueue_installed_no_cluster_queue_changes_and_resource_quotas_still_read() -> None:
    with KubernetesHarness() as k8s:
        since = k8s.clock.now()
        k8s.set_quota("research", gpus=8, jobs=10, by="kubectl-create")

        changes = k8s.backend.quota_changes(since, since + timedelta(seconds=1))

    assert [c.change for c in changes] == ["count/jobs.batch=10 requests.nvidia.com/gpu=8"]


def test_with_the_audit_log_read_a_change_is_the_audit_users_with_its_manager_beside(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    log.touch()
    with KubernetesHarness(overrides={"audit_log_path": log}) as k8s:
        k8s.server.audit_log = log
        k8s.install_queues()
        since = k8s.clock.now()
        k8s.play_kueue("team-a", gpus=8, by="kubectl-create")
        k8s.add_local_queue("research", "team-a", "team-a")
        k8s.clock.advance(30)
        raised = k8s.clock.now()
        k8s.set_cluster_queue_quota("team-a", 12, by="kubectl-edit", user="carol@example.com")
        k8s.set_quota("research", gpus=4, by="kubectl-patch", user="dave@example.com")
        k8s.step()

        changes = k8s.backend.quota_changes(since, k8s.clock.now())

    assert [(c.at, c.actor, c.manager, dict(c.subject), c.change) for c in changes] == [
        (
            raised,
            "dave@example.com",
            "kubectl-patch",
            {"tenant": "research", "quota": "research-quota"},
            "requests.nvidia.com/gpu=4",
        ),
        (
            raised,
            "carol@example.com",
            "kubectl-edit",
            {"tenant": "research", "queue": "team-a"},
            "nominalQuota[default-flavor/nvidia.com/gpu]=12",
        ),
    ]
