"""The API server's audit log (kube-apiserver --audit-log-path, one audit.k8s.io/v1 Event a
line), read for who wrote the quotas: each completed, successful create, update or patch of a
ResourceQuota or a Kueue ClusterQueue (not of their status subresource), by the user the API
server authenticated, with the object as written where the audit policy logs responses
(RequestResponse). Shape: kubernetes staging/src/k8s.io/apiserver/pkg/apis/audit/v1/types.go
(Event, ObjectReference)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from observer.logging_setup import get_logger

_log = get_logger("observer.backends.kubernetes")

# (objectRef.apiGroup, objectRef.resource) of the objects whose writes are quota changes
QUOTA_RESOURCES = frozenset({("", "resourcequotas"), ("kueue.x-k8s.io", "clusterqueues")})
_WRITES = frozenset({"create", "update", "patch"})
# Most of an audit log is other objects' events: lines naming neither are never parsed.
_QUOTA_WORDS = tuple(f'"{resource}"'.encode() for _, resource in QUOTA_RESOURCES)


@dataclass(frozen=True, slots=True)
class AuditWrite:
    """One write of a quota object as the audit log records it: the request's arrival and
    completion, the authenticated user, the object, and the object as written (None: the
    policy logs below RequestResponse)."""

    received_at: datetime
    at: datetime
    user: str
    resource: str
    namespace: str
    name: str
    written: Mapping[str, Any] | None

    def made(self, moment: datetime) -> bool:
        """Whether a time the API server stamped during a write, to the second (managedFields'
        time), may be this write's."""
        return self.received_at - timedelta(seconds=1) < moment <= self.at


def audit_writes(lines: Iterable[bytes]) -> list[AuditWrite]:
    """The quota writes among audit log lines, in the log's order; lines that are not an
    Event (a line cut short by a crash) are passed over."""
    writes = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        write = _write(event) if isinstance(event, dict) else None
        if write is not None:
            writes.append(write)
    return writes


def _write(event: Mapping[str, Any]) -> AuditWrite | None:
    ref = event.get("objectRef") or {}
    code = (event.get("responseStatus") or {}).get("code") or 0
    if (
        event.get("kind") != "Event"
        or event.get("stage") != "ResponseComplete"
        or event.get("verb") not in _WRITES
        or (ref.get("apiGroup") or "", ref.get("resource")) not in QUOTA_RESOURCES
        or ref.get("subresource")
        or not 200 <= code < 300
    ):
        return None
    written = event.get("responseObject")
    meta = (written or {}).get("metadata") or {}
    try:
        received_at = datetime.fromisoformat(event["requestReceivedTimestamp"])
        at = datetime.fromisoformat(event["stageTimestamp"])
    except (KeyError, TypeError, ValueError):
        return None
    return AuditWrite(
        received_at=received_at,
        at=at,
        user=str((event.get("user") or {}).get("username") or ""),
        resource=str(ref["resource"]),
        namespace=str(ref.get("namespace") or meta.get("namespace") or ""),
        name=str(ref.get("name") or meta.get("name") or ""),
        written=written if isinstance(written, dict) else None,
    )


class AuditLog:
    """The audit log file, read on from where the last read stopped; a rotated log (another
    file at the path, or a shorter one) is read from its start. Keeps the quota writes that
    completed since the `since` last asked for."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._file: tuple[int, int] | None = None  # (device, inode) being read
        self._offset = 0
        self._writes: list[AuditWrite] = []
        self._unreadable = False

    def writes(self, since: datetime) -> list[AuditWrite] | None:
        """The quota writes completed at or after `since`; None while the file cannot be read
        (warned of once, until it can be again)."""
        lines = []
        try:
            with self._path.open("rb") as file:
                stat = os.fstat(file.fileno())
                if (stat.st_dev, stat.st_ino) != self._file or stat.st_size < self._offset:
                    self._file, self._offset, self._writes = (stat.st_dev, stat.st_ino), 0, []
                file.seek(self._offset)
                for line in file:
                    if not line.endswith(b"\n"):
                        break  # still being written: read whole next time
                    self._offset += len(line)
                    if any(word in line for word in _QUOTA_WORDS):
                        lines.append(line)
        except OSError as exc:
            if not self._unreadable:
                _log.warning(
                    "audit log unreadable: quota changes name their field managers",
                    path=str(self._path),
                    error=exc.strerror or str(exc),
                )
            self._unreadable = True
            return None
        self._unreadable = False
        self._writes = [w for w in (*self._writes, *audit_writes(lines)) if w.at >= since]
        return self._writes
