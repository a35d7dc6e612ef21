"""The controlled experiment: once one of our probes has ended, the GPUs it ran on hold no
process of its job and no memory above the driver baseline after the grace period, as the
node's agent sees them, and the finding says which layers agree. A node whose agent has no
fresh snapshot taken after the grace is not judged at all."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from observer.detectors import probe_release
from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    Expectation,
    Finding,
    FindingKind,
    GpuAssignment,
    GpuIdentity,
    GpuReading,
    GpuSample,
    JobPhase,
    JobStatus,
    JsonValue,
    NodeAllocation,
    NodeSnapshot,
    Outcome,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
    ProbeRun,
    RunState,
    SchedulerNode,
    SchedulerSnapshot,
    Severity,
)
from tests.support.times import seconds_after

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
at = seconds_after(T0)
GIB = 2**30
BASELINE = 600 * 2**20
TOLERANCE = 256 * 2**20
GRACE = 90.0
MAX_AGE = 60.0
NODE = "node-001"
JOB = "sim-7"


def process(
    gpu: int,
    pid: int,
    owner: Owner,
    used: int = 20 * GIB,
    command: str | None = "python train.py",
) -> AttributedProcess:
    return AttributedProcess(
        gpu_index=gpu,
        gpu_uuid=f"GPU-{gpu}",
        pid=pid,
        used_memory_bytes=used,
        exists=True,
        command=command,
        owner=owner,
        owner_state=OwnerState(OwnerPhase.UNKNOWN),
        executable="python",
        uid=1000,
        user="alice",
    )


def agent(
    seconds: float,
    processes: Iterable[AttributedProcess] = (),
    *,
    node: str = NODE,
    unlisted_bytes: Mapping[int, int] | None = None,
    findings: Iterable[Finding] = (),
    gpus: int = 4,
    allocation: NodeAllocation | None = None,
) -> NodeSnapshot:
    """One agent snapshot: each GPU at the baseline plus its processes' memory and any memory
    no process is listed for."""
    listed = tuple(processes)
    readings = tuple(
        GpuReading(
            index=i,
            identity=GpuIdentity(i, f"GPU-{i}", "NVIDIA H200", 141 * GIB, None),
            sample=GpuSample(
                at(seconds),
                i,
                memory_used_bytes=BASELINE
                + sum(p.used_memory_bytes or 0 for p in listed if p.gpu_index == i)
                + (unlisted_bytes or {}).get(i, 0),
            ),
            counters=None,
            baseline_memory_bytes=BASELINE,
        )
        for i in range(gpus)
    )
    return NodeSnapshot(
        node,
        at(seconds),
        DriverStatus(DriverState.OK),
        readings,
        listed,
        tuple(findings),
        allocation,
    )


def kubelet(seconds: float, assigned: Mapping[int, Owner] | None = None) -> NodeAllocation:
    """The node allocation layer as the kubelet answered at `seconds`: GPU index -> owner."""
    return NodeAllocation(
        "kubelet",
        True,
        None,
        at(seconds),
        tuple(GpuAssignment(f"GPU-{i}", o, None) for i, o in (assigned or {}).items()),
        frozenset(f"GPU-{i}" for i in range(4)),
    )


def ended_run(ended: float = 0, *, run_id: str = "run-1", node: str = NODE) -> ProbeRun:
    return ProbeRun(
        run_id=run_id,
        probe="short",
        tenant="research",
        queue=None,
        window="always",
        expectation=Expectation.SUCCEED,
        gpus=1,
        nodes=1,
        state=RunState.DONE,
        job_id=JOB,
        submitted_at=at(ended - 70),
        started_at=at(ended - 60),
        finished_at=at(ended),
        outcome=Outcome.PASSED,
        node_names=(node,),
    )


def job(
    job_id: str,
    node: str = NODE,
    *,
    gpus: int = 1,
    ending_since: datetime | None = None,
    owner_ids: tuple[str, ...] | None = None,
) -> JobStatus:
    """A job whose processes the agents name by its id (Slurm, the simulator) unless
    `owner_ids` says otherwise (a Kubernetes Job's pod UIDs)."""
    return JobStatus(
        job_id=job_id,
        run_id=None,
        tenant="prod",
        queue=None,
        phase=JobPhase.RUNNING,
        gpus=gpus,
        nodes=(node,),
        owner_ids=(job_id,) if owner_ids is None else owner_ids,
        ending_since=ending_since,
    )


def scheduler(
    seconds: float, jobs: Sequence[JobStatus] = (), allocated: int = 0
) -> SchedulerSnapshot:
    node = SchedulerNode(NODE, "a", 4, allocated, "mixed" if allocated else "idle")
    return SchedulerSnapshot(at(seconds), (), (node,), tuple(jobs))


def check(
    now: float,
    agents: Iterable[NodeSnapshot],
    sched: SchedulerSnapshot | None = None,
    runs: Sequence[ProbeRun] = (),
    owners: Mapping[str, Sequence[str]] | None = None,
) -> probe_release.Check:
    pending = [(run, node) for run in runs or [ended_run()] for node in run.node_names]
    return probe_release.evaluate(
        pending,
        sched,
        {a.node: a for a in agents},
        at(now),
        owners=owners or {},
        grace_seconds=GRACE,
        snapshot_max_age_seconds=MAX_AGE,
        memory_tolerance_bytes=TOLERANCE,
    )


OURS = Owner(OwnerKind.JOB, JOB)


def test_gpus_back_to_idle_after_the_grace_are_judged_clean():
    result = check(100, [agent(95)], scheduler(95))

    assert result.symptoms == []
    assert result.judged == result.clean == {("run-1", NODE)}


def test_a_process_of_the_ended_job_still_on_its_gpu_is_a_finding_with_its_evidence():
    left = process(2, 4242, OURS, used=20 * GIB, command="python train.py --probe")

    result = check(100, [agent(95, [left])], scheduler(95))

    [symptom] = result.symptoms
    assert symptom.detector == "probe_unreleased"
    assert symptom.subject == {"run_id": "run-1", "node": NODE, "tenant": "research"}
    assert symptom.severity is Severity.CRITICAL
    assert symptom.since == at(0)
    assert result.clean == set()
    evidence = symptom.evidence
    assert {k: evidence[k] for k in ("run_id", "probe", "tenant", "job_id", "node")} == {
        "run_id": "run-1",
        "probe": "short",
        "tenant": "research",
        "job_id": JOB,
        "node": NODE,
    }
    assert (evidence["ended_at"], evidence["grace_seconds"]) == (at(0).isoformat(), GRACE)
    assert evidence["matched_by"] == probe_release.BY_JOB_ID
    [gpu] = evidence["gpus"]
    assert (gpu["index"], gpu["uuid"], gpu["memory_above_baseline_bytes"]) == (2, "GPU-2", 20 * GIB)
    assert gpu["processes"] == [
        {
            "pid": 4242,
            "executable": "python",
            "uid": 1000,
            "user": "alice",
            "command": "python train.py --probe",
            "owner": f"job/{JOB}",
            "used_memory_bytes": 20 * GIB,
        }
    ]
    # The scheduler let the job go; NVML still shows it; no allocation layer was read.
    assert evidence["layers"] == {
        "scheduler": "released",
        "allocation": "unknown",
        "nvml": "held",
        "agree": ["nvml"],
        "disagree": ["scheduler"],
    }


def test_the_allocation_layer_says_whether_the_kubelet_still_gives_the_ended_job_its_gpu():
    def allocation_word(allocation: NodeAllocation) -> JsonValue:
        snapshot = agent(95, [process(2, 20, OURS)], allocation=allocation)
        [symptom] = check(100, [snapshot]).symptoms
        layers = symptom.evidence["layers"]
        assert isinstance(layers, dict)
        return layers["allocation"]

    assert allocation_word(kubelet(95, {2: OURS})) == "held"
    assert allocation_word(kubelet(95, {2: Owner(OwnerKind.SLURM_JOB, "other")})) == "released"
    assert allocation_word(kubelet(95)) == "released"
    # A pod the kubelet lists whose UID the node cannot tell could be the job's.
    assert allocation_word(kubelet(95, {2: Owner(OwnerKind.SLURM_JOB)})) == "unknown"
    down = NodeAllocation("kubelet", False, "socket missing", None)
    assert allocation_word(down) == "unknown"


def test_a_job_the_scheduler_still_shows_ending_makes_both_layers_agree():
    stuck = job(JOB, ending_since=at(0))

    [symptom] = check(100, [agent(95, [process(0, 1, OURS)])], scheduler(95, [stuck], 1)).symptoms

    assert symptom.evidence["layers"]["agree"] == ["scheduler", "nvml"]
    assert symptom.evidence["scheduler"]["job_ending_since"] == at(0).isoformat()
    assert symptom.evidence["scheduler"]["node_gpus_allocated"] == 1


def test_nothing_is_judged_on_a_snapshot_taken_within_the_grace():
    # The agent last looked 80 s after the end: the job's processes may still be exiting.
    result = check(100, [agent(80, [process(0, 1, OURS)])], scheduler(95))

    assert (result.symptoms, result.judged) == ([], frozenset())


def test_a_missing_or_stale_agent_snapshot_neither_opens_nor_closes():
    stale = agent(95, [process(0, 1, OURS)])

    for agents in ([], [stale]):
        result = check(95 + MAX_AGE + 1, agents, scheduler(150))
        assert (result.symptoms, result.judged) == ([], frozenset())
        assert not probe_release.covers(
            result, "probe_unreleased", {"run_id": "run-1", "node": NODE, "tenant": "research"}
        )


def test_memory_nobody_owns_is_the_probes_only_while_the_scheduler_shows_no_job_there():
    unowned = process(1, 77, Owner(OwnerKind.NONE), used=8 * GIB, command=None)
    hidden = {3: 4 * GIB}  # held with no process listed at all

    [symptom] = check(100, [agent(95, [unowned], unlisted_bytes=hidden)], scheduler(95)).symptoms
    assert symptom.evidence["matched_by"] == probe_release.BY_ELIMINATION
    assert [g["index"] for g in symptom.evidence["gpus"]] == [1, 3]

    # Another job on the node could be holding it: not blamed on the probe.
    busy = scheduler(95, [job("sim-9")], allocated=1)
    result = check(100, [agent(95, [unowned], unlisted_bytes=hidden)], busy)
    assert result.symptoms == [] and result.clean == {("run-1", NODE)}

    # No scheduler snapshot since the end: nothing rules the other jobs out.
    assert check(100, [agent(95, [unowned])], scheduler(-5)).symptoms == []


def test_memory_within_the_tolerance_and_other_named_owners_are_not_the_probes():
    other = process(0, 5, Owner(OwnerKind.SLURM_JOB, "sim-9"))
    near_baseline = {1: TOLERANCE}

    result = check(100, [agent(95, [other], unlisted_bytes=near_baseline)], scheduler(95))

    assert result.symptoms == [] and result.clean == {("run-1", NODE)}


def test_on_kubernetes_the_processes_of_the_jobs_pods_are_the_probes():
    pod_uid = "0b6c9a1e-5f0e-4a57-9a3b-2f4c1d9e8a77"
    run = replace(ended_run(), job_id="research/observer-short-1")
    owners = {"research/observer-short-1": [pod_uid]}  # its pods, as the scheduler listed them
    its_pod = process(2, 4242, Owner(OwnerKind.POD, pod_uid))
    another_pod = process(2, 4242, Owner(OwnerKind.POD, "5d3e0f7a-1c2b-4e8d-9f60-7a1b2c3d4e5f"))

    [symptom] = check(100, [agent(95, [its_pod])], scheduler(95), [run], owners).symptoms
    assert symptom.evidence["matched_by"] == probe_release.BY_JOB_ID
    assert symptom.evidence["owner_ids"] == [pod_uid]
    assert [g["index"] for g in symptom.evidence["gpus"]] == [2]

    clean = check(100, [agent(95, [another_pod])], scheduler(95), [run], owners)
    assert clean.symptoms == [] and clean.clean == {("run-1", NODE)}


def test_each_node_of_a_multi_node_run_is_judged_on_its_own_agent():
    run = replace(ended_run(), nodes=2, node_names=(NODE, "node-002"))

    result = check(100, [agent(95, [process(0, 1, OURS)])], scheduler(95), runs=[run])

    [symptom] = result.symptoms
    assert symptom.subject["node"] == NODE
    assert result.judged == {("run-1", NODE)}  # node-002's agent is silent: not judged


def test_an_open_node_finding_on_the_gpu_is_named_in_the_evidence():
    leak = Finding(
        detector="unreleased_memory",
        kind=FindingKind.CONDITION,
        subject={"node": NODE, "gpu_uuid": "GPU-0", "pid": "1"},
        severity=Severity.CRITICAL,
        summary="pid 1 holds 20 GiB after its owner ended",
        opened_at=at(60),
        closed_at=None,
    )
    elsewhere = replace(leak, subject={"node": NODE, "gpu_uuid": "GPU-3"})

    snapshot = agent(95, [process(0, 1, OURS)], findings=[leak, elsewhere])
    [symptom] = check(100, [snapshot], scheduler(95)).symptoms

    assert symptom.evidence["node_findings"] == [
        {"detector": "unreleased_memory", "node": NODE, "gpu_uuid": "GPU-0", "pid": "1"}
    ]
