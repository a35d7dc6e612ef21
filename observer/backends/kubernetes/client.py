"""The connection to the API server: the client's configuration (the observer's own, or a
tenant's bearer token alone), the API objects over it, and the translation of the client's
failures into BackendError.

An API server that cannot be reached or read raises BackendError; one that answers with an
error status raises ApiStatusError, which carries the status and the server's own words.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pydantic
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException, OpenApiException
from kubernetes.config.config_exception import ConfigException

from observer.errors import BackendError, ConfigError
from observer.settings.controller import KubernetesSettings


class ApiStatusError(BackendError):
    """The API server answered with an error status; `message` is its own words."""

    def __init__(self, action: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{action}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


# How the API server's audit log and metrics name the observer's requests (client-go's
# controllers name themselves the same way), not the client library's generic agent.
USER_AGENT = "gpu-soak-observer"


class Apis:
    """One connection to the API server: the API groups the backend calls, and the custom
    objects of the queues it reads (Kueue's, Volcano's)."""

    def __init__(self, configuration: client.Configuration) -> None:
        self._client = client.ApiClient(configuration)
        self._client.user_agent = USER_AGENT
        self.core = client.CoreV1Api(self._client)
        self.batch = client.BatchV1Api(self._client)
        self.apps = client.AppsV1Api(self._client)
        self.custom = client.CustomObjectsApi(self._client)

    def close(self) -> None:
        self._client.close()


@contextmanager
def api(action: str) -> Iterator[None]:
    """Turn every failure of the client inside into BackendError (ApiStatusError for a status)."""
    try:
        yield
    except ApiException as exc:
        raise ApiStatusError(
            action, exc.status or 0, exc.reason or "", _status_message(exc)
        ) from None
    except (OpenApiException, urllib3.exceptions.HTTPError, pydantic.ValidationError) as exc:
        raise BackendError(f"{action}: {exc}") from None


@contextmanager
def done_already(status: int) -> Iterator[None]:
    """Let pass the error status saying a request's work is done already: 404 to a deletion
    (it is gone), 409 to a creation (it is there)."""
    try:
        yield
    except ApiStatusError as exc:
        if exc.status != status:
            raise


def _status_message(exc: ApiException) -> str:
    """The message of the API's Status object, or the raw body when it has none."""
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body or ""
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    message = status.get("message") if isinstance(status, dict) else None
    return str(message) if message else body.strip() or exc.reason or ""


def observer_configuration(settings: KubernetesSettings) -> client.Configuration:
    """The observer's own: a given host, its kubeconfig, or the pod's service account."""
    configuration = client.Configuration()
    try:
        if settings.host is not None:
            configuration.host = settings.host
        elif settings.kubeconfig_path is not None:
            config.load_kube_config(
                config_file=str(settings.kubeconfig_path),
                context=settings.kubeconfig_context,
                client_configuration=configuration,
            )
        else:
            config.load_incluster_config(client_configuration=configuration)
    except (ConfigException, OSError) as exc:
        raise ConfigError([f"kubernetes: {exc}"]) from None
    return configuration


def tenant_configuration(settings: KubernetesSettings, token: str) -> client.Configuration:
    """The observer's server and TLS trust, with none of its identity: only the tenant's
    bearer token (no client certificate, basic auth or token refresh of the observer's)."""
    configuration = observer_configuration(settings)
    configuration.api_key = {"BearerToken": f"Bearer {token}"}
    configuration.api_key_prefix = {}
    configuration.refresh_api_key_hook = None
    configuration.cert_file = None
    configuration.key_file = None
    configuration.username = None
    configuration.password = None
    return configuration
