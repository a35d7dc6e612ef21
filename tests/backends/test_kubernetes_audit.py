"""The API server's audit log as the Kubernetes backend reads it: each completed, successful
write of a ResourceQuota or a ClusterQueue (not of their status), by the authenticated user,
with the object as written where the policy logs it; the file read on from where the last
read stopped, from its start after a rotation, and an unreadable one warned of once. The
fixture is in the shape of audit.k8s.io/v1 Event (kubernetes staging/src/k8s.io/apiserver/
pkg/apis/audit/v1/types.go) as kube-apiserver's log backend writes it, one JSON line each."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import structlog

from observer.backends.kubernetes.audit import AuditLog, audit_writes
from tests.backends.k8s_harness import RECORDED

FIXTURE = RECORDED / "audit_quota_writes.jsonl"
EARLY = datetime(2026, 12, 2, tzinfo=UTC)


def _event(user: str, name: str, at: str) -> str:
    event = json.loads(FIXTURE.read_bytes().splitlines()[1])
    event["user"]["username"] = user
    event["objectRef"]["name"] = name
    event["requestReceivedTimestamp"] = event["stageTimestamp"] = at
    return json.dumps(event) + "\n"


def test_only_completed_successful_writes_of_quota_objects_are_kept() -> None:
    writes = audit_writes(FIXTURE.read_bytes().splitlines())

    assert [(w.user, w.resource, w.namespace, w.name, w.at) for w in writes] == [
        (
            "alice@example.com",
            "resourcequotas",
            "research",
            "research-quota",
            datetime(2026, 12, 2, 9, 15, 4, 131877, tzinfo=UTC),
        ),
        (
            "bob@example.com",
            "clusterqueues",
            "",
            "team-a",
            datetime(2026, 12, 2, 9, 20, 11, 514822, tzinfo=UTC),
        ),
    ]
    alice, bob = writes
    assert alice.written is not None
    assert alice.written["spec"]["hard"]["requests.nvidia.com/gpu"] == "4"
    assert bob.written is None  # logged at Metadata: no object


def test_a_write_is_the_one_behind_a_time_the_server_stamped_during_it_to_the_second() -> None:
    [alice, _] = audit_writes(FIXTURE.read_bytes().splitlines())

    assert alice.made(datetime(2026, 12, 2, 9, 15, 4, tzinfo=UTC))  # managedFields' time
    assert not alice.made(datetime(2026, 12, 2, 9, 15, 3, tzinfo=UTC))
    assert not alice.made(datetime(2026, 12, 2, 9, 15, 5, tzinfo=UTC))


def test_the_log_is_read_on_from_where_the_last_read_stopped(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text(_event("alice", "q1", "2026-12-02T09:00:00.000001Z"))
    log = AuditLog(path)

    assert [w.name for w in log.writes(EARLY) or []] == ["q1"]
    with path.open("a") as file:
        file.write(_event("bob", "q2", "2026-12-02T09:05:00.000001Z"))
        file.write(_event("carol", "q3", "2026-12-02T09:06:00.000001Z")[:40])  # being written
    assert [w.name for w in log.writes(EARLY) or []] == ["q1", "q2"]
    with path.open("a") as file:
        file.write(_event("carol", "q3", "2026-12-02T09:06:00.000001Z")[40:])
    assert [w.user for w in log.writes(EARLY) or []] == ["alice", "bob", "carol"]
    since = datetime(2026, 12, 2, 9, 5, tzinfo=UTC)
    assert [w.user for w in log.writes(since) or []] == ["bob", "carol"]


def test_a_rotated_log_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text(_event("alice", "q1", "2026-12-02T09:00:00.000001Z") * 3)
    log = AuditLog(path)
    assert len(log.writes(EARLY) or []) == 3

    path.rename(tmp_path / "audit-2026-12-02T09-10-00.000.log")  # lumberjack's rotation
    path.write_text(
        _event("bob", "q2", "2026-12-02T09:10:00.000001Z") * 2
        + _event("carol", "q3", "2026-12-02T09:11:00.000001Z") * 2
    )

    assert [w.user for w in log.writes(EARLY) or []] == ["bob", "bob", "carol", "carol"]
    path.write_text(_event("dave", "q4", "2026-12-02T09:12:00.000001Z"))  # truncated, rewritten
    assert [w.user for w in log.writes(EARLY) or []] == ["dave"]


def test_an_unreadable_log_is_warned_of_once_and_read_again_once_it_can_be(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.log"
    log = AuditLog(path)

    with structlog.testing.capture_logs() as logs:
        assert log.writes(EARLY) is None
        assert log.writes(EARLY) is None
    path.write_text(_event("alice", "q1", "2026-12-02T09:00:00.000001Z"))

    assert [(entry["log_level"], entry["path"]) for entry in logs] == [("warning", str(path))]
    assert [w.user for w in log.writes(EARLY) or []] == ["alice"]
