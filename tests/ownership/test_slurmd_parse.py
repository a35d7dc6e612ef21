"""Reading what the local Slurm 22.05.8 printed (tests/fixtures/slurmd/), recorded while n2 ran
job 383 (2 GPUs), 384 (1 GPU) and 387 (1 GPU, suspended), n1 ran 385, and 386 ran on n1 and n3
with 2 GPUs each; 388 had just completed on n2. squeue.json keeps, of the 83 jobs squeue --json
printed (it ignores -w and -t), those from 375 on, 330 (cancelled across n[1-3]) and 339
(cancelled while pending, no job_resources)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.domain import OwnerKind
from observer.errors import OwnerSourceError
from observer.ownership.slurmd import gpu_indices, listpids, node_owners

RECORDED = Path(__file__).parents[1] / "fixtures" / "slurmd"
AT = datetime(2026, 12, 1, 22, 53, tzinfo=UTC)
UUIDS = {i: f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd" for i in range(4)}
N2 = (RECORDED / "scontrol-show-node-n2.txt").read_text()  # Gres=gpu:4, as on n1 and n3
QUEUE = (RECORDED / "squeue.json").read_text()


def test_n2_runs_its_three_jobs_each_with_the_gpus_slurm_gave_it():
    owners = node_owners("n2", UUIDS, N2, QUEUE, AT)

    assert owners.kind is OwnerKind.SLURM_JOB
    assert owners.at == AT
    assert owners.running == {"383", "384", "387"}  # 387 is suspended: it still holds GPU 2
    assert owners.gpus == {
        "383": {UUIDS[0], UUIDS[1]},
        "384": {UUIDS[3]},
        "387": {UUIDS[2]},
    }
    assert owners.allocatable == frozenset(UUIDS.values())


def test_a_job_on_two_nodes_counts_on_each_with_that_nodes_gpus_only():
    n1 = node_owners("n1", UUIDS, N2, QUEUE, AT)
    n3 = node_owners("n3", UUIDS, N2, QUEUE, AT)

    assert n1.gpus == {"385": {UUIDS[0]}, "386": {UUIDS[1], UUIDS[2]}}
    assert n3.gpus == {"386": {UUIDS[0], UUIDS[1]}}  # 381 and 382 had completed on n3


def test_a_completing_job_no_longer_runs():
    document = json.loads(QUEUE)
    for job in document["jobs"]:
        if job["job_id"] == 383:
            job["job_state"] = "COMPLETING"

    owners = node_owners("n2", UUIDS, N2, json.dumps(document), AT)

    assert owners.running == {"384", "387"}


def test_a_node_without_gres_can_assign_no_gpu():
    no_gres = N2.replace("Gres=gpu:4", "Gres=(null)")

    assert node_owners("n2", UUIDS, no_gres, QUEUE, AT).allocatable == frozenset()


@pytest.mark.parametrize(
    ("gres", "indices"),
    [
        ("gpu:2(IDX:0-1)", [0, 1]),
        ("gpu:a100:3(IDX:0,2-3)", [0, 2, 3]),
        ("gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)", [0, 2, 3]),
        ("mps:100(0/100,0/100),gpu:1(IDX:1)", [1]),
        ("gpu:1(IDX:N/A)", []),
        ("", []),
    ],
)
def test_gpu_indices_read_every_form_of_a_gres_detail_entry(gres: str, indices: list[int]):
    assert gpu_indices(gres) == indices


def test_an_index_nvml_does_not_know_fails_the_reading_rather_than_guessing():
    three = {i: UUIDS[i] for i in range(3)}

    with pytest.raises(OwnerSourceError, match=r"GPU index 3, which is none of .*\(0, 1, 2\)"):
        node_owners("n2", three, N2, QUEUE, AT)


def test_squeue_that_could_not_reach_slurmctld_fails_the_reading_in_its_words():
    unreachable = (RECORDED / "squeue-unreachable.json").read_text()

    with pytest.raises(OwnerSourceError, match="slurm_load_jobs: Failed while looking for jobs"):
        node_owners("n2", UUIDS, N2, unreachable, AT)


META = json.loads(QUEUE)["meta"]


@pytest.mark.parametrize(
    ("queue", "reason"),
    [
        ("squeue: error: Invalid user", "printed no JSON object"),
        ("[]", "printed no JSON object"),
        ('{"jobs": []}', "no meta"),
        (json.dumps({"meta": META, "jobs": None}), "no jobs list"),
        (
            json.dumps({"meta": META, "jobs": [{"job_id": 7, "job_state": "RUNNING"}]}),
            "job 7 has no readable node",
        ),
    ],
)
def test_an_answer_that_does_not_parse_fails_the_reading(queue: str, reason: str):
    with pytest.raises(OwnerSourceError, match=reason):
        node_owners("n2", UUIDS, N2, queue, AT)


def test_a_node_line_without_gres_fails_the_reading():
    with pytest.raises(OwnerSourceError, match="no Gres field"):
        node_owners("n2", UUIDS, "NodeName=n2 Arch=x86_64", QUEUE, AT)


def test_listpids_maps_every_pid_slurmd_tracks_to_its_job():
    pids = listpids((RECORDED / "scontrol-listpids-n2.txt").read_text())

    assert pids == {
        26822: "383",
        26830: "383",
        26897: "384",
        26902: "384",
        26823: "387",
        26828: "387",
    }


def test_an_unreadable_listpids_row_fails():
    with pytest.raises(OwnerSourceError, match="unreadable row"):
        listpids("PID      JOBID    STEPID\nabc      383      batch\n")
