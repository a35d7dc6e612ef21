"""Every failed task - a probe run, or any tenant's job of the platform's listing - classed by
its cause from the evidence around it - application, GPU / driver, node, scheduling policy,
platform configuration, or unexplained - in the daily summary's failure tables and per-task
record, and in the verdict's failure-evidence criterion, which fails when too many failures
have no cause the evidence can tell."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from datetime import timedelta

import pytest

from observer.backends.kubernetes.status import kueue_hold
from observer.detectors.gpu_health import ECC_UNCORRECTED
from observer.domain import (
    Expectation,
    Finding,
    FindingKind,
    JobPhase,
    JobStatus,
    Outcome,
    ProbeRun,
    SchedulerNode,
    Severity,
)
from observer.records import JOB_SLOT, JobOrigin, JobSlot, JobTally, StoredNodeChange
from observer.reports.compute.causes import Cause, Classified, classify, classify_job
from observer.reports.compute.criteria.result import Status
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.compute.notes import Note
from observer.reports.compute.verdict import VerdictInputs, build_verdict
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language, Words
from tests.reports.builders import DAY, RULES, TZ, at, context, queue, run

NODE = "node-3"
OWNER = "4242"  # what the node agents name as the owner of the task's GPU processes
GPU = 3  # the task's GPU on NODE


def on_node(failed: ProbeRun) -> ProbeRun:
    return replace(failed, node_names=(NODE,), owner_ids=(OWNER,))


def xid(
    code: int, xid_class: str, when: float = 10.0, gpu: int = GPU, held_by: str | None = OWNER
) -> Finding:
    """An Xid on `gpu` of NODE, whose processes were `held_by` that owner (None: unknown)."""
    hour, minute = int(when), round((when % 1) * 60)
    return Finding(
        detector="gpu_xid",
        kind=FindingKind.EVENT,
        subject={"node": NODE, "pci_bus_id": f"0000:{gpu}b:00.0", "xid": str(code)},
        severity=Severity.CRITICAL,
        summary=f"Xid {code}",
        opened_at=at(hour, minute),
        closed_at=at(hour, minute),
        evidence={
            "xid": code,
            "xid_class": xid_class,
            "fatal": xid_class != "application",
            "gpu_index": gpu,
            "gpu_owner_ids": None if held_by is None else [held_by],
        },
    )


CRASHED = on_node(run(submitted=at(10), outcome=Outcome.FAILED, reason="Error", exit_code=1))


@pytest.mark.parametrize(
    ("failed", "findings", "changes", "cause"),
    [
        (CRASHED, [xid(79, "bus")], [], Cause.GPU_DRIVER),
        (CRASHED, [xid(13, "application")], [], Cause.APPLICATION),
        (CRASHED, [], [], Cause.APPLICATION),
        (on_node(run(outcome=Outcome.FAILED, reason="OOMKilled")), [], [], Cause.APPLICATION),
        (
            CRASHED,
            [],
            [StoredNodeChange(at(10, 0, 30), SchedulerNode(NODE, "a", 8, 0, "drained", "hw"))],
            Cause.NODE,
        ),
        (
            run(outcome=Outcome.FAILED, reason="ImagePullBackOff", wait_seconds=None),
            [],
            [],
            Cause.PLATFORM_CONFIGURATION,
        ),
        (run(outcome=Outcome.REJECTED, reason="Forbidden"), [], [], Cause.PLATFORM_CONFIGURATION),
        # The platform's authentication or controller out, in its own words: not its settings.
        (
            run(
                outcome=Outcome.REJECTED,
                reason="Rejected",
                message="sbatch: error: Munge encode failed: Failed to access "
                '"/run/munge/munge.socket.2": No such file or directory (retrying ...)',
            ),
            [],
            [],
            Cause.PLATFORM_OUTAGE,
        ),
        (
            run(
                outcome=Outcome.REJECTED,
                reason="Rejected",
                message="create job: 401 Unauthorized: Unauthorized",
            ),
            [],
            [],
            Cause.PLATFORM_OUTAGE,
        ),
        (
            run(
                outcome=Outcome.TIMED_OUT,
                reason="QuotaExceeded",
                wait_seconds=None,
                pending={"QuotaExceeded": 600},
            ),
            [],
            [],
            Cause.SCHEDULING,
        ),
        (on_node(run(outcome=Outcome.FAILED, reason="Preempted")), [], [], Cause.SCHEDULING),
        (on_node(run(outcome=Outcome.FAILED)), [], [], Cause.UNEXPLAINED),
        (on_node(run(outcome=Outcome.LOST, reason="JobForgotten")), [], [], Cause.UNEXPLAINED),
    ],
)
def test_each_failure_is_classed_by_the_evidence_around_it(
    failed: ProbeRun,
    findings: list[Finding],
    changes: list[StoredNodeChange],
    cause: Cause,
) -> None:
    classified = classify(failed, findings, changes)
    assert classified is not None and classified.cause is cause


def test_an_xid_on_another_node_or_hours_away_is_not_the_runs_evidence():
    elsewhere = replace(xid(79, "bus"), subject={"node": "node-9", "xid": "79"})
    later = xid(79, "bus", when=15)

    classified = classify(CRASHED, [elsewhere, later], [])

    assert classified is not None and classified.cause is Cause.APPLICATION


def ecc(gpu: int, held_by: str) -> Finding:
    """Uncorrected ECC errors on `gpu` of NODE, open from 09:55 to 10:30."""
    return Finding(
        detector=ECC_UNCORRECTED,
        kind=FindingKind.CONDITION,
        subject={"node": NODE, "gpu_uuid": f"GPU-{gpu}"},
        severity=Severity.CRITICAL,
        summary=f"GPU {gpu} on {NODE}: 2 new uncorrected ECC error(s)",
        opened_at=at(9, 55),
        closed_at=at(10, 30),
        evidence={"gpu_index": gpu, "gpu_uuid": f"GPU-{gpu}", "gpu_owner_ids": [held_by]},
    )


def test_a_fail_exit_probe_failing_as_designed_beside_another_gpus_ecc_errors_is_as_designed():
    """The probe's job, as the platform lists it, and its run: neither a GPU / driver fault."""
    other_gpu = ecc(GPU + 1, held_by="7777")
    job = replace(training("Error", 3), run_id="run-fail-exit", tenant="research")
    meant = on_node(run("fail-exit", expectation=Expectation.FAIL, reason="Error", exit_code=3))

    listed = classify_job(job, [other_gpu], [], Expectation.FAIL)
    ran = classify(meant, [other_gpu], [])

    assert listed is not None and listed.cause is Cause.AS_DESIGNED
    assert ran is not None and ran.cause is Cause.AS_DESIGNED
    assert evidence(listed) == evidence(ran) == ["expected to end: fail", "“Error”", "exit 3"]
    assert evidence(listed, "zh-CN") == ["预期失败", "「Error」", "退出码 3"]


def test_a_probe_job_that_did_not_fail_as_its_probe_expects_is_classed_by_the_evidence():
    exited_zero = replace(training("Completed", 0), run_id="run-fail-exit")

    classified = classify_job(exited_zero, [xid(79, "bus")], [], Expectation.SUCCEED)

    assert classified is not None and classified.cause is Cause.GPU_DRIVER


def test_a_gpu_comm_probe_ending_with_its_own_status_is_a_multi_gpu_communication_fault():
    degraded = on_node(
        run("gpu-comm", outcome=Outcome.FAILED, reason="NonZeroExitCode", exit_code=72)
    )
    same_exit_of_another_probe = on_node(
        run("short", outcome=Outcome.FAILED, reason="NonZeroExitCode", exit_code=72)
    )

    classified = classify(degraded, [], [])
    other = classify(same_exit_of_another_probe, [], [])

    assert classified is not None and classified.cause is Cause.GPU_DRIVER
    assert evidence(classified) == [
        "multi-GPU communication failed: a pair of its GPUs could not reach each other at "
        "their link's rate (gpu-comm, exit 72)"
    ]
    assert evidence(classified, "zh-CN")[0].startswith("多卡通信失败")
    assert other is not None and other.cause is Cause.APPLICATION  # a status of its own program


def test_an_xid_79_on_another_jobs_gpu_of_its_node_is_not_the_runs_gpu_fault():
    elsewhere = xid(79, "bus", gpu=GPU + 1, held_by="7777")

    classified = classify(CRASHED, [elsewhere], [])

    assert classified is not None and classified.cause is Cause.APPLICATION
    assert evidence(classified) == ["exit 1"]


def test_an_xid_79_on_the_runs_own_gpu_is_gpu_driver_naming_the_xid_and_its_gpu():
    classified = classify(CRASHED, [xid(79, "bus")], [])

    assert classified is not None and classified.cause is Cause.GPU_DRIVER
    assert evidence(classified) == [f"Xid 79 on {NODE} GPU {GPU} (GPU has fallen off the bus)"]


def test_a_gpu_fault_whose_gpus_holder_is_unknown_leaves_the_failure_unexplained_naming_it():
    """Not GPU / driver (the GPU may be another job's), nor the exit code's (it may be not)."""
    unknown_holder = xid(79, "bus", held_by=None)
    no_owner_ids = replace(CRASHED, owner_ids=())

    for failed, findings in ((CRASHED, [unknown_holder]), (no_owner_ids, [xid(79, "bus")])):
        classified = classify(failed, findings, [])

        assert classified is not None and classified.cause is Cause.UNEXPLAINED
        assert evidence(classified) == [
            f"Xid 79 on {NODE} GPU {GPU} (GPU has fallen off the bus)",
            "not known to be on its GPUs",
        ]
        assert evidence(classified, "zh-CN")[1] == "无法确定是否发生在其占用的 GPU 上"


def test_nvml_unavailable_on_its_node_is_every_gpu_of_it_the_runs_among_them():
    blind = Finding(
        detector="nvml_unavailable",
        kind=FindingKind.CONDITION,
        subject={"node": NODE},
        severity=Severity.CRITICAL,
        summary=f"NVML unavailable on {NODE}",
        opened_at=at(9),
        closed_at=None,
        evidence={"driver_state": "not_loaded"},
    )

    classified = classify(replace(CRASHED, owner_ids=()), [blind], [])

    assert classified is not None and classified.cause is Cause.GPU_DRIVER
    assert evidence(classified) == [f"nvml_unavailable on {NODE}"]


def training(
    reason: str | None = "Error",
    exit_code: int | None = 1,
    nodes: tuple[str, ...] = (NODE,),
    phase: JobPhase = JobPhase.FAILED,
    started: bool = True,
) -> JobStatus:
    """A tenant's training job of the platform's listing, 08:00 to 10:01 when it started."""
    return JobStatus(
        job_id="4242",
        run_id=None,
        tenant="prod",
        queue="train",
        phase=phase,
        gpus=8,
        submitted_at=at(7, 55),
        started_at=at(8) if started else None,
        finished_at=at(10, 1),
        reason=reason,
        exit_code=exit_code,
        nodes=nodes if started else (),
        owner_ids=(OWNER,),
    )


DRAINED = StoredNodeChange(at(9), SchedulerNode(NODE, "a", 8, 8, "drained", "ECC storm"))


def evidence(classified: Classified | None, language: Language = "en") -> list[str]:
    """What decided a cause, as a report in `language` writes it."""
    assert classified is not None
    words = Words(language, TZ)
    return [words.note(n) for n in classified.evidence]


@pytest.mark.parametrize(
    ("job", "findings", "changes", "cause", "english", "chinese"),
    [
        (
            training(),
            [xid(79, "bus")],
            [],
            Cause.GPU_DRIVER,
            [f"Xid 79 on {NODE} GPU {GPU} (GPU has fallen off the bus)"],
            [f"{NODE} 上 GPU {GPU} 的 Xid 79（GPU 从总线掉线）"],
        ),
        (
            training(),
            [],
            [DRAINED],
            Cause.NODE,
            [f"{NODE} drained (“ECC storm”)"],
            [f"{NODE} 变为 drained（「ECC storm」）"],
        ),
        (training("OOMKilled", 137), [], [], Cause.APPLICATION, ["OOM"], ["内存不足（OOM）"]),
        (training("NodeDown", 0), [], [], Cause.NODE, ["“NodeDown”"], ["「NodeDown」"]),
        (training("TimeLimit", 0), [], [], Cause.APPLICATION, ["“TimeLimit”"], ["「TimeLimit」"]),
        (
            training("DeadLine", None, started=False),
            [],
            [],
            Cause.SCHEDULING,
            ["pending: “DeadLine”"],
            ["排队等待：「DeadLine」"],
        ),
        (
            training("ErrImagePull", None, started=False),
            [],
            [],
            Cause.PLATFORM_CONFIGURATION,
            ["“ErrImagePull”"],
            ["「ErrImagePull」"],
        ),
        # The platform named no node: the Xid on the node it ran on cannot be tied to it.
        (
            training("NonZeroExitCode", 2, nodes=()),
            [xid(79, "bus")],
            [DRAINED],
            Cause.APPLICATION,
            ["exit 2"],
            ["退出码 2"],
        ),
        (training(None, None), [], [], Cause.UNEXPLAINED, [], []),
    ],
)
def test_each_failed_job_of_the_listing_is_classed_by_the_same_evidence(
    job: JobStatus,
    findings: list[Finding],
    changes: list[StoredNodeChange],
    cause: Cause,
    english: list[str],
    chinese: list[str],
) -> None:
    classified = classify_job(job, findings, changes)

    assert classified is not None and classified.cause is cause
    assert evidence(classified) == english
    assert evidence(classified, "zh-CN") == chinese


def test_a_job_that_did_not_fail_has_no_cause():
    for phase in (JobPhase.SUCCEEDED, JobPhase.CANCELLED):
        assert classify_job(training(phase=phase), [xid(79, "bus")], [DRAINED]) is None


def test_the_daily_summary_heads_its_failures_with_the_cause_and_names_the_xid():
    data = PeriodData(DAY, runs=[CRASHED], findings=[xid(79, "bus")])
    report = build_daily(DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1))

    rendered = render_daily(report, "en")

    [group] = report.figures.tasks.failure_groups
    assert group.cause == "gpu_driver"
    xid_79 = f"Xid 79 on {NODE} GPU {GPU} (GPU has fallen off the bus)"
    assert f"| GPU / driver | {xid_79} | failed | “Error” |" in rendered.markdown
    assert rendered.csv is not None
    [row] = csv.DictReader(io.StringIO(rendered.csv))
    assert (row["cause"], row["cause_evidence"]) == ("gpu_driver", xid_79)
    chinese = render_daily(report, "zh-CN").markdown
    assert f"| GPU / 驱动 | {NODE} 上 GPU {GPU} 的 Xid 79（GPU 从总线掉线） | 失败 |" in chinese


def test_the_verdict_fails_failure_evidence_when_too_many_causes_are_unknown():
    snapshots = [DAY.start + timedelta(minutes=10 * i) for i in range(6 * 24)]
    # The platform said something, but nothing tells what kind of failure it was.
    vague = on_node(run(outcome=Outcome.FAILED, reason="Error", message="terminated"))

    def criterion(runs: list[ProbeRun]) -> tuple[Status, Note]:
        soak = PeriodData(DAY, runs=runs, queue_samples=[queue(s, "research") for s in snapshots])
        inputs = VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES)
        found = next(c for c in build_verdict(inputs).criteria if c.criterion == "failure_evidence")
        [causes] = [n for n in found.evidence if n.key == "ev.failure_causes"]
        return found.status, causes

    status, causes = criterion([*[CRASHED] * 9, vague])  # 1 in 10: the limit, not over it
    assert status is Status.PASS
    assert (causes.params["application"], causes.params["unexplained"]) == (9, 1)

    status, causes = criterion([*[CRASHED] * 9, vague, vague])
    assert status is Status.FAIL
    assert causes.params["unexplained_share"] == 2 / 11


def test_the_verdict_fails_failure_evidence_when_too_many_of_all_jobs_failures_are_unknown():
    snapshots = [DAY.start + timedelta(minutes=10 * i) for i in range(6 * 24)]
    samples = [queue(s, "research") for s in snapshots]
    runs = [CRASHED] * 10  # the probes' failures all explained

    def criterion(*tallies: JobTally) -> tuple[Status, list[Note]]:
        slots = [JobSlot(DAY.start, DAY.start + JOB_SLOT, True, "", tallies)]
        soak = PeriodData(DAY, runs=runs, queue_samples=samples, job_slots=slots)
        inputs = VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES)
        found = next(c for c in build_verdict(inputs).criteria if c.criterion == "failure_evidence")
        return found.status, [n for n in found.evidence if n.key == "ev.all_job_failure_causes"]

    explained = JobTally("prod", JobPhase.FAILED, "OOMKilled", "application", 9)
    unexplained = JobTally("prod", JobPhase.FAILED, None, "unexplained", 1)
    before_causes = JobTally("prod", JobPhase.FAILED, "Error", None, 50)
    done = JobTally("prod", JobPhase.SUCCEEDED, None, None, 100)

    status, [jobs] = criterion(explained, unexplained, before_causes, done)
    assert status is Status.PASS  # 1 in 10 of the classed: the limit, not over it
    assert (jobs.params["application"], jobs.params["unexplained"]) == (9, 1)

    status, [jobs] = criterion(explained, replace(unexplained, jobs=2), done)
    assert status is Status.FAIL
    assert jobs.params["unexplained_share"] == 2 / 11
    assert criterion(done) == (Status.PASS, [])


def test_the_verdict_counts_failures_as_designed_in_no_share_of_causes():
    snapshots = [DAY.start + timedelta(minutes=10 * i) for i in range(6 * 24)]
    samples = [queue(s, "research") for s in snapshots]
    meant = run("fail-exit", expectation=Expectation.FAIL, reason="Error", exit_code=3)
    vague = on_node(run(outcome=Outcome.FAILED, reason="Error", message="terminated"))
    runs = [*[CRASHED] * 9, vague, *[meant] * 20]
    tallies = (
        JobTally("prod", JobPhase.FAILED, "OOMKilled", "application", 9),
        JobTally("prod", JobPhase.FAILED, None, "unexplained", 1),
        JobTally("research", JobPhase.FAILED, "Error", "as_designed", 20, JobOrigin.OBSERVER),
    )
    slots = [JobSlot(DAY.start, DAY.start + JOB_SLOT, True, "", tallies)]
    soak = PeriodData(DAY, runs=runs, queue_samples=samples, job_slots=slots)
    inputs = VerdictInputs(context(snapshot_interval_seconds=600), soak, {}, RULES)

    found = next(c for c in build_verdict(inputs).criteria if c.criterion == "failure_evidence")

    assert found.status is Status.PASS  # 1 in 10 of the platform's failures: not over the limit
    keys = ("ev.failure_causes", "ev.all_job_failure_causes")
    for causes in (n for n in found.evidence if n.key in keys):
        assert (causes.params["as_designed"], causes.params["unexplained_share"]) == (20, 1 / 10)
        english = Words("en", TZ).note(causes)
        assert english.endswith("failed as designed, counted in no share.")


def test_a_probe_its_queue_held_until_its_deadline_is_a_quota_hold():
    workload = {
        "metadata": {"name": "job-observer-hold-1a2b3", "namespace": "research"},
        "spec": {"queueName": "team-a"},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient unused "
                    "quota for nvidia.com/gpu in flavor default-flavor, 4 more needed",
                }
            ]
        },
    }
    hold = kueue_hold(workload, {"team-a": "gpu-pool"})
    assert hold is not None
    held = run(
        outcome=Outcome.TIMED_OUT,
        reason=hold.reason,
        wait_seconds=None,
        pending={"Unknown": 5, hold.reason: 600},
    )

    classified = classify(held, [], [])

    assert classified is not None and classified.cause is Cause.SCHEDULING
    assert evidence(classified) == [f"quota: “{hold.reason}”"]
