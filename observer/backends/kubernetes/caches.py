"""The informers (informer.py) the backend reads instead of listing: nodes and pods in all
namespaces; in each probe namespace its Jobs, its Warning events (`type=Warning`), its
ResourceQuotas, Kueue's Workloads and LocalQueues and Volcano's PodGroups; cluster-wide Kueue's
ClusterQueues and Volcano's Queues. All start at the first read, which waits for their first
lists for as long as one request may take; after that a read costs the API server nothing.

Blindness: reading a view whose watch is down raises BackendError naming that view. The read
that needed it (a snapshot, probe_jobs, ...) fails whole, blind time as a failed list was; a
view it does not need (the Workloads when no Job is suspended) does not blind it. A queue
system whose CRDs the cluster lacks is an empty view (`absent`), not blindness.

Each informer holds one connection in its watch: `connections()` sizes the client's pool.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from functools import partial
from itertools import chain
from typing import Any, TypeVar

from observer.backends.kubernetes import wire
from observer.backends.kubernetes.client import Apis
from observer.backends.kubernetes.informer import Informer, View
from observer.backends.kubernetes.queue_reads import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    POD_GROUPS,
    VOLCANO_QUEUES,
    WORKLOADS,
    CustomResource,
)
from observer.backends.kubernetes.queues import CustomObject
from observer.clock import Clock
from observer.errors import BackendError

T = TypeVar("T")

WARNING = "type=Warning"  # the only events a job's status reads (status.py)
_NAMESPACED_CUSTOM = (WORKLOADS, LOCAL_QUEUES, POD_GROUPS)
_CLUSTER_CUSTOM = (CLUSTER_QUEUES, VOLCANO_QUEUES)
_PER_NAMESPACE = 3 + len(_NAMESPACED_CUSTOM)  # Jobs, events, quotas and the queues' objects


def connections(namespaces: Collection[str]) -> int:
    """The watches held open at once, one connection each."""
    return 2 + len(_CLUSTER_CUSTOM) + _PER_NAMESPACE * len(namespaces)


class Caches:
    """Every informer of the backend, and typed reads of their latest views."""

    def __init__(
        self, apis: Apis, namespaces: Collection[str], clock: Clock, timeout: float
    ) -> None:
        self._core, self._batch, self._custom = apis.core, apis.batch, apis.custom
        self._timeout = timeout
        self._clock = clock
        self._nodes = self._informer(
            "nodes",
            self._core.list_node,
            lambda **since: self._core.list_node(watch=True, **since),
            wire.NODES,
        )
        self._pods = self._informer(
            "pods in all namespaces",
            self._core.list_pod_for_all_namespaces,
            lambda **since: self._core.list_pod_for_all_namespaces(watch=True, **since),
            wire.PODS,
        )
        self._jobs = {n: self._namespaced_jobs(n) for n in namespaces}
        self._events = {n: self._namespaced_events(n) for n in namespaces}
        self._quotas = {n: self._namespaced_quotas(n) for n in namespaces}
        self._custom_objects: dict[tuple[str, str | None], Informer[dict[str, Any]]] = {
            (resource.plural, namespace): self._custom_informer(resource, namespace)
            for resource in _NAMESPACED_CUSTOM
            for namespace in namespaces
        } | {
            (resource.plural, None): self._custom_informer(resource) for resource in _CLUSTER_CUSTOM
        }
        self._started = False
        self._starting = threading.Lock()  # two callers' first reads start them once

    def _all(self) -> list[Informer[Any]]:
        return list(
            chain(
                (self._nodes, self._pods),
                self._jobs.values(),
                self._events.values(),
                self._quotas.values(),
                self._custom_objects.values(),
            )
        )

    def start(self) -> None:
        """Every informer started, then their first lists waited for (once)."""
        if self._started:
            return
        with self._starting:
            if self._started:
                return
            informers = self._all()
            for informer in informers:
                informer.start()
            for informer in informers:  # in parallel: the slowest list is the wait
                informer.wait_synced(self._timeout)
            self._started = True

    def stop(self) -> None:
        if self._started:
            for informer in self._all():
                informer.stop()

    def views(self) -> tuple[View[Any], ...]:
        """Every view, up or not (none before the first read)."""
        return tuple(informer.view() for informer in self._all()) if self._started else ()

    def nodes(self) -> View[wire.Node]:
        return self._up(self._nodes, "nodes")

    def pods(self) -> View[wire.Pod]:
        return self._up(self._pods, "pods")

    def jobs(self, namespace: str) -> list[wire.Job]:
        return list(self._up(self._jobs.get(namespace), f"jobs in {namespace}").objects())

    def events(self, namespace: str) -> list[wire.CoreEvent]:
        return list(self._up(self._events.get(namespace), f"events in {namespace}").objects())

    def quotas(self, namespace: str) -> list[wire.ResourceQuota]:
        informer = self._quotas.get(namespace)
        return list(self._up(informer, f"resourcequotas in {namespace}").objects())

    def custom(self, resource: CustomResource, namespace: str | None) -> list[CustomObject]:
        """A queue's objects in `namespace` (None: a cluster-scoped kind's), none where the
        cluster lacks the kind."""
        informer = self._custom_objects.get((resource.plural, namespace))
        return list(self._up(informer, f"{resource.plural} in {namespace}").objects())

    def _up(self, informer: Informer[T] | None, what: str) -> View[T]:
        if informer is None:
            raise BackendError(f"{what}: not a probe namespace, not watched")
        self.start()
        view = informer.view()
        if not view.up:
            raise BackendError(view.blindness())
        return view

    # --- the informers ---------------------------------------------------------------------

    def _informer(
        self,
        what: str,
        list_call: Any,
        watch_call: Any,
        decoder: wire.Decoder[T],
        optional: bool = False,
    ) -> Informer[T]:
        return Informer(what, list_call, watch_call, decoder, self._clock, self._timeout, optional)

    def _namespaced_jobs(self, namespace: str) -> Informer[wire.Job]:
        return self._informer(
            f"jobs in {namespace}",
            partial(self._batch.list_namespaced_job, namespace),
            lambda **since: self._batch.list_namespaced_job(namespace, watch=True, **since),
            wire.JOBS,
        )

    def _namespaced_events(self, namespace: str) -> Informer[wire.CoreEvent]:
        return self._informer(
            f"Warning events in {namespace}",
            partial(self._core.list_namespaced_event, namespace, field_selector=WARNING),
            lambda **since: self._core.list_namespaced_event(
                namespace, field_selector=WARNING, watch=True, **since
            ),
            wire.EVENTS,
        )

    def _namespaced_quotas(self, namespace: str) -> Informer[wire.ResourceQuota]:
        return self._informer(
            f"resourcequotas in {namespace}",
            partial(self._core.list_namespaced_resource_quota, namespace),
            lambda **since: self._core.list_namespaced_resource_quota(
                namespace, watch=True, **since
            ),
            wire.QUOTAS,
        )

    def _custom_informer(
        self, resource: CustomResource, namespace: str | None = None
    ) -> Informer[dict[str, Any]]:
        kind = (resource.group, resource.version)
        if namespace is None:
            return self._informer(
                f"{resource.plural}.{resource.group}",
                partial(self._custom.list_cluster_custom_object, *kind, resource.plural),
                lambda **since: self._custom.list_cluster_custom_object(
                    *kind, resource.plural, watch=True, **since
                ),
                wire.CUSTOM,
                optional=True,
            )
        return self._informer(
            f"{resource.plural}.{resource.group} in {namespace}",
            partial(self._custom.list_namespaced_custom_object, *kind, namespace, resource.plural),
            lambda **since: self._custom.list_namespaced_custom_object(
                *kind, namespace, resource.plural, watch=True, **since
            ),
            wire.CUSTOM,
            optional=True,
        )
