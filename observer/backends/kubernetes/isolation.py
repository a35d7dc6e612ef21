"""The isolation probe: reads of another tenant's namespace with a tenant's own bearer token,
and the judgement of each answer.

Each probe has its own client, carrying nothing of the observer's identity. The API server
authorizes a request before it looks anything up, so only 401 and 403 are denials: 2xx, and
equally 404 or 400 (the object is absent, the container not started), mean RBAC let the request
through, a breach. 429, 5xx and transport failures decide nothing and raise BackendError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from observer.backends.kubernetes.client import Apis, ApiStatusError, api, tenant_configuration
from observer.backends.kubernetes.objects import creation_then_name, object_name
from observer.domain import AccessAttempt
from observer.errors import ProbeError
from observer.settings.controller import KubernetesSettings

# The object name tried when a listing did not give a real one: a 404 still proves the read
# was authorized, a 403 that it was not.
ISOLATION_PROBE_NAME = "observer-isolation-probe"
_DENIED = frozenset({401, 403})
_LOG_BYTES = 1024  # enough to prove a log can be read; its content is never kept

T = TypeVar("T")


def probe(settings: KubernetesSettings, as_tenant: str, other_tenant: str) -> list[AccessAttempt]:
    """Try to read `other_tenant`'s namespace as `as_tenant`, after a read of its own."""
    tenant = Apis(tenant_configuration(settings, _token(settings, as_tenant)))
    try:
        return _try_reads(tenant, as_tenant, other_tenant, settings.request_timeout_seconds)
    finally:
        tenant.close()


def _token(settings: KubernetesSettings, tenant: str) -> str:
    path = settings.tenant_token_files.get(tenant)
    if path is None:
        raise ProbeError(
            f"no token of tenant {tenant} in controller.kubernetes.tenant_token_files: "
            "its isolation cannot be tried"
        )
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ProbeError(f"cannot read tenant {tenant}'s token at {path}: {exc}") from None
    if not token:
        raise ProbeError(f"tenant {tenant}'s token file {path} is empty")
    return token


def _try_reads(apis: Apis, own: str, other: str, timeout: float) -> list[AccessAttempt]:
    core, batch = apis.core, apis.batch
    try:  # the control: a token that cannot read its own namespace makes denials meaningless
        with api(f"list pods in {own} as {own}"):
            core.list_namespaced_pod(own, limit=1, _request_timeout=timeout)
    except ApiStatusError as exc:
        if exc.status == 401:
            raise ProbeError(f"the API server does not accept {own}'s token: {exc}") from None
        if exc.status == 403:
            raise ProbeError(
                f"{own}'s token cannot list pods in its own namespace, so its denials "
                f"elsewhere would prove nothing: {exc.message}"
            ) from None
        raise
    attempts: list[AccessAttempt] = []
    _attempt(
        attempts,
        "list jobs",
        other,
        lambda: batch.list_namespaced_job(other, _request_timeout=timeout).items,
        lambda items: f"listed {len(items)} Jobs",
    )
    pods = _attempt(
        attempts,
        "list pods",
        other,
        lambda: core.list_namespaced_pod(other, _request_timeout=timeout).items,
        lambda items: f"listed {len(items)} pods",
    )
    pod = max(pods or [], key=creation_then_name, default=None)
    pod_name = object_name(pod.metadata) if pod is not None else ISOLATION_PROBE_NAME
    containers = pod.spec.containers if pod is not None and pod.spec else []
    _attempt(
        attempts,
        "read pod log",
        f"{other}/{pod_name}",
        lambda: core.read_namespaced_pod_log(
            pod_name,
            other,
            container=containers[0].name if containers else None,
            limit_bytes=_LOG_BYTES,
            _request_timeout=timeout,
        ),
        lambda text: f"read its log ({len(text.encode())} bytes, not kept)",
    )
    secrets = _attempt(
        attempts,
        "list secrets",
        other,
        lambda: core.list_namespaced_secret(other, _request_timeout=timeout).items,
        lambda items: f"listed {len(items)} Secrets",
    )
    names = sorted(object_name(secret.metadata) for secret in secrets or [])
    secret_name = names[0] if names else ISOLATION_PROBE_NAME
    _attempt(
        attempts,
        "read secret",
        f"{other}/{secret_name}",
        lambda: core.read_namespaced_secret(secret_name, other, _request_timeout=timeout),
        lambda secret: f"read it ({len(secret.data or {})} keys, values not kept)",
    )
    return attempts


def _attempt(
    attempts: list[AccessAttempt],
    action: str,
    target: str,
    read: Callable[[], T],
    describe: Callable[[T], str],
) -> T | None:
    """Try one read; append what came of it; return what was read (None unless allowed)."""
    try:
        with api(f"{action} {target}"):
            result = read()
    except ApiStatusError as exc:
        if exc.status in _DENIED:
            attempts.append(AccessAttempt(action, target, False, exc.message))
            return None
        if exc.status == 429 or exc.status >= 500 or exc.status < 400:
            raise  # neither a yes nor a no: no verdict
        # Authorized, then answered: the object is absent (404), the container waits (400)...
        attempts.append(
            AccessAttempt(
                action, target, True, f"authorized, then {exc.status} {exc.reason}: {exc.message}"
            )
        )
        return None
    attempts.append(AccessAttempt(action, target, True, describe(result)))
    return result
