"""The Kubernetes backend, over real HTTP with the official client, against kmock's API server
with the harness playing the job controller, the scheduler and the kubelets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import kmock
import pytest

from observer import __version__
from observer.backends.base import MANAGED_BY, MANAGED_BY_LABEL, PROBE_LABEL, RUN_ID_LABEL
from observer.backends.kubernetes.backend import KubernetesBackend
from observer.backends.kubernetes.manifests import ENV_RUN_ID, QUEUE_LABEL, job_name
from observer.clock import SystemClock
from observer.domain import Behaviour, JobPhase, JobRequest, JobStatus, Workload
from observer.errors import BackendError, ConfigError, ProbeError
from observer.settings.controller import KubernetesSettings
from tests.backends.k8s_harness import GPU, KubernetesHarness
from tests.support.net import free_port

CANARY_LINE = re.compile(r"observer-canary run=(\S+) seq=(\d+) ts=(\d+\.\d+)")


@pytest.fixture
def k8s() -> Iterator[KubernetesHarness]:
    with KubernetesHarness() as harness:
        yield harness


def request(
    run_id: str,
    *,
    tenant: str = "research",
    probe: str = "hold",
    queue: str | None = None,
    priority: str | None = None,
    **workload: object,
) -> JobRequest:
    workload.setdefault("gpus_per_node", 1)
    workload.setdefault("duration_seconds", 5.0)
    return JobRequest(
        run_id=run_id,
        probe=probe,
        tenant=tenant,
        queue=queue,
        workload=Workload(**workload),
        priority=priority,
    )


def status(k8s: KubernetesHarness, job_id: str) -> JobStatus:
    return k8s.backend.jobs([job_id])[job_id]


def settle_phase(k8s: KubernetesHarness, job_id: str, phase: JobPhase) -> JobStatus:
    k8s.settle(lambda: status(k8s, job_id).phase is phase, timeout_seconds=60)
    return status(k8s, job_id)


# --- the Job the backend creates -------------------------------------------------------------


def test_a_probe_is_a_job_in_its_tenants_namespace_labelled_and_limited(
    k8s: KubernetesHarness,
) -> None:
    job_id = k8s.backend.submit(
        request(
            "run-7", probe="gang", queue="team-a", priority="soak-low", gpus_per_node=4, nodes=2
        )
    )

    namespace, name = job_id.split("/")
    job = k8s.batch.read_namespaced_job(name, namespace)
    labels = {
        RUN_ID_LABEL: "run-7",
        PROBE_LABEL: "gang",
        MANAGED_BY_LABEL: MANAGED_BY,
        QUEUE_LABEL: "team-a",
    }
    assert (namespace, name) == ("research", job_name("gang", "run-7"))
    assert job.metadata.labels == labels
    assert (job.spec.backoff_limit, job.spec.parallelism, job.spec.completions) == (0, 2, 2)
    assert job.spec.ttl_seconds_after_finished == k8s.settings.ttl_seconds_after_finished
    pod = job.spec.template
    assert pod.metadata.labels == labels
    assert pod.spec.restart_policy == "Never"
    assert pod.spec.priority_class_name == "soak-low"
    [container] = pod.spec.containers
    assert container.image == k8s.settings.image
    assert container.resources.limits[GPU] == "4"
    assert set(container.resources.requests) == {"cpu", "memory"}  # what a quota counts
    assert {e.name: e.value for e in container.env}[ENV_RUN_ID] == "run-7"
    [spread] = (
        pod.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    )
    assert spread.topology_key == "kubernetes.io/hostname"
    assert spread.label_selector.match_labels == {RUN_ID_LABEL: "run-7"}


def test_a_probe_without_queue_or_priority_leaves_them_to_the_cluster(
    k8s: KubernetesHarness,
) -> None:
    namespace, name = k8s.backend.submit(request("run-8", tenant="prod")).split("/")

    job = k8s.batch.read_namespaced_job(name, namespace)
    assert namespace == "prod"
    assert QUEUE_LABEL not in job.metadata.labels
    assert job.spec.template.spec.priority_class_name is None
    assert job.spec.template.spec.affinity is None


@pytest.mark.parametrize(
    ("behaviour", "image", "command", "memory"),
    [
        (Behaviour.SLEEP, "image", "observer probe sleep --seconds 5", None),
        (
            Behaviour.GPU_BUSY,
            "image",
            "observer probe gpu-burn --seconds 5 --memory-gib 4 --utilization 100",
            None,
        ),
        (
            Behaviour.LOG_CANARY,
            "image",
            "observer probe log-canary --run-id run-b --lines 0 --interval-seconds 0 "
            "--line-bytes 0",
            None,
        ),
        (Behaviour.BAD_COMMAND, "image", "observer-no-such-command", None),
        (Behaviour.BAD_IMAGE, "bad_image", "observer probe sleep --seconds 5", None),
        (Behaviour.OOM, "image", "observer probe oom --hold-seconds 5", "64Mi"),
    ],
)
def test_each_behaviour_has_its_image_and_command(
    k8s: KubernetesHarness, behaviour: Behaviour, image: str, command: list[str], memory: str | None
) -> None:
    namespace, name = k8s.backend.submit(request("run-b", behaviour=behaviour)).split("/")

    [container] = k8s.batch.read_namespaced_job(name, namespace).spec.template.spec.containers
    assert container.image == getattr(k8s.settings, image)
    assert container.command == command.split()
    oom_limit = k8s.settings.oom_memory_limit
    limited = (container.resources.requests["memory"], container.resources.limits["memory"])
    assert (limited == (oom_limit, oom_limit)) == (memory is not None)


def test_the_probe_image_is_the_observers_own_by_default() -> None:
    assert KubernetesSettings().image == f"gpu-soak-observer:{__version__}"


def test_gpu_busy_runs_the_configured_burner() -> None:
    burner = {"gpu_busy_image": "burn:1", "gpu_busy_command": ("gpu_burn", "-d", "60")}
    with KubernetesHarness(overrides=burner) as k8s:
        busy = request("run-g", behaviour=Behaviour.GPU_BUSY)
        namespace, name = k8s.backend.submit(busy).split("/")

        [container] = k8s.batch.read_namespaced_job(name, namespace).spec.template.spec.containers
        assert (container.image, container.command) == ("burn:1", ["gpu_burn", "-d", "60"])


def test_job_names_are_dns_labels_stable_for_a_run() -> None:
    long = job_name("Nightly_Training.Probe " * 5, "run-1")

    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", long)
    assert len(long) <= 63
    assert job_name("p", "run-1") == job_name("p", "run-1") != job_name("p", "run-2")


def test_submitting_the_same_run_twice_finds_the_first_job(k8s: KubernetesHarness) -> None:
    first = k8s.backend.submit(request("run-1"))

    assert k8s.backend.submit(request("run-1")) == first
    assert len(k8s.batch.list_namespaced_job("research").items) == 1


# --- what the backend reads ------------------------------------------------------------------


def test_a_job_too_big_for_any_node_pends_with_the_schedulers_words(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", gpus_per_node=8))

    k8s.settle(lambda: status(k8s, job_id).reason is not None, timeout_seconds=10)

    pending = status(k8s, job_id)
    assert pending.phase is JobPhase.PENDING
    assert pending.reason == "Unschedulable"
    assert pending.message == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert (pending.gpus, pending.started_at, pending.nodes) == (8, None, ())


def test_without_a_podscheduled_condition_the_failedscheduling_event_says_why(
    k8s: KubernetesHarness,
) -> None:
    job_id = k8s.backend.submit(request("run-1", gpus_per_node=8))
    k8s.settle(lambda: status(k8s, job_id).reason is not None, timeout_seconds=10)
    [pod] = k8s.pods_of(job_id)

    k8s.core.patch_namespaced_pod_status(
        pod.metadata.name, "research", {"status": {"conditions": []}}
    )

    assert (status(k8s, job_id).reason, status(k8s, job_id).message) == (
        "FailedScheduling",
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    )


def test_a_probe_runs_then_succeeds_with_its_timestamps(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", gpus_per_node=2, duration_seconds=5))
    submitted = status(k8s, job_id).submitted_at

    running = settle_phase(k8s, job_id, JobPhase.RUNNING)
    done = settle_phase(k8s, job_id, JobPhase.SUCCEEDED)

    assert submitted is not None and running.submitted_at == submitted
    assert running.started_at is not None and running.started_at >= submitted
    assert running.nodes == ("gpu-node-0",) and running.gpus == 2 and running.run_id == "run-1"
    assert done.started_at == running.started_at
    assert done.finished_at == running.started_at + timedelta(seconds=5)
    assert (done.exit_code, done.reason) == (0, None)


def test_a_probe_that_exits_non_zero_fails_with_its_exit_code(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", exit_code=3, duration_seconds=2))

    failed = settle_phase(k8s, job_id, JobPhase.FAILED)

    assert (failed.exit_code, failed.reason) == (3, "Error")
    assert failed.finished_at is not None and failed.started_at is not None


def test_an_oom_probe_is_oomkilled(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", behaviour=Behaviour.OOM))

    failed = settle_phase(k8s, job_id, JobPhase.FAILED)

    assert (failed.exit_code, failed.reason) == (137, "OOMKilled")


def test_a_bad_command_never_starts_and_fails_with_the_runtimes_words(
    k8s: KubernetesHarness,
) -> None:
    job_id = k8s.backend.submit(request("run-1", behaviour=Behaviour.BAD_COMMAND))

    failed = settle_phase(k8s, job_id, JobPhase.FAILED)

    assert (failed.exit_code, failed.reason, failed.started_at) == (128, "StartError", None)
    assert 'exec: "observer-no-such-command": executable file not found' in (failed.message or "")


def test_a_bad_image_pends_forever_in_imagepullbackoff(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", behaviour=Behaviour.BAD_IMAGE))
    k8s.settle(lambda: status(k8s, job_id).reason == "ImagePullBackOff", timeout_seconds=10)

    k8s.settle(lambda: k8s.clock.monotonic() >= 120, timeout_seconds=200)

    stuck = status(k8s, job_id)
    assert (stuck.phase, stuck.reason) == (JobPhase.PENDING, "ImagePullBackOff")
    assert stuck.message == f'Back-off pulling image "{k8s.settings.bad_image}"'
    assert stuck.nodes == ("gpu-node-0",)  # scheduled, holding its GPU, never running


def test_a_job_of_several_pods_runs_when_its_last_pod_starts(k8s: KubernetesHarness) -> None:
    k8s.add_pod("prod", "squatter-1", 4, node="gpu-node-1")
    k8s.add_pod("prod", "squatter-2", 4, node="gpu-node-2")
    job_id = k8s.backend.submit(request("run-1", gpus_per_node=4, nodes=2, duration_seconds=3))

    k8s.settle(lambda: status(k8s, job_id).reason is not None, timeout_seconds=10)
    waiting = status(k8s, job_id)
    k8s.core.delete_namespaced_pod("squatter-1", "prod")
    running = settle_phase(k8s, job_id, JobPhase.RUNNING)

    assert waiting.phase is JobPhase.PENDING and waiting.gpus == 8
    assert waiting.message == (
        "0/3 nodes are available: 2 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match pod anti-affinity rules."
    )
    assert running.nodes == ("gpu-node-0", "gpu-node-1")
    assert running.started_at == max(
        pod.status.container_statuses[0].state.running.started_at for pod in k8s.pods_of(job_id)
    )


def test_a_job_held_suspended_pends_as_suspended(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", queue="team-a"))
    k8s.batch.patch_namespaced_job(job_id.split("/")[1], "research", {"spec": {"suspend": True}})

    k8s.step()

    held = status(k8s, job_id)
    assert (held.phase, held.reason) == (JobPhase.PENDING, "Suspended")
    assert k8s.pods_of(job_id) == []


def test_a_gpu_quota_keeps_the_jobs_pods_from_being_created(k8s: KubernetesHarness) -> None:
    k8s.set_quota("research", gpus=2)
    job_id = k8s.backend.submit(request("run-1", gpus_per_node=3))

    k8s.settle(lambda: status(k8s, job_id).reason is not None, timeout_seconds=10)

    refused = status(k8s, job_id)
    assert (refused.phase, refused.reason) == (JobPhase.PENDING, "FailedCreate")
    assert refused.message is not None and refused.message.startswith("Error creating: pods ")
    assert "exceeded quota: research-quota, requested: requests.nvidia.com/gpu=3" in refused.message


def test_jobs_leaves_out_what_the_cluster_does_not_know(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1"))

    assert k8s.backend.jobs([job_id, "research/observer-gone", "prod/nothing"]).keys() == {job_id}
    with pytest.raises(ProbeError, match="not a Kubernetes job id"):
        k8s.backend.jobs(["no-namespace"])


def test_finished_jobs_are_deleted_after_their_ttl() -> None:
    with KubernetesHarness(overrides={"ttl_seconds_after_finished": 30}) as k8s:
        job_id = k8s.backend.submit(request("run-1", duration_seconds=1))
        done = settle_phase(k8s, job_id, JobPhase.SUCCEEDED)

        k8s.settle(lambda: job_id not in k8s.backend.jobs([job_id]), timeout_seconds=40)

        assert done.finished_at is not None
        assert k8s.clock.now() >= done.finished_at + timedelta(seconds=30)
        k8s.settle(lambda: not k8s.pods_of(job_id), timeout_seconds=5)


# --- cancel and logs -------------------------------------------------------------------------


def test_cancel_deletes_the_job_and_its_pods_follow(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", duration_seconds=600))
    settle_phase(k8s, job_id, JobPhase.RUNNING)

    k8s.backend.cancel(job_id)

    cancelled = status(k8s, job_id)
    assert cancelled.phase is JobPhase.CANCELLED
    assert cancelled.finished_at == k8s.clock.now()
    assert cancelled.started_at is not None
    assert k8s.batch.list_namespaced_job("research").items == []
    k8s.settle(lambda: not k8s.pods_of(job_id), timeout_seconds=5)
    k8s.backend.cancel(job_id)
    k8s.backend.cancel("research/observer-never-was")
    assert k8s.backend.probe_jobs() == []


def test_cancelling_a_finished_job_keeps_its_outcome(k8s: KubernetesHarness) -> None:
    job_id = k8s.backend.submit(request("run-1", duration_seconds=1))
    settle_phase(k8s, job_id, JobPhase.SUCCEEDED)

    k8s.backend.cancel(job_id)

    assert status(k8s, job_id).phase is JobPhase.SUCCEEDED


def test_logs_are_the_pods_output(k8s: KubernetesHarness) -> None:
    canary = request("run-1", behaviour=Behaviour.LOG_CANARY, log_lines=4, log_interval_seconds=1)
    job_id = k8s.backend.submit(canary)
    done = settle_phase(k8s, job_id, JobPhase.SUCCEEDED)

    lines = [CANARY_LINE.fullmatch(line) for line in k8s.backend.logs(job_id).splitlines()]

    assert [(m[1], int(m[2])) for m in lines if m] == [("run-1", n) for n in range(4)]
    stamps = [float(m[3]) for m in lines if m]
    assert stamps == sorted(stamps) and done.started_at is not None
    assert stamps[0] == done.started_at.timestamp()


def test_logs_that_cannot_be_read_raise_backend_error(k8s: KubernetesHarness) -> None:
    waiting = k8s.backend.submit(request("run-1", behaviour=Behaviour.BAD_IMAGE))
    k8s.settle(lambda: status(k8s, waiting).reason == "ImagePullBackOff", timeout_seconds=10)
    unschedulable = k8s.backend.submit(request("run-2", gpus_per_node=8))

    with pytest.raises(BackendError, match="waiting to start"):
        k8s.backend.logs(waiting)
    with pytest.raises(BackendError, match="no pods"):
        k8s.backend.logs(unschedulable)
    with pytest.raises(BackendError, match="no such job"):
        k8s.backend.logs("research/observer-never-was")


# --- probe_jobs and the snapshot -------------------------------------------------------------


def test_a_restarted_backend_adopts_the_observers_unfinished_jobs(k8s: KubernetesHarness) -> None:
    running = k8s.backend.submit(request("run-1", duration_seconds=600))
    pending = k8s.backend.submit(request("run-2", tenant="prod", gpus_per_node=8))
    finished = k8s.backend.submit(request("run-3", duration_seconds=1))
    settle_phase(k8s, finished, JobPhase.SUCCEEDED)
    container = {"name": "train", "image": "trainer:1", "resources": {"limits": {GPU: "1"}}}
    template = {"spec": {"containers": [container], "restartPolicy": "Never"}}
    foreign = {"metadata": {"name": "someone-elses"}, "spec": {"template": template}}
    k8s.batch.create_namespaced_job("research", foreign)

    with KubernetesBackend(k8s.settings, k8s.clock) as restarted:
        adopted = {job.job_id: job for job in restarted.probe_jobs()}

    assert adopted.keys() == {running, pending}
    assert adopted[running].phase is JobPhase.RUNNING and adopted[running].run_id == "run-1"
    assert adopted[pending].phase is JobPhase.PENDING and adopted[pending].run_id == "run-2"
    seen = {job.job_id: job.run_id for job in k8s.backend.snapshot().jobs}
    assert seen == {running: "run-1", pending: "run-2", "research/someone-elses": None}


def test_the_snapshot_counts_gpus_on_nodes_including_a_pod_stuck_terminating(
    k8s: KubernetesHarness,
) -> None:
    job_id = k8s.backend.submit(request("run-1", gpus_per_node=3, duration_seconds=600))
    settle_phase(k8s, job_id, JobPhase.RUNNING)
    k8s.add_pod("prod", "notebook", 2, node="gpu-node-1")
    k8s.hang_terminations("gpu-node-0")

    k8s.backend.cancel(job_id)
    k8s.settle(lambda: all(p.metadata.deletion_timestamp for p in k8s.pods_of(job_id)), 5)
    for _ in range(30):
        k8s.step()

    [stuck] = k8s.pods_of(job_id)
    snapshot = k8s.backend.snapshot()
    assert stuck.spec.node_name == "gpu-node-0" and stuck.metadata.deletion_timestamp
    assert [(n.name, n.pool, n.gpus_total, n.gpus_allocated, n.state) for n in snapshot.nodes] == [
        ("gpu-node-0", "NVIDIA-H200", 4, 3, "Ready"),
        ("gpu-node-1", "NVIDIA-H200", 4, 2, "Ready"),
        ("gpu-node-2", "NVIDIA-A100-SXM4-80GB", 4, 0, "Ready"),
    ]
    assert snapshot.at == k8s.clock.now()
    # The deleted Job's pod, still holding its GPUs, is the Job ending since its deadline.
    [ending] = [job for job in snapshot.jobs if job.job_id == job_id]
    assert ending.ending_since == stuck.metadata.deletion_timestamp
    assert (ending.phase, ending.reason) == (JobPhase.CANCELLED, "Terminating")
    assert (ending.run_id, ending.gpus, ending.nodes) == ("run-1", 3, ("gpu-node-0",))


def test_the_snapshot_shows_cordoned_and_unready_nodes_as_kubectl_does(
    k8s: KubernetesHarness,
) -> None:
    k8s.cordon("gpu-node-1")
    k8s.mark_not_ready("gpu-node-2")
    job_id = k8s.backend.submit(request("run-1", gpus_per_node=4, nodes=2))

    k8s.settle(lambda: status(k8s, job_id).reason is not None, timeout_seconds=10)

    nodes = {node.name: node for node in k8s.backend.snapshot().nodes}
    assert nodes["gpu-node-0"].state == "Ready" and nodes["gpu-node-0"].reason is None
    assert nodes["gpu-node-1"].state == "Ready,SchedulingDisabled"
    assert (
        nodes["gpu-node-1"].reason == "cordoned; taint node.kubernetes.io/unschedulable:NoSchedule"
    )
    assert nodes["gpu-node-2"].state == "NotReady"
    assert nodes["gpu-node-2"].reason == "NodeStatusUnknown: Kubelet stopped posting node status."
    assert status(k8s, job_id).message == (
        "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, "
        "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, "
        "1 node(s) were unschedulable."
    )


def test_the_snapshot_queues_every_tenants_gpu_work(k8s: KubernetesHarness) -> None:
    ours = k8s.backend.submit(
        request("run-1", queue="team-a", gpus_per_node=4, duration_seconds=600)
    )
    settle_phase(k8s, ours, JobPhase.RUNNING)
    k8s.add_pod("prod", "trainer-0", 4, queue="prod-q", owner=("ReplicaSet", "trainer-7f9"))
    k8s.add_pod("prod", "trainer-1", 4, queue="prod-q", owner=("ReplicaSet", "trainer-7f9"))
    k8s.add_pod("prod", "hog", 8)
    k8s.add_pod("prod", "cpu-only", 0)
    k8s.settle(lambda: sorted(_phases(k8s).values()) == ["pending", "running", "running"], 10)
    k8s.clock.advance(30)

    snapshot = k8s.backend.snapshot()

    jobs = {job.job_id: job for job in snapshot.jobs}
    assert jobs.keys() == {ours, "prod/replicaset/trainer-7f9", "prod/pod/hog"}
    assert jobs["prod/replicaset/trainer-7f9"].phase is JobPhase.RUNNING
    assert jobs["prod/replicaset/trainer-7f9"].gpus == 8
    assert jobs["prod/pod/hog"].reason == "Unschedulable"
    queues = {
        (q.tenant, q.queue): (q.pending_jobs, q.pending_gpus, q.running_jobs, q.running_gpus)
        for q in snapshot.queues
    }
    assert queues == {
        ("research", "team-a"): (0, 0, 1, 4),
        ("prod", "prod-q"): (0, 0, 1, 8),
        ("prod", None): (1, 8, 0, 0),
    }
    [hog] = [q for q in snapshot.queues if q.queue is None]
    assert hog.pending_reasons == {"Unschedulable": 1}
    assert hog.longest_wait_seconds >= 30


def _phases(k8s: KubernetesHarness) -> dict[str, str]:
    return {job.job_id: job.phase.value for job in k8s.backend.snapshot().jobs}


def test_a_tenant_with_nothing_queued_still_has_a_queue_state(k8s: KubernetesHarness) -> None:
    queues = k8s.backend.snapshot().queues

    assert [(q.tenant, q.queue, q.pending_jobs, q.running_jobs) for q in queues] == [
        ("prod", None, 0, 0),
        ("research", None, 0, 0),
    ]


# --- failures --------------------------------------------------------------------------------


def test_a_quota_refusing_the_job_is_a_probe_error_in_the_apis_words(
    k8s: KubernetesHarness,
) -> None:
    k8s.set_quota("research", jobs=1)
    k8s.backend.submit(request("run-1"))

    with pytest.raises(ProbeError) as refused:
        k8s.backend.submit(request("run-2"))

    assert str(refused.value) == (
        f'jobs.batch "{job_name("hold", "run-2")}" is forbidden: exceeded quota: research-quota, '
        "requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1"
    )


def test_an_unreachable_api_server_is_a_backend_error() -> None:
    port = free_port()
    settings = KubernetesSettings(host=f"http://127.0.0.1:{port}", namespaces=("research",))

    with KubernetesBackend(settings, SystemClock()) as backend:
        for call in (
            lambda: backend.submit(request("run-1")),
            lambda: backend.jobs(["research/x"]),
            lambda: backend.cancel("research/x"),
            lambda: backend.logs("research/x"),
            backend.probe_jobs,
            backend.snapshot,
        ):
            with pytest.raises(BackendError, match="Connection refused"):
                call()


def test_an_api_server_failing_is_a_backend_error(k8s: KubernetesHarness) -> None:
    k8s.server["list", kmock.resource("v1/nodes")] << 503

    with pytest.raises(BackendError, match="list nodes: 503"):
        k8s.backend.snapshot()


def test_a_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    settings = KubernetesSettings(kubeconfig_path=tmp_path / "absent")

    with pytest.raises(ConfigError, match="kubernetes: "):
        KubernetesBackend(settings, SystemClock())


def test_who_last_changed_a_tenants_quota_reads_from_its_managed_fields(
    k8s: KubernetesHarness,
) -> None:
    before = k8s.clock.now()
    k8s.set_quota("research", gpus=8, jobs=10, by="kubectl-create")
    k8s.clock.advance(60)
    lowered = k8s.clock.now()
    k8s.set_quota("research", gpus=4, by="ops-carol")
    until = k8s.clock.now() + timedelta(seconds=1)

    changes = k8s.backend.quota_changes(before, until)

    subject = {"tenant": "research", "quota": "research-quota"}
    assert [(c.at, c.actor, dict(c.subject), c.change) for c in changes] == [
        (before.replace(microsecond=0), "kubectl-create", subject, "count/jobs.batch=10"),
        (lowered.replace(microsecond=0), "ops-carol", subject, "requests.nvidia.com/gpu=4"),
    ]
    assert k8s.backend.quota_changes(before, lowered) == changes[:1]


def test_a_write_read_again_after_another_manager_took_some_of_its_limits_is_one_change(
    k8s: KubernetesHarness,
) -> None:
    before = k8s.clock.now()
    k8s.set_quota("research", gpus=8, jobs=10, by="kubectl-create")
    [created] = k8s.backend.quota_changes(before, before + timedelta(seconds=1))
    k8s.clock.advance(60)
    k8s.set_quota("research", gpus=4, by="ops-carol")

    again, lowered = k8s.backend.quota_changes(before, k8s.clock.now() + timedelta(seconds=1))

    assert created.change == "count/jobs.batch=10 requests.nvidia.com/gpu=8"  # spaces: as Slurm's
    assert again == created  # its managedFields entry owns count/jobs.batch alone by now
    assert (lowered.actor, lowered.change) == ("ops-carol", "requests.nvidia.com/gpu=4")
