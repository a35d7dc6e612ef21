"""The simulated cluster: what the demo and the detectors rely on beyond the scheduler contract.

Time moves only with a ManualClock. Tenants `research` (weight 0.7) and `prod` (weight 0.3)
share the cluster unless a test says otherwise."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from observer.backends.simulated import (
    BAD_COMMAND_AFTER_SECONDS,
    FINISHED_RETENTION,
    OOM_AFTER_SECONDS,
    NodeSpec,
    Policy,
    SimulatedCluster,
    TenantSpec,
)
from observer.clock import ManualClock
from observer.domain import Behaviour, JobPhase, JobRequest, JobStatus, SchedulerNode, Workload
from observer.errors import BackendError, GpuCommunicationError, ProbeError
from tests.support.times import seconds_after

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
at = seconds_after(T0)
RESEARCH = "research"
PROD = "prod"
TENANTS = (TenantSpec(RESEARCH, 0.7), TenantSpec(PROD, 0.3))

MakeCluster = Callable[..., SimulatedCluster]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def make_cluster(clock: ManualClock) -> MakeCluster:
    def make(
        nodes: tuple[int, ...] = (4,),
        tenants: tuple[TenantSpec, ...] = TENANTS,
        policy: Policy = Policy.FAIR_SHARE,
    ) -> SimulatedCluster:
        specs = [NodeSpec(f"n{i}", gpus, "pool-a") for i, gpus in enumerate(nodes, start=1)]
        return SimulatedCluster(specs, tenants, clock, policy)

    return make


def workload(
    gpus: int = 1,
    seconds: float = 60.0,
    behaviour: Behaviour = Behaviour.SLEEP,
    exit_code: int = 0,
    log_lines: int = 0,
    log_interval_seconds: float = 0.0,
) -> Workload:
    return Workload(
        gpus_per_node=gpus,
        duration_seconds=seconds,
        behaviour=behaviour,
        exit_code=exit_code,
        log_lines=log_lines,
        log_interval_seconds=log_interval_seconds,
    )


def submit(cluster: SimulatedCluster, tenant: str, work: Workload) -> str:
    return cluster.submit(
        JobRequest(run_id=uuid.uuid4().hex, probe="spec", tenant=tenant, queue="gpu", workload=work)
    )


def status(cluster: SimulatedCluster, job_id: str) -> JobStatus:
    return cluster.jobs([job_id])[job_id]


def node(cluster: SimulatedCluster, name: str) -> SchedulerNode:
    return next(n for n in cluster.snapshot().nodes if n.name == name)


def running_gpus(cluster: SimulatedCluster) -> dict[str, int]:
    return {q.tenant: q.running_gpus for q in cluster.snapshot().queues}


def started(cluster: SimulatedCluster, job_ids: list[str]) -> list[str]:
    statuses = cluster.jobs(job_ids)
    return [i for i in job_ids if statuses[i].started_at is not None]


# --- fair share -------------------------------------------------------------------------


def test_a_freed_gpu_goes_to_the_tenant_with_the_least_running_gpus_per_unit_of_weight(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(10,))
    short = submit(cluster, PROD, workload(seconds=10))
    for _ in range(5):
        submit(cluster, PROD, workload(seconds=3600))
    for _ in range(4):
        submit(cluster, RESEARCH, workload(seconds=3600))
    assert running_gpus(cluster) == {RESEARCH: 4, PROD: 6}
    prod_waiting = submit(cluster, PROD, workload())  # submitted first, but prod is over share
    research_waiting = submit(cluster, RESEARCH, workload())

    clock.advance(10)

    assert status(cluster, short).phase is JobPhase.SUCCEEDED
    assert status(cluster, research_waiting).started_at == at(10)
    assert status(cluster, prod_waiting).phase is JobPhase.PENDING


def test_gpus_freed_at_the_same_moment_are_shared_out_one_at_a_time_by_running_per_weight(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    # research 6 running (8.6 per weight), prod 2 (6.7): the first freed GPU goes to prod
    # (then 10.0 per weight), the second to research (8.6): 7:3, the entitlement.
    cluster = make_cluster(nodes=(10,))
    for _ in range(2):
        submit(cluster, RESEARCH, workload(seconds=10))
    for _ in range(6):
        submit(cluster, RESEARCH, workload(seconds=3600))
    for _ in range(2):
        submit(cluster, PROD, workload(seconds=3600))
    prod_waiting = [submit(cluster, PROD, workload(seconds=3600)) for _ in range(2)]
    research_waiting = [submit(cluster, RESEARCH, workload(seconds=3600)) for _ in range(2)]

    clock.advance(10)

    assert running_gpus(cluster) == {RESEARCH: 7, PROD: 3}
    assert len(started(cluster, prod_waiting)) == 1
    assert len(started(cluster, research_waiting)) == 1


def run_with_continuous_demand(
    cluster: SimulatedCluster,
    clock: ManualClock,
    hours: float,
    backlog: int = 12,
    step_seconds: float = 10.0,
    job_seconds: float = 60.0,
) -> dict[str, float]:
    """Both tenants keep `backlog` identical 1-GPU jobs waiting; return the mean running GPUs
    per tenant over the run, sampled every step."""
    totals = {RESEARCH: 0.0, PROD: 0.0}
    steps = int(hours * 3600 / step_seconds)
    for _ in range(steps):
        pending = {q.tenant: q.pending_jobs for q in cluster.snapshot().queues}
        for tenant in (RESEARCH, PROD):
            for _ in range(backlog - pending.get(tenant, 0)):
                submit(cluster, tenant, workload(seconds=job_seconds))
        clock.advance(step_seconds)
        for tenant, gpus in running_gpus(cluster).items():
            totals[tenant] += gpus
    return {tenant: total / steps for tenant, total in totals.items()}


def test_under_equal_continuous_demand_running_shares_approach_the_tenants_weights(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4, 4, 2))

    mean = run_with_continuous_demand(cluster, clock, hours=2)

    share = mean[RESEARCH] / (mean[RESEARCH] + mean[PROD])
    assert share == pytest.approx(0.7, abs=0.05)
    assert mean[RESEARCH] + mean[PROD] == pytest.approx(10, abs=0.5)  # the cluster stays busy


def test_fifo_starts_jobs_in_submission_order_whatever_the_tenants_shares(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(2,), policy=Policy.FIFO)
    submit(cluster, RESEARCH, workload(seconds=3600))
    submit(cluster, RESEARCH, workload(seconds=10))
    queued = [
        submit(cluster, RESEARCH, workload(seconds=10)),
        submit(cluster, RESEARCH, workload(seconds=10)),
        submit(cluster, PROD, workload(seconds=10)),  # fair share would start this one first
    ]

    clock.advance(100)

    starts = [status(cluster, i).started_at for i in queued]
    assert starts == [at(10), at(20), at(30)]


def test_a_favoured_tenant_is_always_served_first_so_the_other_waits_persistently(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,), policy=Policy.FIFO)
    cluster.faults.favoured_tenant = PROD
    research = [submit(cluster, RESEARCH, workload(seconds=60)) for _ in range(4)]
    prod = [submit(cluster, PROD, workload(seconds=60)) for _ in range(40)]
    later_research = submit(cluster, RESEARCH, workload(seconds=60))

    clock.advance(60 * 9)  # the first four research jobs, then nine rounds of prod only

    assert len(started(cluster, research)) == 4
    assert len(started(cluster, prod)) == 36
    waiting = status(cluster, later_research)
    assert waiting.phase is JobPhase.PENDING
    assert waiting.reason == "Priority"  # behind every favoured job, whatever its entitlement
    queue = next(q for q in cluster.snapshot().queues if q.tenant == RESEARCH)
    assert queue.longest_wait_seconds == 540.0
    assert queue.running_jobs == 0


def test_the_favoured_tenant_fault_turns_a_fair_share_cluster_unfair(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(10,))
    cluster.faults.favoured_tenant = PROD

    mean = run_with_continuous_demand(cluster, clock, hours=1)

    assert mean[PROD] > 9
    assert mean[RESEARCH] < 1


def test_clearing_the_favoured_tenant_fault_restores_fair_ordering(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(10,))
    cluster.faults.favoured_tenant = RESEARCH
    short = submit(cluster, RESEARCH, workload(seconds=10))
    for _ in range(9):
        submit(cluster, RESEARCH, workload(seconds=3600))
    research_waiting = submit(cluster, RESEARCH, workload())
    prod_waiting = submit(cluster, PROD, workload())
    cluster.snapshot()  # the fault is in force up to now
    cluster.faults.favoured_tenant = None

    clock.advance(10)

    assert status(cluster, short).phase is JobPhase.SUCCEEDED
    assert status(cluster, prod_waiting).started_at == at(10)
    assert status(cluster, research_waiting).phase is JobPhase.PENDING


# --- pending reasons, backfill and quota -----------------------------------------------------


def test_the_first_job_that_does_not_fit_waits_for_resources_and_those_behind_it_for_priority(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(4,))
    submit(cluster, RESEARCH, workload(gpus=3, seconds=3600))
    first = submit(cluster, RESEARCH, workload(gpus=4))
    behind = submit(cluster, RESEARCH, workload(gpus=2))

    assert status(cluster, first).reason == "Resources"
    assert status(cluster, behind).reason == "Priority"
    queue = next(q for q in cluster.snapshot().queues if q.tenant == RESEARCH)
    assert queue.pending_reasons == {"Resources": 1, "Priority": 1}
    assert queue.pending_jobs == 2
    assert queue.pending_gpus == 6


def test_a_small_job_backfills_while_a_big_one_waits(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(nodes=(4,))
    submit(cluster, RESEARCH, workload(gpus=3, seconds=3600))
    big = submit(cluster, RESEARCH, workload(gpus=4))
    small = submit(cluster, RESEARCH, workload(gpus=1))

    assert status(cluster, small).phase is JobPhase.RUNNING
    assert status(cluster, small).started_at == T0
    assert status(cluster, big).phase is JobPhase.PENDING
    assert status(cluster, big).reason == "Resources"


def test_a_tenant_beyond_its_quota_waits_with_quota_exceeded_and_a_message_naming_the_quota(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(8,), tenants=(TenantSpec("capped", quota_gpus=3),))
    first = submit(cluster, "capped", workload(gpus=2, seconds=30))
    over = submit(cluster, "capped", workload(gpus=2))

    waiting = status(cluster, over)
    assert waiting.phase is JobPhase.PENDING
    assert waiting.reason == "QuotaExceeded"
    assert waiting.message is not None
    assert "capped" in waiting.message
    assert re.search(r"\b3\b", waiting.message)
    assert node(cluster, "n1").gpus_allocated == 2  # free GPUs, yet it waits

    clock.advance(30)

    assert status(cluster, first).phase is JobPhase.SUCCEEDED
    assert status(cluster, over).started_at == at(30)


def test_gpus_held_by_a_job_stuck_pulling_its_image_count_against_the_tenants_quota(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(8,), tenants=(TenantSpec("capped", quota_gpus=2),))
    submit(cluster, "capped", workload(gpus=2, behaviour=Behaviour.BAD_IMAGE))
    over = submit(cluster, "capped", workload(gpus=1))

    assert node(cluster, "n1").gpus_allocated == 2
    assert status(cluster, over).reason == "QuotaExceeded"


def test_a_job_asking_more_than_the_tenants_whole_quota_is_refused_at_submit(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(8,), tenants=(TenantSpec("capped", quota_gpus=3),))

    with pytest.raises(ProbeError, match="quota"):
        submit(cluster, "capped", workload(gpus=4))

    assert cluster.snapshot().jobs == ()


def test_a_quota_changed_by_an_admin_applies_at_once_and_is_recorded_with_who_changed_it(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(8,), tenants=(TenantSpec("capped", quota_gpus=4),))
    clock.advance(10)
    cluster.change_quota("capped", 1, actor="ops-carol")
    clock.advance(10)
    cluster.change_quota("capped", None, actor="ops-dan")
    clock.advance(10)

    [lowered, lifted] = cluster.quota_changes(T0, clock.now())
    assert (lowered.at, lowered.actor, dict(lowered.subject)) == (
        at(10),
        "ops-carol",
        {"tenant": "capped"},
    )
    assert (lifted.at, lifted.actor) == (at(20), "ops-dan")
    assert cluster.quota_changes(T0, at(10)) == []
    assert status(cluster, submit(cluster, "capped", workload(gpus=8))).started_at == at(30)
    cluster.change_quota("capped", 2, actor="ops-carol")
    with pytest.raises(ProbeError, match="quota"):
        submit(cluster, "capped", workload(gpus=3))


def test_a_job_for_an_unknown_tenant_is_refused_at_submit(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()

    with pytest.raises(ProbeError, match="nobody"):
        submit(cluster, "nobody", workload())

    assert cluster.snapshot().jobs == ()


def test_a_background_job_for_an_unknown_tenant_is_refused_and_the_cluster_keeps_working(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()

    with pytest.raises(ProbeError, match="nobody"):
        cluster.submit_background("nobody", workload())

    job_id = submit(cluster, RESEARCH, workload())
    assert status(cluster, job_id).phase is JobPhase.RUNNING


# --- behaviours -------------------------------------------------------------------------


def test_an_oom_probe_fails_with_exit_137_and_reason_oomkilled(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    job_id = submit(cluster, RESEARCH, workload(seconds=60, behaviour=Behaviour.OOM))

    clock.advance(60)

    done = status(cluster, job_id)
    assert done.phase is JobPhase.FAILED
    assert done.exit_code == 137
    assert done.reason == "OOMKilled"
    assert done.finished_at == at(OOM_AFTER_SECONDS)


def test_a_gpu_comm_probe_fails_with_its_own_status_only_on_a_node_with_a_degraded_link(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4, 4))
    cluster.faults.comm_degraded["n2"] = "1-3"
    comm = workload(gpus=4, seconds=60, behaviour=Behaviour.GPU_COMM)
    first, second = submit(cluster, RESEARCH, comm), submit(cluster, RESEARCH, comm)

    clock.advance(60)

    ended = {tuple(status(cluster, j).nodes): status(cluster, j) for j in (first, second)}
    assert ended[("n1",)].phase is JobPhase.SUCCEEDED
    degraded = ended[("n2",)]
    assert degraded.phase is JobPhase.FAILED
    assert degraded.exit_code == GpuCommunicationError.exit_code
    assert degraded.message is not None and "GPU 1 -> GPU 3" in degraded.message


def test_a_bad_command_fails_with_exit_127_and_reason_start_error(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    job_id = submit(cluster, RESEARCH, workload(seconds=60, behaviour=Behaviour.BAD_COMMAND))

    clock.advance(60)

    done = status(cluster, job_id)
    assert done.phase is JobPhase.FAILED
    assert done.exit_code == 127
    assert done.reason == "StartError"
    assert done.message
    assert done.finished_at == at(BAD_COMMAND_AFTER_SECONDS)


def test_a_bad_image_stays_pending_in_image_pull_back_off_while_holding_its_gpus(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,))
    job_id = submit(cluster, RESEARCH, workload(gpus=3, seconds=10, behaviour=Behaviour.BAD_IMAGE))

    clock.advance(3600)

    stuck = status(cluster, job_id)
    assert stuck.phase is JobPhase.PENDING
    assert stuck.reason == "ImagePullBackOff"
    assert stuck.message
    assert stuck.started_at is None
    assert stuck.nodes == ("n1",)
    assert node(cluster, "n1").gpus_allocated == 3
    blocked = submit(cluster, PROD, workload(gpus=2))
    assert status(cluster, blocked).reason == "Resources"


def test_cancelling_a_job_stuck_pulling_its_image_frees_its_gpus(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,))
    job_id = submit(cluster, RESEARCH, workload(gpus=3, behaviour=Behaviour.BAD_IMAGE))
    blocked = submit(cluster, PROD, workload(gpus=2))
    clock.advance(5)

    cluster.cancel(job_id)

    assert status(cluster, job_id).phase is JobPhase.CANCELLED
    assert status(cluster, blocked).started_at == at(5)
    assert node(cluster, "n1").gpus_allocated == 2


def test_a_job_failed_under_it_ends_failed_now_in_its_words_and_frees_its_gpus(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,))
    job_id = submit(cluster, RESEARCH, workload(gpus=3, seconds=600))
    blocked = submit(cluster, PROD, workload(gpus=2))
    clock.advance(30)

    cluster.fail_job(job_id, "Error", "CUDA error: unspecified launch failure", 1)

    failed = status(cluster, job_id)
    assert failed.phase is JobPhase.FAILED
    assert (failed.reason, failed.message, failed.exit_code) == (
        "Error",
        "CUDA error: unspecified launch failure",
        1,
    )
    assert failed.finished_at == at(30)
    assert status(cluster, blocked).started_at == at(30)
    assert node(cluster, "n1").state == "mixed"  # the node stays in service


def test_a_job_fails_under_it_while_the_api_is_down_and_shows_so_once_it_answers(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    job_id = submit(cluster, RESEARCH, workload(seconds=600))
    clock.advance(20)
    cluster.faults.reachable = False

    cluster.fail_job(job_id, "Error", "CUDA error: unspecified launch failure", 1)

    cluster.faults.reachable = True
    assert (status(cluster, job_id).phase, status(cluster, job_id).finished_at) == (
        JobPhase.FAILED,
        at(20),
    )


def test_failing_a_job_that_already_ended_changes_nothing(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    job_id = submit(cluster, RESEARCH, workload(seconds=10))
    clock.advance(20)

    cluster.fail_job(job_id, "Error", "too late", 1)

    done = status(cluster, job_id)
    assert (done.phase, done.exit_code, done.finished_at) == (JobPhase.SUCCEEDED, 0, at(10))


def test_a_multi_node_job_takes_gpus_per_node_on_distinct_nodes_and_lists_them(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(4, 4, 4))
    job_id = submit(cluster, RESEARCH, Workload(gpus_per_node=2, nodes=2))

    job = status(cluster, job_id)
    assert job.phase is JobPhase.RUNNING
    assert job.gpus == 4
    assert len(job.nodes) == 2
    assert len(set(job.nodes)) == 2
    allocated = {n.name: n.gpus_allocated for n in cluster.snapshot().nodes}
    assert {name: allocated[name] for name in job.nodes} == dict.fromkeys(job.nodes, 2)
    assert sum(allocated.values()) == 4


def test_a_multi_node_job_waits_rather_than_pack_onto_one_node(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(nodes=(4, 4))
    submit(cluster, RESEARCH, workload(gpus=3, seconds=3600))  # n1 keeps 1 free, n2 has 4
    job_id = submit(cluster, RESEARCH, Workload(gpus_per_node=2, nodes=2))

    assert status(cluster, job_id).phase is JobPhase.PENDING
    assert status(cluster, job_id).reason == "Resources"


# --- nodes ------------------------------------------------------------------------------


def test_node_states_are_idle_mixed_or_allocated_by_their_allocated_gpus(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(4, 4, 4))
    submit(cluster, RESEARCH, workload(gpus=4, seconds=3600))
    submit(cluster, RESEARCH, workload(gpus=1, seconds=3600))

    states = {n.name: (n.state, n.gpus_allocated, n.reason) for n in cluster.snapshot().nodes}
    assert states == {
        "n1": ("allocated", 4, None),
        "n2": ("mixed", 1, None),
        "n3": ("idle", 0, None),
    }


def test_a_drained_node_takes_no_new_jobs_and_shows_drained_with_its_reason(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(4, 4))
    cluster.drain("n1", "xid 79: fallen off the bus")
    running = submit(cluster, RESEARCH, workload(gpus=4, seconds=3600))
    waiting = submit(cluster, RESEARCH, workload(gpus=1))

    assert status(cluster, running).nodes == ("n2",)
    assert status(cluster, waiting).phase is JobPhase.PENDING
    assert status(cluster, waiting).reason == "Resources"
    drained = node(cluster, "n1")
    assert drained.state == "drained"
    assert drained.reason == "xid 79: fallen off the bus"
    assert drained.gpus_allocated == 0


def test_draining_keeps_running_jobs_but_starts_nothing_new_on_the_node(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,))
    running = submit(cluster, RESEARCH, workload(gpus=2, seconds=3600))
    cluster.drain("n1", "maintenance")
    waiting = submit(cluster, RESEARCH, workload(gpus=1))

    clock.advance(60)

    assert status(cluster, running).phase is JobPhase.RUNNING
    assert status(cluster, waiting).phase is JobPhase.PENDING
    assert node(cluster, "n1").state == "drained"
    assert node(cluster, "n1").gpus_allocated == 2


def test_resuming_a_drained_node_lets_waiting_jobs_start_on_it(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,))
    cluster.drain("n1", "maintenance")
    waiting = submit(cluster, RESEARCH, workload(gpus=4))
    clock.advance(120)

    cluster.resume("n1")

    job = status(cluster, waiting)
    assert job.started_at == at(120)
    assert job.nodes == ("n1",)
    restored = node(cluster, "n1")
    assert (restored.state, restored.reason) == ("allocated", None)


# --- faults -----------------------------------------------------------------------------


def every_call(cluster: SimulatedCluster, job_id: str) -> dict[str, Callable[[], object]]:
    return {
        "submit": lambda: submit(cluster, RESEARCH, workload()),
        "submit_background": lambda: cluster.submit_background(PROD, workload()),
        "jobs": lambda: cluster.jobs([job_id]),
        "cancel": lambda: cluster.cancel(job_id),
        "logs": lambda: cluster.logs(job_id),
        "probe_jobs": cluster.probe_jobs,
        "snapshot": cluster.snapshot,
        "drain": lambda: cluster.drain("n1", "maintenance"),
        "resume": lambda: cluster.resume("n1"),
    }


def test_an_unreachable_cluster_raises_backend_error_on_every_call(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    job_id = submit(cluster, RESEARCH, workload())
    cluster.faults.reachable = False

    answered = []
    for name, call in every_call(cluster, job_id).items():
        try:
            call()
        except BackendError:
            continue
        answered.append(name)

    assert answered == []


def test_a_cluster_reachable_again_answers_with_the_time_that_passed_meanwhile(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    job_id = submit(cluster, RESEARCH, workload(seconds=30))
    cluster.faults.reachable = False
    clock.advance(60)
    with pytest.raises(BackendError):
        cluster.jobs([job_id])

    cluster.faults.reachable = True

    done = status(cluster, job_id)
    assert done.phase is JobPhase.SUCCEEDED
    assert done.finished_at == at(30)
    assert cluster.snapshot().jobs == ()


def test_leaked_gpus_show_as_allocated_with_no_job_and_shrink_what_can_be_scheduled(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(4,))
    cluster.faults.leaked_gpus = {"n1": 3}

    leaked = node(cluster, "n1")
    assert (leaked.gpus_allocated, leaked.state) == (3, "mixed")
    assert cluster.snapshot().jobs == ()
    big = submit(cluster, RESEARCH, workload(gpus=2))
    small = submit(cluster, RESEARCH, workload(gpus=1))
    assert status(cluster, big).reason == "Resources"
    assert status(cluster, small).phase is JobPhase.RUNNING
    assert node(cluster, "n1").state == "allocated"


def test_a_stuck_job_keeps_holding_its_gpus_after_it_ends(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,))
    job_id = submit(cluster, RESEARCH, workload(gpus=3, seconds=30))
    cluster.faults.stuck_jobs.add(job_id)
    waiting = submit(cluster, PROD, workload(gpus=2))

    clock.advance(3600)

    done = status(cluster, job_id)
    assert done.phase is JobPhase.SUCCEEDED
    assert done.finished_at == at(30)
    assert done.ending_since == at(30)
    snap = cluster.snapshot()
    [ending] = [j for j in snap.jobs if j.job_id == job_id]  # ended, still holding
    assert (ending.phase, ending.ending_since) == (JobPhase.SUCCEEDED, at(30))
    assert node(cluster, "n1").gpus_allocated == 3
    assert status(cluster, waiting).phase is JobPhase.PENDING


def test_a_stuck_job_is_not_forgotten_while_it_holds_gpus(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4,))
    job_id = submit(cluster, RESEARCH, workload(gpus=3, seconds=30))
    cluster.faults.stuck_jobs.add(job_id)

    clock.advance(30 + FINISHED_RETENTION.total_seconds() + 60)

    assert job_id in cluster.jobs([job_id])


def test_releasing_a_stuck_job_frees_its_gpus(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    # The operator's force-delete of a pod stuck Terminating: the condition must be able to close.
    cluster = make_cluster(nodes=(4,))
    job_id = submit(cluster, RESEARCH, workload(gpus=3, seconds=30))
    cluster.faults.stuck_jobs.add(job_id)
    waiting = submit(cluster, PROD, workload(gpus=2))
    clock.advance(600)
    assert node(cluster, "n1").gpus_allocated == 3

    cluster.faults.stuck_jobs.discard(job_id)
    clock.advance(1)

    assert status(cluster, job_id).ending_since is None
    assert job_id not in {j.job_id for j in cluster.snapshot().jobs}
    assert node(cluster, "n1").gpus_allocated == 2
    assert status(cluster, waiting).started_at == at(601)


def canary_seqs(cluster: SimulatedCluster, job_id: str) -> list[int]:
    return [
        int(line.split("seq=")[1].split()[0])
        for line in cluster.logs(job_id).splitlines()
        if "observer-canary" in line
    ]


def test_log_loss_drops_exactly_the_canary_lines_written_in_its_interval(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    clock.advance(100)
    job_id = submit(
        cluster,
        RESEARCH,
        workload(
            seconds=120, behaviour=Behaviour.LOG_CANARY, log_lines=60, log_interval_seconds=1.0
        ),
    )
    # lines are written at 100 s + seq; [110 s, 120 s) covers seq 10..19, and 120 s is kept
    cluster.faults.log_loss.append((at(110), at(120)))

    clock.advance(120)

    seqs = canary_seqs(cluster, job_id)
    assert len(seqs) == 50
    assert seqs == [*range(10), *range(20, 60)]
    timestamps = [
        float(line.split("ts=")[1]) for line in cluster.logs(job_id).splitlines() if "ts=" in line
    ]
    assert not any(at(110).timestamp() <= ts < at(120).timestamp() for ts in timestamps)


def test_log_loss_outside_a_canarys_lifetime_drops_nothing(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    cluster.faults.log_loss.extend([(at(-60), at(0)), (at(30), at(90))])
    job_id = submit(
        cluster,
        RESEARCH,
        workload(seconds=25, behaviour=Behaviour.LOG_CANARY, log_lines=20, log_interval_seconds=1),
    )

    clock.advance(60)

    assert canary_seqs(cluster, job_id) == list(range(20))


# --- time -------------------------------------------------------------------------------


def test_jobs_end_exactly_at_start_plus_duration_when_the_clock_jumps_past_several_endings(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(1,))
    first = submit(cluster, RESEARCH, workload(seconds=10))
    second = submit(cluster, PROD, workload(seconds=20))
    third = submit(cluster, RESEARCH, workload(seconds=5, exit_code=3))

    clock.advance(3000)

    times = {
        job_id: (job.started_at, job.finished_at, job.phase)
        for job_id, job in cluster.jobs([first, second, third]).items()
    }
    assert times == {
        first: (at(0), at(10), JobPhase.SUCCEEDED),
        second: (at(10), at(30), JobPhase.SUCCEEDED),
        third: (at(30), at(35), JobPhase.FAILED),
    }


def test_a_job_queued_behind_another_starts_exactly_when_the_first_ends(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster(nodes=(4, 4))
    blocker = submit(cluster, RESEARCH, Workload(gpus_per_node=4, nodes=2, duration_seconds=7.5))
    queued = submit(cluster, PROD, Workload(gpus_per_node=4, nodes=2, duration_seconds=2.5))

    clock.advance(3600)

    assert status(cluster, blocker).finished_at == at(7.5)
    assert status(cluster, queued).started_at == at(7.5)
    assert status(cluster, queued).finished_at == at(10)


def test_finished_jobs_are_forgotten_after_the_retention(
    make_cluster: MakeCluster, clock: ManualClock
) -> None:
    cluster = make_cluster()
    job_id = submit(cluster, RESEARCH, workload(seconds=10))

    clock.advance(10 + FINISHED_RETENTION.total_seconds())
    assert status(cluster, job_id).phase is JobPhase.SUCCEEDED

    clock.advance(1)
    assert cluster.jobs([job_id]) == {}


def test_background_jobs_have_no_run_id_and_are_not_probe_jobs_but_are_in_the_snapshot(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(nodes=(4,))
    background = cluster.submit_background(PROD, workload(gpus=4, seconds=3600), queue="batch")
    waiting = cluster.submit_background(PROD, workload(gpus=1), queue="batch")
    probe = submit(cluster, RESEARCH, workload(gpus=1))

    assert status(cluster, background).run_id is None
    assert {j.job_id for j in cluster.probe_jobs()} == {probe}
    snap = cluster.snapshot()
    assert {j.job_id for j in snap.jobs} == {background, waiting, probe}
    prod = next(q for q in snap.queues if q.tenant == PROD)
    assert (prod.queue, prod.running_jobs, prod.running_gpus) == ("batch", 1, 4)
    assert (prod.pending_jobs, prod.pending_gpus) == (1, 1)
