"""The inference probe's service on Kubernetes: a Deployment of `observer probe serve` behind a
Service (manifests.py says what), its replicas the Deployment's pods.

The Deployment controller keeps the replicas up (it replaces one that ended and rolls out a
restart with its own surge and readiness checks), so each call here is a request or two. A
request the API server refuses (quota, admission, validation, RBAC) raises ProbeError with its
words.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from observer.backends.base import Replica, ServiceSpec
from observer.backends.kubernetes.client import Apis, ApiStatusError, api, done_already
from observer.backends.kubernetes.manifests import (
    SERVICE_LABEL,
    deployment_manifest,
    service_manifest,
)
from observer.backends.kubernetes.objects import creation_then_name, is_deleting, replica_of
from observer.clock import Clock
from observer.errors import ProbeError
from observer.settings.controller import KubernetesSettings

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


class KubernetesServices:
    """ServiceBackend over the apps and core APIs."""

    def __init__(self, apis: Apis, settings: KubernetesSettings, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._timeout = settings.request_timeout_seconds
        self._core, self._apps = apis.core, apis.apps

    def deploy_service(self, spec: ServiceSpec, replicas: int) -> None:
        where = f"{spec.tenant}/{spec.name}"
        # A Service left by an earlier controller serves as well.
        with done_already(409), _refused(), api(f"create service {where}"):
            self._core.create_namespaced_service(
                spec.tenant, service_manifest(spec), _request_timeout=self._timeout
            )
        try:
            with _refused(), api(f"create deployment {where}"):
                self._apps.create_namespaced_deployment(
                    spec.tenant,
                    deployment_manifest(self._settings, spec, replicas),
                    _request_timeout=self._timeout,
                )
        except ApiStatusError as exc:
            if exc.status != 409:
                raise
            self.scale_service(spec, replicas)  # an earlier controller's: taken over

    def scale_service(self, spec: ServiceSpec, replicas: int) -> None:
        with _refused(), api(f"scale deployment {spec.tenant}/{spec.name}"):
            self._apps.patch_namespaced_deployment(
                spec.name,
                spec.tenant,
                {"spec": {"replicas": replicas}},
                _request_timeout=self._timeout,
            )

    def restart_service(self, spec: ServiceSpec) -> None:
        # What `kubectl rollout restart` writes: a new template, so a new revision rolls out.
        at = self._clock.now().isoformat()
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: at}}}}}
        with _refused(), api(f"restart deployment {spec.tenant}/{spec.name}"):
            self._apps.patch_namespaced_deployment(
                spec.name, spec.tenant, patch, _request_timeout=self._timeout
            )

    def service_replicas(self, spec: ServiceSpec) -> list[Replica]:
        with api(f"list pods in {spec.tenant}"):
            pods = self._core.list_namespaced_pod(
                spec.tenant,
                label_selector=f"{SERVICE_LABEL}={spec.name}",
                _request_timeout=self._timeout,
            ).items
        live = [pod for pod in pods if not is_deleting(pod.metadata)]
        return [replica_of(pod, spec.port) for pod in sorted(live, key=creation_then_name)]

    def delete_service(self, spec: ServiceSpec) -> None:
        where = f"{spec.tenant}/{spec.name}"
        with done_already(404), api(f"delete deployment {where}"):
            self._apps.delete_namespaced_deployment(
                spec.name,
                spec.tenant,
                propagation_policy="Background",
                _request_timeout=self._timeout,
            )
        with done_already(404), api(f"delete service {where}"):
            self._core.delete_namespaced_service(
                spec.name, spec.tenant, _request_timeout=self._timeout
            )


@contextmanager
def _refused() -> Iterator[None]:
    """A request the API server refuses (quota, admission, validation, RBAC) is ProbeError
    in its words; 409 (it exists) and what is not a refusal pass on."""
    try:
        yield
    except ApiStatusError as exc:
        if 400 <= exc.status < 500 and exc.status not in (409, 429):
            raise ProbeError(exc.message) from None
        raise
