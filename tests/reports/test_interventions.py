"""Manual interventions seen in the platform's own state: an operator's drain and resume, a
cordon, a taint, a job cancelled by someone else; never the platform's own doing."""

from __future__ import annotations

from observer.domain import Outcome
from observer.records import StoredIntervention, StoredNodeChange
from observer.reports.compute.interventions import audit, detect
from tests.reports.builders import at, node, run


def _actions(changes: list[StoredNodeChange], start_state: str = "idle", reason: str | None = None):
    found = detect([node("n1", "a", 8, 0, start_state, reason)], changes, [])
    return [(i.detail["action"], i.reason) for i in found]


def test_an_operators_drain_and_resume_on_slurm():
    changes = [
        StoredNodeChange(at(10), node("n1", "a", 8, 2, "draining", "replace NIC")),
        StoredNodeChange(at(10, 5), node("n1", "a", 8, 0, "drained", "replace NIC")),
        StoredNodeChange(at(12), node("n1", "a", 8, 0, "idle")),
    ]
    assert _actions(changes) == [("drain", "replace NIC"), ("resume", "replace NIC")]


def test_slurms_own_drains_are_not_interventions_but_the_resume_is():
    changes = [
        StoredNodeChange(at(10), node("n1", "a", 8, 0, "drained", "Kill task failed")),
        StoredNodeChange(at(11), node("n1", "a", 8, 0, "drained*", "Not responding")),
        StoredNodeChange(at(12), node("n1", "a", 8, 0, "idle")),
    ]
    assert _actions(changes) == [("resume", "Not responding")]


def test_kubernetes_cordon_uncordon_and_operator_taints():
    changes = [
        StoredNodeChange(
            at(9),
            node(
                "n1",
                "a",
                8,
                0,
                "Ready,SchedulingDisabled",
                "cordoned; taint node.kubernetes.io/unschedulable:NoSchedule",
            ),
        ),
        StoredNodeChange(at(10), node("n1", "a", 8, 0, "Ready", "taint gpu-maint=true:NoSchedule")),
        StoredNodeChange(at(11), node("n1", "a", 8, 0, "Ready")),
        StoredNodeChange(
            at(12),
            node("n1", "a", 8, 0, "NotReady", "taint node.kubernetes.io/unreachable:NoExecute"),
        ),
    ]
    assert _actions(changes, "Ready") == [
        ("cordon", "cordoned; taint node.kubernetes.io/unschedulable:NoSchedule"),
        ("uncordon", "cordoned; taint node.kubernetes.io/unschedulable:NoSchedule"),
        ("taints_changed", "gpu-maint=true:NoSchedule"),
        ("taints_changed", "gpu-maint=true:NoSchedule"),
    ]


def test_a_node_appearing_or_leaving_is_no_intervention():
    changes = [
        StoredNodeChange(at(9), node("n2", "a", 8, 0, "drained", "new")),
        StoredNodeChange(at(10), node("n1", "a", 8, 0, "idle"), removed=True),
    ]
    assert detect([node("n1", "a", 8, 0, "idle")], changes, []) == []


def test_probe_jobs_cancelled_by_anyone_but_the_controller():
    runs = [
        run(outcome=Outcome.CANCELLED, reason="ControllerShutdown"),
        run(outcome=Outcome.CANCELLED, reason="Deleted", message="the Job is being deleted"),
        run(outcome=Outcome.TIMED_OUT, reason="DeadlineExceeded"),
    ]
    [found] = detect([], [], runs)
    assert found.detail["action"] == "job_cancelled"
    assert found.subject == {"run_id": runs[1].run_id, "tenant": "research"}
    assert found.detail["message"] == "the Job is being deleted"


def test_a_record_accounts_for_what_it_names_near_it_and_for_the_resume_ending_it():
    changes = [
        StoredNodeChange(at(10), node("n1", "a", 8, 0, "drained", "maint")),
        StoredNodeChange(at(16), node("n1", "a", 8, 0, "idle")),
        StoredNodeChange(at(17), node("n1", "a", 8, 0, "drained", "again")),
    ]
    found = detect([node("n1", "a", 8, 0, "idle")], changes, [])
    records = [
        StoredIntervention(at(9, 30), "alice", "maintenance", {"node": "n1"}),
        StoredIntervention(at(10), "bob", "other node", {"node": "n2"}),
    ]
    assert [r.by if r else None for r in audit(found, records, 3600)] == ["alice", "alice", None]
