"""What the Kubernetes backend needs to reach its API server is refused in one line naming the
setting and the path: a kubeconfig (and its context), else the pod's service-account token;
and the API server's audit log where one is set."""

from __future__ import annotations

from pathlib import Path

from observer.backends.kubernetes.preconditions import preconditions
from observer.settings.controller import KubernetesSettings

KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: soak
contexts:
  - name: soak
    context: {cluster: c, user: u}
"""


def test_a_kubeconfig_with_its_context_passes(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)

    assert preconditions(KubernetesSettings(kubeconfig_path=path)) == []
    assert preconditions(KubernetesSettings(kubeconfig_path=path, kubeconfig_context="soak")) == []


def test_a_missing_kubeconfig_or_context_is_named(tmp_path: Path) -> None:
    path = tmp_path / "config"

    assert preconditions(KubernetesSettings(kubeconfig_path=path)) == [
        f"controller.kubernetes.kubeconfig_path: no such file ({path})"
    ]
    path.write_text(KUBECONFIG)
    assert preconditions(KubernetesSettings(kubeconfig_path=path, kubeconfig_context="x")) == [
        f"controller.kubernetes.kubeconfig_context: no context 'x' in the kubeconfig ({path})"
    ]


def test_in_cluster_needs_the_service_account_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    in_pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}

    assert preconditions(KubernetesSettings(), in_pod, token) == [
        "controller.kubernetes.kubeconfig_path: unset, and no in-cluster service-account token "
        f"({token})"
    ]
    token.write_text("t")
    assert preconditions(KubernetesSettings(), in_pod, token) == []
    assert preconditions(KubernetesSettings(host="http://127.0.0.1:8001"), {}, token) == []


def test_an_audit_log_set_must_be_readable_at_start(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    settings = KubernetesSettings(host="http://127.0.0.1:8001", audit_log_path=log)

    assert preconditions(settings) == [
        f"controller.kubernetes.audit_log_path: no such file ({log})"
    ]
    log.mkdir()
    assert preconditions(settings) == [
        f"controller.kubernetes.audit_log_path: cannot be read, Is a directory ({log})"
    ]
    log.rmdir()
    log.write_text("")
    assert preconditions(settings) == []
