"""The Slurm backend against each real Slurm release, 22.05 and 24.11 (three nodes of four fake
GPUs, accounts research and prod, QOS low limited to 2 GPUs per job): what it reads is what
Slurm says."""

from __future__ import annotations

import getpass
import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from observer.backends.slurm.backend import SlurmBackend
from observer.backends.slurm.parse import hidden_jobs
from observer.backends.slurm.script import time_limit_minutes
from observer.clock import ManualClock, SystemClock
from observer.domain import (
    Behaviour,
    Expectation,
    JobPhase,
    JobRequest,
    JobStatus,
    Outcome,
    SchedulerNode,
    Workload,
)
from observer.errors import NO_GPU_EXIT_CODE, BackendError, ProbeError
from observer.probes.outcome import judge
from observer.slurm_json import dialect
from tests.backends.slurm_harness import SlurmHarness
from tests.support.net import free_port


def _request(
    slurm: SlurmHarness,
    workload: Workload,
    tenant: int = 0,
    probe: str = "short",
    priority: str | None = None,
) -> JobRequest:
    return JobRequest(
        run_id=uuid.uuid4().hex,
        probe=probe,
        tenant=slurm.tenants[tenant],
        queue=slurm.queue,
        workload=workload,
        priority=priority,
    )


def _status(slurm: SlurmHarness, job_id: str) -> JobStatus:
    return slurm.backend.jobs([job_id])[job_id]


def _run_to_end(slurm: SlurmHarness, workload: Workload, probe: str = "short") -> JobStatus:
    job_id = slurm.backend.submit(_request(slurm, workload, probe=probe))
    slurm.settle(lambda: _status(slurm, job_id).phase.finished, 30)
    return _status(slurm, job_id)


def _sacct_times(slurm: SlurmHarness, job_id: str) -> list[datetime | None]:
    line = slurm.cli(
        "sacct", "-X", "-P", "-n", "-j", job_id, "-o", "Submit,Start,End",
        env={"SLURM_TIME_FORMAT": "%s"},
    )  # fmt: skip
    return [
        datetime.fromtimestamp(int(t), UTC) if t.isdigit() else None
        for t in line.strip().split("|")
    ]


def _dead_slurm_conf(slurm: SlurmHarness, message_timeout: str | None) -> Path:
    """The test cluster's configuration with slurmctld on a port nobody listens on, where its
    programs can read it (the output directory: 24.11's chroot sees it)."""
    port = free_port()
    lines = [
        f"SlurmctldPort={port}" if line.startswith("SlurmctldPort=") else line
        for line in slurm.slurm_conf.read_text().splitlines()
    ]
    if message_timeout:
        lines.append(f"MessageTimeout={message_timeout}")
    dead = slurm.settings.output_dir / "dead-slurm.conf"
    dead.write_text("\n".join(lines) + "\n")
    return dead


def test_squeue_names_the_release_that_printed_it(slurm: SlurmHarness):
    job_id = slurm.cli("sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 1").strip()

    # from 23.02 on an ended job is listed only when every state is asked for; 22.05 ignores
    # --jobs in JSON mode, so others that ended within MinJobAge may be listed beside it
    document = json.loads(slurm.cli("squeue", "--json", "--states=all", f"--jobs={job_id}"))

    listed = [job["job_id"] for job in document["jobs"]]
    if slurm.cluster.release == "22.05":
        assert int(job_id) in listed
    else:
        assert listed == [int(job_id)]
    assert dialect(document).release.startswith(f"{slurm.cluster.release}.")


def test_a_short_probe_waits_runs_and_succeeds_with_the_times_sacct_records(slurm: SlurmHarness):
    # --begin holds the job for two seconds, so its pending phase is seen for certain
    held = slurm.settings.model_copy(update={"sbatch_extra_args": ("--begin=now+2",)})
    backend = SlurmBackend(held, SystemClock())
    request = _request(slurm, Workload(gpus_per_node=1, duration_seconds=2))
    job_id = backend.submit(request)
    seen: list[tuple[JobPhase, str | None]] = []

    def observe() -> bool:
        status = backend.jobs([job_id])[job_id]
        if not seen or seen[-1][0] is not status.phase:
            seen.append((status.phase, status.reason))
        return status.phase.finished

    slurm.settle(observe, 30)

    assert seen == [
        (JobPhase.PENDING, "BeginTime"),
        (JobPhase.RUNNING, None),
        (JobPhase.SUCCEEDED, None),
    ]
    done = backend.jobs([job_id])[job_id]
    assert (done.run_id, done.tenant, done.queue, done.gpus) == (
        request.run_id,
        "research",
        "gpu",
        1,
    )
    assert done.exit_code == 0
    assert len(done.nodes) == 1 and done.nodes[0] in {"n1", "n2", "n3"}
    assert done.submitted_at is not None and done.started_at is not None
    assert done.finished_at is not None
    assert done.submitted_at.tzinfo is UTC
    assert (done.started_at - done.submitted_at).total_seconds() >= 2  # held by --begin
    assert 2 <= (done.finished_at - done.started_at).total_seconds() <= 4
    # slurmdbd records the end a moment after slurmctld
    slurm.settle(lambda: _sacct_times(slurm, job_id)[2] is not None, 10)
    assert _sacct_times(slurm, job_id) == [done.submitted_at, done.started_at, done.finished_at]


def test_a_probe_that_exits_3_fails_with_exit_code_3_and_slurms_reason(slurm: SlurmHarness):
    failed = _run_to_end(slurm, Workload(gpus_per_node=1, duration_seconds=0, exit_code=3))

    assert failed.phase is JobPhase.FAILED
    assert failed.exit_code == 3
    assert failed.reason == "NonZeroExitCode"
    assert failed.message is not None and "exit code 3" in failed.message


def test_accounting_tells_the_same_story_as_slurmctld(slurm: SlurmHarness):
    # jobs() reads slurmdbd once slurmctld forgets a job (MinJobAge); slurmdbd's record
    # lags a moment (no partition, still RUNNING), then must agree field by field
    failed = _run_to_end(slurm, Workload(gpus_per_node=2, duration_seconds=1, exit_code=3))

    slurm.settle(lambda: slurm.backend.accounting([failed.job_id]) == {failed.job_id: failed}, 10)
    assert failed.priority and failed.user  # the QOS and the user, the same in both


@pytest.mark.parametrize(
    ("behaviour", "words"),
    [(Behaviour.BAD_COMMAND, "not found"), (Behaviour.BAD_IMAGE, "No such file or directory")],
)
def test_a_probe_whose_command_is_missing_fails_with_127(
    slurm: SlurmHarness, behaviour: Behaviour, words: str
):
    failed = _run_to_end(slurm, Workload(gpus_per_node=1, behaviour=behaviour), probe=behaviour)

    assert (failed.phase, failed.exit_code, failed.reason) == (
        JobPhase.FAILED,
        127,
        "NonZeroExitCode",
    )
    assert words in slurm.backend.logs(failed.job_id)


def test_an_oom_probe_is_killed_for_exceeding_its_memory(slurm: SlurmHarness):
    # no cgroups here: JobAcctGatherParams=OverMemoryKill kills the step with SIGKILL
    failed = _run_to_end(
        slurm, Workload(gpus_per_node=1, duration_seconds=10, behaviour=Behaviour.OOM), "oom"
    )

    assert (failed.phase, failed.exit_code) == (JobPhase.FAILED, 128 + 9)
    assert failed.message is not None and "signal 9" in failed.message
    assert "Exceeded job memory limit" in slurm.backend.logs(failed.job_id)


def test_a_gpu_busy_probe_runs_gpu_burn_which_finds_no_gpu_on_these_nodes(slurm: SlurmHarness):
    # the nodes' GPUs are fake GRES: no driver, so the real program ends "no GPU here"
    failed = _run_to_end(
        slurm, Workload(gpus_per_node=2, duration_seconds=1, behaviour=Behaviour.GPU_BUSY)
    )

    assert (failed.phase, failed.gpus, failed.exit_code) == (JobPhase.FAILED, 2, NO_GPU_EXIT_CODE)
    assert judge(Expectation.SUCCEED, failed) is Outcome.NO_GPU
    assert slurm.backend.logs(failed.job_id) == (
        "observer probe gpu-burn: no libcuda.so.1: this node has no NVIDIA driver, or the "
        "container was not started with the NVIDIA runtime\n"
    )


def test_a_probe_asking_more_gpus_than_are_free_waits_for_resources(slurm: SlurmHarness):
    whole_cluster = Workload(gpus_per_node=4, nodes=3, duration_seconds=60)
    blocker = slurm.backend.submit(_request(slurm, whole_cluster))
    slurm.settle(lambda: _status(slurm, blocker).phase is JobPhase.RUNNING, 30)
    waiting = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=1), tenant=1))
    slurm.settle(lambda: _status(slurm, waiting).reason is not None, 30)

    pending = _status(slurm, waiting)
    assert pending.phase is JobPhase.PENDING
    assert pending.reason in ("Resources", "Priority")
    assert pending.message is not None and pending.reason in pending.message
    assert pending.started_at is None and pending.nodes == ()
    assert _status(slurm, blocker).nodes == ("n1", "n2", "n3")

    snap = slurm.backend.snapshot()
    queues = {q.tenant: q for q in snap.queues}
    assert (queues["research"].running_jobs, queues["research"].running_gpus) == (1, 12)
    assert (queues["prod"].pending_jobs, queues["prod"].pending_gpus) == (1, 1)
    assert queues["prod"].pending_reasons == {pending.reason: 1}
    assert 0 <= queues["prod"].longest_wait_seconds < 60
    assert [(n.name, n.gpus_total, n.gpus_allocated) for n in snap.nodes] == [
        ("n1", 4, 4),
        ("n2", 4, 4),
        ("n3", 4, 4),
    ]


def test_snapshot_shows_each_tenants_queue_and_every_node(slurm: SlurmHarness):
    research = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=2, duration_seconds=60)))
    prod = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=1, duration_seconds=60), 1))
    slurm.settle(
        lambda: all(
            s.phase is JobPhase.RUNNING for s in slurm.backend.jobs([research, prod]).values()
        ),
        30,
    )

    snap = slurm.backend.snapshot()
    assert snap.at.tzinfo is not None
    queues = [(q.tenant, q.queue, q.running_jobs, q.running_gpus) for q in snap.queues]
    assert queues == [("prod", "gpu", 1, 1), ("research", "gpu", 1, 2)]
    assert all(q.pending_jobs == 0 for q in snap.queues)
    # whose jobs hold the GPUs: Slurm's QOS and user of each (the tests submit as themselves)
    me = getpass.getuser()
    assert [(q.running_gpus_by_priority, q.running_gpus_by_user) for q in snap.queues] == [
        ({"normal": 1}, {me: 1}),
        ({"normal": 2}, {me: 2}),
    ]
    assert [(n.name, n.pool, n.gpus_total) for n in snap.nodes] == [
        ("n1", "gpu,debug", 4),
        ("n2", "gpu,debug", 4),
        ("n3", "gpu,debug", 4),
    ]
    assert sum(n.gpus_allocated for n in snap.nodes) == 3
    assert {n.state for n in snap.nodes} <= {"idle", "mixed"}
    assert {j.job_id for j in snap.jobs} == {research, prod}


def test_cancel_ends_a_running_probe_and_is_safe_to_repeat(slurm: SlurmHarness):
    job_id = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=1, duration_seconds=300)))
    slurm.settle(lambda: _status(slurm, job_id).phase is JobPhase.RUNNING, 30)

    slurm.backend.cancel(job_id)
    slurm.settle(lambda: _status(slurm, job_id).phase.finished, 30)

    cancelled = _status(slurm, job_id)
    assert cancelled.phase is JobPhase.CANCELLED
    assert cancelled.exit_code is None
    assert cancelled.finished_at is not None
    slurm.backend.cancel(job_id)
    slurm.backend.cancel("99999999")
    assert job_id not in {j.job_id for j in slurm.backend.probe_jobs()}
    slurm.settle(lambda: slurm.backend.accounting([job_id]) == {job_id: cancelled}, 10)


def test_a_log_canary_leaves_every_sequenced_line_in_its_logs(slurm: SlurmHarness):
    request = _request(
        slurm,
        Workload(
            gpus_per_node=1, behaviour=Behaviour.LOG_CANARY, log_lines=20, log_interval_seconds=0.05
        ),
        probe="log-canary",
    )
    job_id = slurm.backend.submit(request)
    slurm.settle(lambda: _status(slurm, job_id).phase is JobPhase.SUCCEEDED, 30)

    lines = slurm.backend.logs(job_id).splitlines()
    fields = [dict(item.split("=") for item in line.split()[1:]) for line in lines]
    assert all(line.startswith("observer-canary ") for line in lines)
    assert [f["seq"] for f in fields] == [str(n) for n in range(20)]
    assert {f["run"] for f in fields} == {request.run_id}
    stamps = [float(f["ts"]) for f in fields]
    assert stamps == sorted(stamps)
    assert stamps[-1] - stamps[0] >= 19 * 0.05


def test_probe_jobs_lists_the_observers_unfinished_jobs_only(slurm: SlurmHarness):
    request = _request(slurm, Workload(gpus_per_node=1, duration_seconds=300))
    ours = slurm.backend.submit(request)
    finished = _run_to_end(slurm, Workload(gpus_per_node=1, duration_seconds=0))
    plain = slurm.cli(
        "sbatch", "--parsable", "--account=prod", "--gres=gpu:1", "--output=/dev/null",
        "--wrap=sleep 300",
    ).strip()  # fmt: skip

    listed = {j.job_id: j for j in slurm.backend.probe_jobs()}
    assert list(listed) == [ours]
    assert listed[ours].run_id == request.run_id
    everyone = {j.job_id: j.run_id for j in slurm.backend.snapshot().jobs}
    assert everyone == {ours: request.run_id, plain: None}
    assert finished.job_id not in everyone


def test_a_job_asked_of_slurmctld_alone_reads_as_the_listing_shows_it(slurm: SlurmHarness):
    # slurm.backend keeps no listing fresh: its jobs() asks scontrol for each job
    listing = SlurmBackend(slurm.settings, ManualClock(datetime.now(UTC)), fresh_listing_seconds=1)
    held = SlurmBackend(
        slurm.settings.model_copy(update={"sbatch_extra_args": ("--hold",)}), SystemClock()
    ).submit(_request(slurm, Workload(gpus_per_node=1)))
    running = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=2, duration_seconds=60)))
    failed = _run_to_end(slurm, Workload(gpus_per_node=1, duration_seconds=0, exit_code=3))
    slurm.settle(lambda: _status(slurm, running).phase is JobPhase.RUNNING, 30)
    ids = [held, running, failed.job_id]

    listing.probe_jobs()  # lists the queue
    from_listing = listing.jobs(ids)

    assert from_listing == slurm.backend.jobs(ids)
    assert [from_listing[i].phase for i in ids] == [
        JobPhase.PENDING,
        JobPhase.RUNNING,
        JobPhase.FAILED,
    ]
    assert from_listing[held].reason == "JobHeldUser"
    assert from_listing[failed.job_id] == failed


def test_jobs_answers_from_a_listing_only_while_it_is_fresh(slurm: SlurmHarness):
    clock = ManualClock(datetime.now(UTC))
    backend = SlurmBackend(slurm.settings, clock, fresh_listing_seconds=5)
    job_id = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=1, duration_seconds=300)))
    slurm.settle(lambda: _status(slurm, job_id).phase is JobPhase.RUNNING, 30)
    backend.snapshot()
    slurm.backend.cancel(job_id)
    slurm.settle(lambda: _status(slurm, job_id).phase.finished, 30)
    later = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=1, duration_seconds=300)))

    clock.advance(5)
    fresh = backend.jobs([job_id, later])
    clock.advance(0.1)
    stale = backend.jobs([job_id])

    assert fresh[job_id].phase is JobPhase.RUNNING  # as listed, 5 s ago
    assert later in fresh  # submitted after the listing: asked of slurmctld
    assert stale[job_id].phase is JobPhase.CANCELLED


def test_private_jobs_are_hidden_from_a_user_who_is_not_an_operator(slurm: SlurmHarness):
    with slurm.private_data("jobs"):
        config = slurm.cli("scontrol", "show", "config")

        def admin_level(user: str) -> str:
            return slurm.cli(
                "sacctmgr", "--parsable2", "--noheader", "list", "user", user, "format=AdminLevel"
            ).strip()

        alice = hidden_jobs(config, "alice", admin_level)
        root = hidden_jobs(config, "root", admin_level)
        operator = hidden_jobs(config, "alice", lambda _: "Operator")
        slurm.backend.snapshot()
    unset = hidden_jobs(slurm.cli("scontrol", "show", "config"), "alice", admin_level)

    assert alice == (
        "slurmctld shows alice only its own jobs (PrivateData=jobs, AdminLevel None): "
        "other users' jobs and queues are not seen"
    )
    assert (root, operator, unset) == (None, None, None)
    assert slurm.backend.partial_view() is None  # the tests run as root, Slurm's SlurmUser


def test_a_drained_node_shows_draining_then_drained_with_its_reason(slurm: SlurmHarness):
    on_n3 = slurm.settings.model_copy(update={"sbatch_extra_args": ("--nodelist=n3",)})
    job_id = SlurmBackend(on_n3, SystemClock()).submit(
        _request(slurm, Workload(gpus_per_node=1, duration_seconds=300))
    )
    slurm.settle(lambda: _status(slurm, job_id).phase is JobPhase.RUNNING, 30)

    def n3() -> SchedulerNode:
        return next(n for n in slurm.backend.snapshot().nodes if n.name == "n3")

    slurm.cli("scontrol", "update", "nodename=n3", "state=drain", "reason=Kill task failed")
    try:
        assert (n3().state, n3().reason, n3().gpus_allocated) == ("draining", "Kill task failed", 1)
        slurm.backend.cancel(job_id)
        slurm.settle(lambda: n3().state == "drained", 30)
        assert (n3().reason, n3().gpus_allocated) == ("Kill task failed", 0)
        others = [(n.state, n.reason) for n in slurm.backend.snapshot().nodes if n.name != "n3"]
        assert others == [("idle", None), ("idle", None)]
    finally:
        slurm.cli("scontrol", "update", "nodename=n3", "state=resume")


def test_a_probe_over_its_qos_gpu_limit_waits_with_the_qos_reason(slurm: SlurmHarness):
    over = _request(slurm, Workload(gpus_per_node=3), priority="low")  # low: 2 GPUs a job
    job_id = slurm.backend.submit(over)
    slurm.settle(lambda: _status(slurm, job_id).reason is not None, 30)

    held = _status(slurm, job_id)
    assert (held.phase, held.reason) == (JobPhase.PENDING, "QOSMaxGRESPerJob")
    assert held.message is not None and "QOS" in held.message


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("tenant", "no-such-account", "Invalid account"),
        ("queue", "no-such-partition", "Invalid partition name specified"),
        ("priority", "no-such-qos", "Invalid qos specification"),
    ],
)
def test_a_probe_slurm_refuses_is_a_probe_error_in_slurms_words(
    slurm: SlurmHarness, field: str, value: str, words: str
):
    change: dict[str, Any] = {field: value}
    refused = replace(_request(slurm, Workload(gpus_per_node=1)), **change)

    with pytest.raises(ProbeError, match=words):
        slurm.backend.submit(refused)


def test_an_unreachable_slurmctld_is_a_backend_error(slurm: SlurmHarness):
    # MessageTimeout=1 makes the clients give up at once instead of after ~9 s
    dead = slurm.settings.model_copy(
        update={"slurm_conf": _dead_slurm_conf(slurm, message_timeout="1")}
    )
    backend = SlurmBackend(dead, SystemClock())

    with pytest.raises(BackendError, match=r"scontrol show job 1 failed: .*Unable to contact"):
        backend.jobs(["1"])
    with pytest.raises(BackendError, match="squeue could not read slurmctld"):
        backend.probe_jobs()
    with pytest.raises(BackendError, match="could not read slurmctld"):
        backend.snapshot()
    with pytest.raises(BackendError, match="sbatch could not reach slurmctld"):
        backend.submit(_request(slurm, Workload(gpus_per_node=1)))
    with pytest.raises(BackendError, match="Unable to contact slurm controller"):
        backend.cancel("1")


def test_a_slurm_command_that_hangs_is_cut_off_by_the_timeout(slurm: SlurmHarness):
    # unreachable slurmctld with the default MessageTimeout: every call retries for ~9 s
    dead = slurm.settings.model_copy(
        update={
            "slurm_conf": _dead_slurm_conf(slurm, message_timeout=None),
            "command_timeout_seconds": 0.5,
        }
    )

    with pytest.raises(BackendError, match=r"squeue did not answer within 0\.5 s"):
        SlurmBackend(dead, SystemClock()).probe_jobs()


def test_jobs_leaves_out_ids_slurm_does_not_know(slurm: SlurmHarness):
    assert slurm.backend.jobs(["99999999", "not-a-job"]) == {}
    with pytest.raises(BackendError, match="no output of job 99999999"):
        slurm.backend.logs("99999999")


def test_a_job_that_must_wait_gets_the_backfill_schedulers_expected_start(slurm: SlurmHarness):
    whole_cluster = Workload(gpus_per_node=4, nodes=3, duration_seconds=60)
    blocker = slurm.backend.submit(_request(slurm, whole_cluster))
    slurm.settle(lambda: _status(slurm, blocker).phase is JobPhase.RUNNING, 30)
    waiting = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=1), tenant=1))
    slurm.settle(lambda: _status(slurm, waiting).expected_start_at is not None, 30)

    # the blocker ends at the latest when its time limit does: the backfill scheduler's plan
    started = _status(slurm, blocker).started_at
    limit = time_limit_minutes(whole_cluster, slurm.settings.time_limit_headroom_minutes)
    assert started is not None
    listed = {j.job_id: j for j in slurm.backend.snapshot().jobs}
    for status in (_status(slurm, waiting), listed[waiting]):
        assert status.phase is JobPhase.PENDING
        assert status.expected_start_at == started + timedelta(minutes=limit)
    assert listed[blocker].expected_start_at is None  # running: no estimate


def test_a_job_behind_one_with_no_time_limit_gets_no_expected_start(slurm: SlurmHarness):
    # A tenant's job with no time limit (the partition has none): slurmctld cannot plan past
    # it and gives the job behind it its year-ahead placeholder, which is no estimate.
    blocker = slurm.cli("sbatch", "--parsable", "-A", "research", "-N", "3", "--gres=gpu:4",
                        "--output=/dev/null", "--wrap", "sleep 120").strip()  # fmt: skip
    slurm.settle(lambda: _status(slurm, blocker).phase is JobPhase.RUNNING, 30)
    waiting = slurm.backend.submit(_request(slurm, Workload(gpus_per_node=1), tenant=1))

    def start_time() -> datetime | None:
        document = json.loads(slurm.cli("squeue", "--json"))
        [job] = [j for j in document["jobs"] if str(j["job_id"]) == waiting]
        return dialect(document).time(job, "start_time")

    slurm.settle(lambda: start_time() is not None, 30)

    pending = _status(slurm, waiting)
    assert pending.phase is JobPhase.PENDING and pending.submitted_at is not None
    placeholder = start_time()
    assert placeholder is not None and placeholder - pending.submitted_at > timedelta(days=364)
    assert pending.expected_start_at is None
