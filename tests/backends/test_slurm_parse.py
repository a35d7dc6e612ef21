"""The reading of Slurm's answers, on output recorded from the local Slurm 22.05.8
(tests/backends/slurm_output/): six jobs (completed, exit 3, killed by signal 9, running on
two nodes, held, cancelled while held) and the three nodes, n3 drained, as squeue --json,
sacct --parsable2 (SLURM_TIME_FORMAT=%s) and sinfo --json printed them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from observer.backends.slurm.parse import (
    expand_hostlist,
    listed_nodes,
    parse_sacct,
    sacct_attempts,
    sbatch_job_id,
    squeue_jobs,
)
from observer.domain import Attempt, JobPhase, SchedulerNode
from observer.errors import BackendError

RECORDED = Path(__file__).parent / "slurm_output"
SUBMITTED = datetime(2026, 12, 1, 20, 1, 21, tzinfo=UTC)


def _at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def recorded_json(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((RECORDED / name).read_text())
    return document


def test_squeue_reads_each_job_with_its_phase_reason_exit_code_and_gpus():
    jobs = {s.job_id: s for s in squeue_jobs(recorded_json("squeue.json"))}

    summary = {
        job_id: (s.tenant, s.phase, s.reason, s.exit_code, s.gpus, s.nodes, s.run_id)
        for job_id, s in jobs.items()
    }
    assert summary == {
        "983": ("research", JobPhase.SUCCEEDED, None, 0, 1, ("n1",), "rec-ok"),
        # exit_code is the raw wait status: 768 is exit 3, 9 is signal 9
        "984": ("prod", JobPhase.FAILED, "NonZeroExitCode", 3, 2, ("n2",), None),
        "985": ("prod", JobPhase.FAILED, "JobLaunchFailure", 137, 1, ("n1",), None),
        "986": ("research", JobPhase.RUNNING, None, None, 4, ("n1", "n2"), "rec-run"),
        "987": ("prod", JobPhase.PENDING, "JobHeldUser", None, 4, (), None),
        "988": ("research", JobPhase.CANCELLED, "JobHeldUser", None, 1, (), None),
    }
    assert jobs["984"].message == (
        "FAILED, NonZeroExitCode: the job terminated with a non-zero exit code (exit code 3)"
    )
    assert jobs["987"].message == "PENDING, JobHeldUser: the job is held by the user"
    assert jobs["986"].started_at == SUBMITTED
    assert jobs["986"].finished_at is None
    assert jobs["987"].started_at is None  # the backfill estimate is not a start
    assert jobs["988"].started_at is None  # cancelled while held: it never started
    assert jobs["988"].finished_at == datetime(2026, 12, 1, 20, 1, 27, tzinfo=UTC)
    assert all(s.owner_ids == (s.job_id,) for s in jobs.values())


def test_sacct_reads_the_same_jobs_as_slurmdbd_recorded_them():
    jobs = parse_sacct((RECORDED / "sacct.txt").read_text())

    summary = {
        job_id: (s.tenant, s.phase, s.reason, s.exit_code, s.gpus, s.nodes, s.run_id)
        for job_id, s in jobs.items()
    }
    assert summary == {
        "983": ("research", JobPhase.SUCCEEDED, None, 0, 1, ("n1",), "rec-ok"),
        "984": ("prod", JobPhase.FAILED, "NonZeroExitCode", 3, 2, ("n2",), None),
        # sacct says Reason=None and ExitCode=0:9: the reason is derived from the signal
        "985": ("prod", JobPhase.FAILED, "RaisedSignal", 137, 1, ("n1",), None),
        # slurmdbd had no comment of the running job yet
        "986": ("research", JobPhase.RUNNING, None, None, 4, ("n1", "n2"), None),
        "987": ("prod", JobPhase.PENDING, "JobHeldUser", None, 4, (), None),
        "988": ("research", JobPhase.CANCELLED, "JobHeldUser", None, 1, (), None),
    }
    assert jobs["987"].started_at is None  # Start=Unknown
    assert jobs["988"].started_at is None  # Start=None
    assert jobs["986"].finished_at is None  # End=Unknown


def test_a_job_slurmctld_has_forgotten_reads_the_same_from_sacct_as_from_squeue():
    from_squeue = {s.job_id: s for s in squeue_jobs(recorded_json("squeue.json"))}
    from_sacct = parse_sacct((RECORDED / "sacct.txt").read_text())

    for job_id in ("983", "984", "987", "988"):
        assert from_sacct[job_id] == from_squeue[job_id]
    assert (from_squeue["983"].priority, from_squeue["983"].user) == ("normal", "root")


def test_sinfo_reads_each_node_with_its_gpus_and_sinfos_state():
    nodes = listed_nodes(recorded_json("sinfo.json"))

    assert nodes == [
        SchedulerNode("n1", "gpu,debug", 4, 2, "mixed", None),
        SchedulerNode("n2", "gpu,debug", 4, 2, "mixed", None),
        # state "idle" with the DRAIN flag: sinfo says drained
        SchedulerNode("n3", "gpu,debug", 4, 0, "drained", "observer-rec maintenance"),
    ]


def test_a_draining_node_that_does_not_answer_reads_as_sinfo_shows_it():
    data = recorded_json("sinfo.json")
    data["nodes"][0]["state_flags"] = ["DRAIN", "NOT_RESPONDING"]

    assert listed_nodes(data)[0].state == "draining*"


@pytest.mark.parametrize(
    ("document", "items", "field", "read"),
    [
        ("squeue.json", "jobs", "job_state", squeue_jobs),
        ("sinfo.json", "nodes", "state", listed_nodes),
    ],
)
def test_a_field_missing_is_a_backend_error_naming_the_release_and_the_field(
    document: str, items: str, field: str, read: Any
):
    data = recorded_json(document)
    del data[items][0][field]

    with pytest.raises(
        BackendError, match=rf"Slurm 22\.05\.8 \(data_parser v0\.0\.38\): .*'{field}'"
    ):
        read(data)


def test_an_unknown_squeue_state_is_a_backend_error():
    data = recorded_json("squeue.json")
    data["jobs"][0]["job_state"] = "SOMETHING_NEW"

    with pytest.raises(BackendError, match="SOMETHING_NEW"):
        squeue_jobs(data)


def test_a_requeued_job_reads_its_restarts_and_when_its_new_attempt_may_start():
    data = recorded_json("squeue.json")
    # as squeue showed job 171 of the local Slurm after its node was set down under it
    data["jobs"][0].update(
        job_state="PENDING",
        state_reason="BeginTime",
        restart_cnt=1,
        submit_time=1796623861,
        eligible_time=1796623982,
        nodes="",
    )

    job = squeue_jobs(data)[0]

    assert (job.phase, job.reason, job.restarts) == (JobPhase.PENDING, "BeginTime", 1)
    assert job.submitted_at == _at(1796623861)  # reset by the requeue
    assert job.eligible_at == _at(1796623982)
    assert job.started_at is None and job.nodes == ()


def test_sacct_duplicates_read_the_attempts_that_ended_in_a_requeue():
    # `sacct --duplicates --format=<ATTEMPT_FIELDS>` on the local Slurm, as printed
    output = (
        "171|NODE_FAIL|1796623858|1796623858|1796623861|n1|None\n"
        "171|PENDING|1796623982|Unknown|Unknown|None assigned|None\n"
        "172|COMPLETED|1796623900|1796623900|1796623910|n2|None\n"
    )

    attempts = sacct_attempts(output, {"171": 1})

    assert attempts == {
        "171": (
            Attempt(
                _at(1796623858), _at(1796623858), _at(1796623861), ("n1",), "NODE_FAIL", "NodeDown"
            ),
        ),
        "172": (),  # never requeued: its one record is the job itself
    }


def test_sbatch_parsable_prints_the_job_id_and_maybe_the_cluster():
    assert sbatch_job_id("983\n") == "983"
    assert sbatch_job_id("983;cluster\n") == "983"
    with pytest.raises(BackendError, match="not a job id"):
        sbatch_job_id("Submitted batch job 983\n")


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("", ()),
        ("n1", ("n1",)),
        ("n[1-3]", ("n1", "n2", "n3")),
        ("n[1-3],gpu[01,05-06]", ("n1", "n2", "n3", "gpu01", "gpu05", "gpu06")),
        ("rack[1-2]-n[1-2]", ("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2")),
        ("a1,b[9-10]", ("a1", "b9", "b10")),
    ],
)
def test_hostlists_expand_as_slurm_writes_them(expression: str, names: tuple[str, ...]):
    assert expand_hostlist(expression) == names
