"""The isolation probe on Kubernetes: with one tenant's own ServiceAccount token, read another
tenant's Jobs, pods, logs and Secrets. The emulated API server authenticates tokens and
enforces namespace RBAC with Kubernetes' words; `grant_cross_namespace` opens a hole in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kmock
import pytest
import yaml

from observer.backends.kubernetes.backend import KubernetesBackend
from observer.backends.kubernetes.isolation import ISOLATION_PROBE_NAME
from observer.clock import SystemClock
from observer.domain import AccessAttempt, JobPhase, JobRequest, Workload
from observer.errors import BackendError, ProbeError
from observer.settings.controller import KubernetesSettings
from tests.backends.k8s_harness import KubernetesHarness

ACTIONS = ["list jobs", "list pods", "read pod log", "list secrets", "read secret"]
USER = "system:serviceaccount:research:tenant"
SECRET_VALUE = "s3cr3t-password-value"


@pytest.fixture
def k8s() -> Iterator[KubernetesHarness]:
    """prod runs a training pod and a job that logged a line, and keeps a database password."""
    with KubernetesHarness() as harness:
        harness.add_secret("prod", "db-password", {"password": SECRET_VALUE})
        harness.add_pod("prod", "trainer-0", gpus=1, node=harness.node_names[0])
        job = JobRequest("prod-run", "hold", "prod", None, Workload(1, duration_seconds=600))
        job_id = harness.backend.submit(job)
        harness.settle(lambda: harness.backend.jobs([job_id])[job_id].phase is JobPhase.RUNNING, 30)
        yield harness


def _tried(attempts: list[AccessAttempt]) -> dict[str, AccessAttempt]:
    assert [a.action for a in attempts] == ACTIONS
    return {a.action: a for a in attempts}


def test_a_compliant_cluster_denies_every_read_with_rbacs_words(k8s: KubernetesHarness) -> None:
    tried = _tried(k8s.backend.probe_isolation("research", "prod"))

    assert not any(a.allowed for a in tried.values())
    assert tried["list pods"].target == "prod"
    assert tried["list pods"].detail == (
        f'pods is forbidden: User "{USER}" cannot list resource "pods" in API group "" '
        'in the namespace "prod"'
    )
    assert tried["list jobs"].detail == (
        f'jobs.batch is forbidden: User "{USER}" cannot list resource "jobs" in API group '
        '"batch" in the namespace "prod"'
    )
    # nothing listed, so a name is tried: RBAC refuses before it looks the object up
    assert tried["read pod log"].target == f"prod/{ISOLATION_PROBE_NAME}"
    assert tried["read pod log"].detail == (
        f'pods "{ISOLATION_PROBE_NAME}" is forbidden: User "{USER}" cannot get resource '
        '"pods/log" in API group "" in the namespace "prod"'
    )
    assert tried["read secret"].detail.startswith(f'secrets "{ISOLATION_PROBE_NAME}" is forbidden')
    # every read went out with research's token, none with the observer's own rights
    users = {user for user, *_ in k8s.server.tenant_requests}
    assert users == {USER}


def test_a_leaky_rolebinding_lets_every_read_through_and_nothing_read_is_kept(
    k8s: KubernetesHarness,
) -> None:
    k8s.grant_cross_namespace("research", "prod")

    tried = _tried(k8s.backend.probe_isolation("research", "prod"))

    assert all(a.allowed for a in tried.values())
    assert tried["list pods"].detail == "listed 2 pods"
    assert tried["list jobs"].detail == "listed 1 Jobs"
    newest = max(
        k8s.core.list_namespaced_pod("prod").items,
        key=lambda p: (p.metadata.creation_timestamp, p.metadata.name),
    )
    assert tried["read pod log"].target == f"prod/{newest.metadata.name}"
    assert tried["read secret"].target == "prod/db-password"
    assert tried["read secret"].detail == "read it (1 keys, values not kept)"
    assert not any(SECRET_VALUE in a.detail for a in tried.values())
    # the other direction is still closed
    assert not any(a.allowed for a in k8s.backend.probe_isolation("prod", "research"))


def test_a_partial_grant_shows_exactly_what_leaks(k8s: KubernetesHarness) -> None:
    k8s.grant_cross_namespace("research", "prod", ("pods",))

    tried = _tried(k8s.backend.probe_isolation("research", "prod"))

    assert [a.action for a in tried.values() if a.allowed] == ["list pods"]
    pod = tried["read pod log"].target.split("/")[1]
    assert pod != ISOLATION_PROBE_NAME  # the listing gave a real pod to try
    assert tried["read pod log"].detail == (
        f'pods "{pod}" is forbidden: User "{USER}" cannot get resource "pods/log" in API '
        'group "" in the namespace "prod"'
    )


def test_a_404_is_a_breach_because_rbac_decides_before_the_lookup(k8s: KubernetesHarness) -> None:
    # get on Secrets without list: the name tried does not exist, and the 404 says RBAC let it in
    k8s.grant_cross_namespace("research", "prod", ("secrets",))
    k8s.server["list", kmock.resource("v1/secrets")] << 403  # no list, as a Role with get only

    tried = _tried(k8s.backend.probe_isolation("research", "prod"))

    assert not tried["list secrets"].allowed
    secret = tried["read secret"]
    assert (secret.target, secret.allowed) == (f"prod/{ISOLATION_PROBE_NAME}", True)
    assert secret.detail.startswith("authorized, then 404 ")


def test_the_tenants_token_replaces_the_observers_own_credentials(
    k8s: KubernetesHarness, tmp_path: Path
) -> None:
    k8s.server.tokens["observer-admin-token"] = None  # the observer's kubeconfig: an admin
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulated", "cluster": {"server": k8s.url}}],
        "users": [{"name": "observer", "user": {"token": "observer-admin-token"}}],
        "contexts": [{"name": "soak", "context": {"cluster": "emulated", "user": "observer"}}],
        "current-context": "soak",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    settings = KubernetesSettings(
        kubeconfig_path=path,
        namespaces=k8s.tenants,
        tenant_token_files=k8s.settings.tenant_token_files,
    )

    with KubernetesBackend(settings, SystemClock()) as backend:
        assert backend.snapshot().nodes  # the observer's own client reads everything
        attempts = backend.probe_isolation("research", "prod")

    assert not any(a.allowed for a in attempts)


def test_a_tenant_without_usable_credentials_cannot_be_probed(
    k8s: KubernetesHarness, tmp_path: Path
) -> None:
    files = dict(k8s.settings.tenant_token_files)
    cases = {
        "no token of tenant research": {},
        "cannot read tenant research's token": {"research": tmp_path / "absent"},
        "the API server does not accept research's token: .*401 Unauthorized": {
            "research": tmp_path / "forged"
        },
    }
    (tmp_path / "forged").write_text("not-a-token-the-server-issued")
    for words, tokens in cases.items():
        settings = k8s.settings.model_copy(update={"tenant_token_files": {**files, **tokens}})
        if not tokens:
            settings = k8s.settings.model_copy(
                update={"tenant_token_files": {"prod": files["prod"]}}
            )
        with (
            KubernetesBackend(settings, k8s.clock) as backend,
            pytest.raises(ProbeError, match=words),
        ):
            backend.probe_isolation("research", "prod")


def test_a_token_that_cannot_read_its_own_namespace_proves_nothing(
    k8s: KubernetesHarness,
) -> None:
    k8s.server["list", kmock.resource("v1/pods"), kmock.namespace("research")] << 403

    with pytest.raises(ProbeError, match="cannot list pods in its own namespace"):
        k8s.backend.probe_isolation("research", "prod")


def test_an_answer_that_is_neither_yes_nor_no_is_a_backend_error(k8s: KubernetesHarness) -> None:
    k8s.grant_cross_namespace("research", "prod")
    k8s.server["list", kmock.resource("v1/secrets")] << 503

    with pytest.raises(BackendError, match="list secrets prod: 503"):
        k8s.backend.probe_isolation("research", "prod")
