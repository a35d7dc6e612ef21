"""Quota changes as the objects' managedFields record them: a ResourceQuota's are its
managers' latest writes of spec.hard, a Kueue ClusterQueue's those of its quotas, each by the
user the API server's audit log (audit.py) names where it is read. The API server keeps no
history: a manager's earlier writes are gone. Pure translation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial

from observer.backends.base import QuotaChange
from observer.backends.kubernetes import wire
from observer.backends.kubernetes.audit import AuditWrite
from observer.backends.kubernetes.queues import CustomObject, kueue_gpu_quotas


def quota_changes(
    quota: wire.ResourceQuota, writes: Sequence[AuditWrite] = ()
) -> list[QuotaChange]:
    """Who last set which of the quota's hard limits, and when: one change per manager whose
    latest write (an Update or Apply of the object, not of its status) owns some of them,
    with the values it owns now. The API server keeps no history: a manager's earlier
    writes are gone, as are limits another manager has since taken over. `writes`: the
    audit log's of this quota, which name the user behind a manager's write."""
    meta = quota.metadata or wire.QuotaMeta()
    hard = (quota.spec.hard if quota.spec else None) or {}
    subject = {"tenant": meta.namespace or "", "quota": meta.name or ""}
    changes = []
    for entry in meta.managed_fields or []:
        owned = ((entry.fields_v1 or {}).get("f:spec") or {}).get("f:hard") or {}
        limits = sorted(key.removeprefix("f:") for key in owned if key.removeprefix("f:") in hard)
        if entry.subresource or entry.time is None or not limits:
            continue
        words = partial(_hard_words, limits=limits)
        now = words({"spec": {"hard": hard}})
        changes.append(
            _attributed(QuotaChange(entry.time, entry.manager or "", subject, now), writes, words)
        )
    return sorted(changes, key=lambda c: c.at)


def _hard_words(written: CustomObject, limits: list[str]) -> str:
    hard = (written.get("spec") or {}).get("hard") or {}
    return " ".join(f"{key}={hard[key]}" for key in limits if key in hard)


def cluster_queue_changes(
    cluster_queue: CustomObject,
    tenants: Iterable[str],
    gpu: str,
    writes: Sequence[AuditWrite] = (),
) -> list[QuotaChange]:
    """Who last set a Kueue ClusterQueue's quotas, and when: the manager whose latest write of
    the object (not of its status) owns spec.resourceGroups, with its GPU quotas as they are
    now; one change for each of the `tenants` it serves. resourceGroups is an atomic list
    (managedFields `f:resourceGroups: {}`): whoever writes it owns all of it. `writes`: the
    audit log's of this ClusterQueue. Shape: kueue apis/kueue/v1beta1/clusterqueue_types.go."""
    meta = cluster_queue.get("metadata") or {}
    name = str(meta.get("name") or "")

    def words(written: CustomObject) -> str:
        return kueue_quota_words(written.get("spec") or {}, gpu)

    now = words(cluster_queue)
    changes = []
    for entry in meta.get("managedFields") or []:
        owns = "f:resourceGroups" in ((entry.get("fieldsV1") or {}).get("f:spec") or {})
        if entry.get("subresource") or not entry.get("time") or not owns or not now:
            continue
        at = datetime.fromisoformat(entry["time"])
        change = _attributed(QuotaChange(at, entry.get("manager") or "", {}, now), writes, words)
        changes += [replace(change, subject={"tenant": t, "queue": name}) for t in tenants]
    return sorted(changes, key=lambda c: c.at)


def kueue_quota_words(spec: CustomObject, gpu: str) -> str:
    """A ClusterQueue's GPU quotas as its spec sets them, flavor by flavor, each limit named
    as Kueue names it: "nominalQuota[h200/nvidia.com/gpu]=8 borrowingLimit[h200/nvidia.com/gpu]=4"
    (a limit left unset, no limit, is not named)."""
    return " ".join(
        f"{limit}[{flavor.get('name')}/{gpu}]={resource[limit]}"
        for flavor, resource in kueue_gpu_quotas(spec, gpu)
        for limit in ("nominalQuota", "borrowingLimit", "lendingLimit")
        if resource.get(limit) is not None
    )


def _attributed(
    change: QuotaChange, writes: Sequence[AuditWrite], words: Callable[[CustomObject], str]
) -> QuotaChange:
    """The change by the user the audit log names for the write behind it (the manager kept),
    in the object's words as that write left it where the log records it."""
    write = max((w for w in writes if w.made(change.at)), key=lambda w: w.at, default=None)
    if write is None:
        return change
    said = words(write.written) if write.written is not None else ""
    return replace(change, actor=write.user, manager=change.actor, change=said or change.change)
