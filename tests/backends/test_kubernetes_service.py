"""The Kubernetes backend's service lifecycle over the emulator: a Deployment and a Service
that the API server admits where Pod Security `restricted` is enforced, replicas answering
from the real `observer probe serve` at their pod addresses once ready, a scale-out whose
extra replica waits in the scheduler's words, a rolling restart that brings new revisions
without a moment short of ready replicas, and a deletion that takes the replicas away."""

from __future__ import annotations

from observer.backends.base import ServiceSpec
from observer.workloads.serve import infer
from tests.backends.k8s_harness import KubernetesHarness

SPEC = ServiceSpec(
    name="observer-inference",
    tenant="prod",  # the harness's namespace that enforces `restricted`
    gpus_per_replica=4,
    port=8000,
    latency_ms=5,
    warmup_seconds=0,
    ready_period_seconds=1,
)


def test_a_service_is_deployed_scaled_restarted_and_deleted():
    with KubernetesHarness() as k8s:
        backend = k8s.backend
        backend.deploy_service(SPEC, 2)
        k8s.settle(lambda: sum(r.ready for r in backend.service_replicas(SPEC)) == 2, 10)
        replicas = backend.service_replicas(SPEC)
        assert len({r.address for r in replicas}) == 2
        for replica in replicas:
            assert replica.address is not None and replica.address.endswith(":8000")
            answer = infer(replica.address, 2)
            assert answer.ok and answer.seconds >= 0.005

        backend.scale_service(SPEC, 4)  # 16 GPUs asked of 12
        k8s.settle(lambda: sum(r.ready for r in backend.service_replicas(SPEC)) == 3, 10)
        k8s.step()
        waiting = [r for r in backend.service_replicas(SPEC) if r.pending_reason]
        assert [r.pending_reason for r in waiting] == [
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
        ]
        assert waiting[0].address is None and not waiting[0].ready

        backend.scale_service(SPEC, 2)
        k8s.settle(lambda: len(backend.service_replicas(SPEC)) == 2, 10)
        before = {r.revision for r in backend.service_replicas(SPEC)}
        backend.restart_service(SPEC)
        ready_counts = []

        def renewed() -> bool:
            replicas = backend.service_replicas(SPEC)
            ready_counts.append(sum(r.ready for r in replicas))
            return len(replicas) == 2 and all(
                r.ready and r.revision not in before for r in replicas
            )

        k8s.settle(renewed, 30)
        assert min(ready_counts) >= 2  # maxUnavailable 0: never short of a ready replica

        backend.delete_service(SPEC)
        backend.delete_service(SPEC)  # gone already: not an error
        k8s.settle(lambda: not k8s.core.list_namespaced_pod("prod").items, 10)
        assert backend.service_replicas(SPEC) == []


def test_deploying_again_takes_the_existing_service_over():
    with KubernetesHarness() as k8s:
        k8s.backend.deploy_service(SPEC, 1)
        k8s.backend.deploy_service(SPEC, 2)  # a restarted controller's
        k8s.settle(lambda: sum(r.ready for r in k8s.backend.service_replicas(SPEC)) == 2, 10)
