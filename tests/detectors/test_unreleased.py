"""Unreleased resources as the scheduler counts them: a job the platform is ending that keeps
its GPUs is stuck_terminating (and only that: its GPUs are not also allocated_without_job),
GPUs allocated with no job at all are allocated_without_job, and each finding says what the
two node layers see - the node's allocation (the kubelet's or slurmd's assignments) and NVML
(the agent's processes and memory): held, released, or unknown when there is no fresh
snapshot, no allocation read, or owners the node cannot tell."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from observer.detectors import unreleased
from observer.domain import (
    JobPhase,
    JobStatus,
    JsonValue,
    NodeAllocation,
    NodeSnapshot,
    Owner,
    OwnerKind,
    SchedulerNode,
    SchedulerSnapshot,
    Symptom,
)
from tests.detectors.test_probe_release import GIB, NODE, agent, at, job, kubelet, process

GRACE = 60.0
STUCK_GRACE = 120.0
MAX_AGE = 60.0


def evaluate(
    now: float,
    jobs: Iterable[JobStatus] = (),
    allocated: int = 0,
    agents: Iterable[NodeSnapshot] = (),
) -> list[Symptom]:
    node = SchedulerNode(NODE, "a", 4, allocated, "mixed", None)
    return unreleased.evaluate(
        SchedulerSnapshot(at(now), (), (node,), tuple(jobs)),
        {a.node: a for a in agents},
        at(now),
        grace_seconds=GRACE,
        stuck_grace_seconds=STUCK_GRACE,
        snapshot_max_age_seconds=MAX_AGE,
        memory_tolerance_bytes=256 * 2**20,
    )


def test_a_job_ending_but_holding_its_gpus_is_stuck_terminating_not_allocated_without_job():
    stuck = job("slurm-41", gpus=3, ending_since=at(0))

    [symptom] = evaluate(300, [stuck], allocated=3)

    assert symptom.detector == "stuck_terminating"
    assert symptom.subject == {"job_id": "slurm-41", "tenant": "prod", "node": NODE}
    # The hold runs from the platform's own start of the end, not from first sight.
    assert (symptom.since, symptom.hold_seconds) == (at(0), STUCK_GRACE)
    assert symptom.evidence["ending_since"] == at(0).isoformat()
    assert (symptom.evidence["gpus"], symptom.evidence["nodes"]) == (3, [NODE])
    assert symptom.evidence["layers"]["scheduler"] == "held"


def test_gpus_beyond_a_stuck_job_are_still_allocated_without_job():
    stuck = job("slurm-41", gpus=1, ending_since=at(0))

    detectors = sorted(s.detector for s in evaluate(300, [stuck], allocated=3))

    assert detectors == ["allocated_without_job", "stuck_terminating"]


def test_the_nvml_layer_of_a_stuck_job_is_what_its_agent_shows_of_that_job():
    stuck = job("slurm-41", ending_since=at(0))
    theirs = process(0, 9, Owner(OwnerKind.SLURM_JOB, "slurm-41"))
    someone_else = process(0, 9, Owner(OwnerKind.SLURM_JOB, "slurm-99"))
    unnamed = process(0, 9, Owner(OwnerKind.NONE))

    def nvml_layer(agents: Iterable[NodeSnapshot]) -> str:
        [symptom] = evaluate(300, [stuck], allocated=1, agents=agents)
        return str(symptom.evidence["layers"]["nvml"])

    assert nvml_layer([agent(290, [theirs])]) == "held"
    assert nvml_layer([agent(290, [someone_else])]) == "released"
    assert nvml_layer([agent(290, [unnamed])]) == "unknown"  # it could be the job's
    assert nvml_layer([agent(300 - MAX_AGE - 1, [theirs])]) == "unknown"  # stale
    assert nvml_layer([]) == "unknown"


def test_on_kubernetes_the_nvml_layer_matches_the_agents_pod_uids_to_the_jobs_pods():
    pod_uid = "0b6c9a1e-5f0e-4a57-9a3b-2f4c1d9e8a77"
    stuck = job("research/train-1", ending_since=at(0), owner_ids=(pod_uid,))
    its_pod = process(0, 9, Owner(OwnerKind.POD, pod_uid))
    another_pod = process(0, 9, Owner(OwnerKind.POD, "5d3e0f7a-1c2b-4e8d-9f60-7a1b2c3d4e5f"))

    def nvml_layer(job: JobStatus, agents: Iterable[NodeSnapshot]) -> str:
        [symptom] = evaluate(300, [job], allocated=1, agents=agents)
        return str(symptom.evidence["layers"]["nvml"])

    assert nvml_layer(stuck, [agent(290, [its_pod])]) == "held"
    assert nvml_layer(stuck, [agent(290, [another_pod])]) == "released"
    # A job whose pods the platform did not list cannot be told released.
    assert nvml_layer(replace(stuck, owner_ids=()), [agent(290, [another_pod])]) == "unknown"


def test_a_stuck_pod_the_kubelet_still_gives_its_gpus_is_held_at_the_allocation_layer():
    pod_uid = "0b6c9a1e-5f0e-4a57-9a3b-2f4c1d9e8a77"
    stuck = job("research/train-1", gpus=1, ending_since=at(0), owner_ids=(pod_uid,))
    its_pod = Owner(OwnerKind.POD, pod_uid)

    def three_layers(allocation: NodeAllocation | None) -> JsonValue:
        [symptom] = evaluate(300, [stuck], allocated=1, agents=[agent(290, allocation=allocation)])
        return symptom.evidence["layers"]

    # The kubelet still assigns the GPU, though no process of the pod is left on it.
    assert three_layers(kubelet(290, {1: its_pod})) == {
        "scheduler": "held",
        "allocation": "held",
        "nvml": "released",
        "agree": ["scheduler", "allocation"],
        "disagree": ["nvml"],
    }
    assert three_layers(kubelet(290)) == {
        "scheduler": "held",
        "allocation": "released",
        "nvml": "released",
        "agree": ["scheduler"],
        "disagree": ["allocation", "nvml"],
    }
    assert three_layers(None)["allocation"] == "unknown"


def test_allocated_without_job_says_whether_the_agent_sees_gpus_in_use_beyond_the_jobs():
    running = job("slurm-7", gpus=1)

    def node_layers(agents: Iterable[NodeSnapshot]) -> dict[str, JsonValue]:
        [symptom] = evaluate(300, [running], allocated=3, agents=agents)
        assert symptom.detector == "allocated_without_job"
        assert symptom.evidence["excess_gpus"] == 2
        return symptom.evidence["layers"]

    busy = [
        process(0, 1, Owner(OwnerKind.SLURM_JOB, "slurm-7")),
        process(2, 2, Owner(OwnerKind.NONE)),
    ]
    assert node_layers([agent(290, busy)]) == {
        "scheduler": "held",
        "allocation": "unknown",
        "nvml": "held",
        "agree": ["scheduler", "nvml"],
        "disagree": [],
    }
    only_the_job = [agent(290, busy[:1])]
    assert node_layers(only_the_job)["disagree"] == ["nvml"]
    memory_no_process = [agent(290, busy[:1], unlisted_bytes={3: 2 * GIB})]
    assert node_layers(memory_no_process)["nvml"] == "held"
    assert node_layers([agent(100, busy)])["nvml"] == "unknown"


def test_allocated_without_job_says_whether_the_node_allocation_layer_assigns_the_excess():
    running = job("slurm-7", gpus=1)
    theirs = Owner(OwnerKind.SLURM_JOB, "slurm-7")

    def allocation_layer(allocation: NodeAllocation) -> JsonValue:
        snapshot = agent(290, allocation=allocation)
        [symptom] = evaluate(300, [running], allocated=3, agents=[snapshot])
        return symptom.evidence["layers"]["allocation"]

    # slurmd gives the job one GPU and nobody the other two: the leak is the scheduler's count.
    assert allocation_layer(kubelet(290, {0: theirs})) == "released"
    # Two more GPUs assigned to a job the scheduler no longer shows: the node holds them too.
    gone = Owner(OwnerKind.SLURM_JOB, "slurm-3")
    assert allocation_layer(kubelet(290, {0: theirs, 1: gone, 2: gone})) == "held"
    assert allocation_layer(NodeAllocation("slurm", False, "scontrol timed out", None)) == "unknown"


def test_a_pending_job_already_bound_to_the_node_explains_its_gpus():
    # A pod stuck pulling its image holds the GPUs it was bound to.
    pulling = replace(job("research/observer-bad-image-1", gpus=2), phase=JobPhase.PENDING)

    assert evaluate(300, [pulling], allocated=2) == []


def test_a_node_drained_because_a_kill_failed_is_its_own_finding():
    node = SchedulerNode(NODE, "a", 4, 0, "drained", "Kill task failed")
    snapshot = SchedulerSnapshot(at(0), (), (node,), ())

    [symptom] = unreleased.evaluate(
        snapshot,
        {},
        at(0),
        grace_seconds=GRACE,
        stuck_grace_seconds=STUCK_GRACE,
        snapshot_max_age_seconds=MAX_AGE,
        memory_tolerance_bytes=0,
    )

    assert (symptom.detector, symptom.subject) == ("kill_task_failed", {"node": NODE})
    assert symptom.evidence["layers"]["nvml"] == "unknown"
