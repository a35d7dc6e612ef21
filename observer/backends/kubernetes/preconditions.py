"""What the Kubernetes backend needs to reach its API server, checked before anything runs: the
kubeconfig and its context, or the pod's service-account token; and the audit log, if one is
set. Pure reads of the filesystem and the environment (no kubernetes import, no network);
each problem one line naming the setting."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from observer.settings.controller import KubernetesSettings

# Where a pod finds its service account, as the client's in-cluster config reads it
SERVICE_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
_KUBECONFIG = "controller.kubernetes.kubeconfig_path"
_CONTEXT = "controller.kubernetes.kubeconfig_context"
_AUDIT_LOG = "controller.kubernetes.audit_log_path"


def preconditions(
    settings: KubernetesSettings,
    environ: Mapping[str, str] = os.environ,
    token: Path = SERVICE_TOKEN,
) -> list[str]:
    """One `setting: problem (path)` line per unmet need; none when the backend can start."""
    return _credentials(settings, environ, token) + _audit_log(settings.audit_log_path)


def _credentials(
    settings: KubernetesSettings, environ: Mapping[str, str], token: Path
) -> list[str]:
    if settings.host is not None:
        return []  # used as is, without credentials
    if settings.kubeconfig_path is not None:
        return _kubeconfig(settings.kubeconfig_path, settings.kubeconfig_context)
    setting = _KUBECONFIG
    if not token.is_file():
        return [f"{setting}: unset, and no in-cluster service-account token ({token})"]
    if not environ.get(SERVICE_HOST_ENV):
        return [f"{setting}: unset, and {SERVICE_HOST_ENV} is not set (not in a pod?)"]
    return []


def _audit_log(path: Path | None) -> list[str]:
    """A log set but unreadable at start is a mistake; one lost later (a rotation) is
    warned of while the field managers stand in."""
    if path is None:
        return []
    try:
        with path.open("rb"):
            return []
    except FileNotFoundError:
        return [f"{_AUDIT_LOG}: no such file ({path})"]
    except OSError as exc:
        return [f"{_AUDIT_LOG}: cannot be read, {exc.strerror} ({path})"]


def _kubeconfig(path: Path, context: str | None) -> list[str]:
    setting = _KUBECONFIG
    try:
        loaded = yaml.safe_load(path.read_bytes())
    except FileNotFoundError:
        return [f"{setting}: no such file ({path})"]
    except OSError as exc:
        return [f"{setting}: cannot be read, {exc.strerror} ({path})"]
    except yaml.YAMLError:
        return [f"{setting}: not YAML ({path})"]
    if not isinstance(loaded, dict):
        return [f"{setting}: not a kubeconfig ({path})"]
    contexts = [c.get("name") for c in loaded.get("contexts") or () if isinstance(c, dict)]
    if context is not None and context not in contexts:
        return [f"{_CONTEXT}: no context {context!r} in the kubeconfig ({path})"]
    if context is None and not loaded.get("current-context"):
        return [f"{_CONTEXT}: unset, and the kubeconfig has no current-context ({path})"]
    return []
