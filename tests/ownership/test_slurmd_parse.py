"""Reading what the node's Slurm printed (tests/fixtures/slurmd/).

`scontrol listpids` of n2 (22.05.8) while it ran jobs 383, 384 and 387. `scontrol show job -d`
of the local 22.05.8 and 24.11 clusters (deploy/local/infra/slurm-up.sh, slurm24-up.sh, nodes
n1..n3 with 4 GPUs each): a job given 2 GPUs on n2; a job on n1 and n3, given GPUs 1-2 on n1
and 0-1 on n3 by 22.05 and 0-1 on both by 24.11 (which prints them as one line, `n[1,3]`); a
job given no GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from observer.errors import OwnerSourceError
from observer.ownership.slurmd import (
    gpu_indices,
    hostnames,
    job_gpu_indices,
    listpids,
    node_gpu_count,
)

RECORDED = Path(__file__).parents[1] / "fixtures" / "slurmd"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


@pytest.mark.parametrize(
    ("name", "job", "node", "indices"),
    [
        ("scontrol-show-job-d-22.05-n2-2gpus.txt", "4", "n2", [0, 1]),
        ("scontrol-show-job-d-22.05-n1-n3.txt", "5", "n1", [1, 2]),
        ("scontrol-show-job-d-22.05-n1-n3.txt", "5", "n3", [0, 1]),
        ("scontrol-show-job-d-22.05-no-gres.txt", "6", "n2", []),
        ("scontrol-show-job-d-24.11-n2-2gpus.txt", "1", "n2", [0, 1]),
        ("scontrol-show-job-d-24.11-n1-n3.txt", "2", "n1", [0, 1]),
        ("scontrol-show-job-d-24.11-n1-n3.txt", "2", "n3", [0, 1]),
    ],
)
def test_a_jobs_gpus_on_a_node_are_those_its_allocation_line_for_that_node_gives(
    name: str, job: str, node: str, indices: list[int]
):
    assert job_gpu_indices(recorded(name), job, node) == indices


def test_a_job_with_no_allocation_on_the_node_fails_rather_than_reading_as_no_gpus():
    detail = recorded("scontrol-show-job-d-22.05-n1-n3.txt")

    with pytest.raises(OwnerSourceError, match="job -d 5 names no allocation on node n2"):
        job_gpu_indices(detail, "5", "n2")


def test_only_the_asked_jobs_record_is_read_when_several_are_printed():
    # a heterogeneous job prints each component as a record of its own
    other = recorded("scontrol-show-job-d-22.05-n2-2gpus.txt").replace("JobId=4 ", "JobId=40 ")
    mine = recorded("scontrol-show-job-d-22.05-no-gres.txt")

    assert job_gpu_indices(other + mine, "6", "n2") == []
    with pytest.raises(OwnerSourceError, match="printed no record of job 7"):
        job_gpu_indices(other + mine, "7", "n2")


@pytest.mark.parametrize(
    ("hostlist", "names"),
    [
        ("n2", ["n2"]),
        ("n[1,3]", ["n1", "n3"]),
        ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
        ("a1,b[2-3]-ib", ["a1", "b2-ib", "b3-ib"]),
        ("r[1-2]n[1,4]", ["r1n1", "r1n4", "r2n1", "r2n4"]),
    ],
)
def test_a_hostlist_names_every_node_it_ranges_over(hostlist: str, names: list[str]):
    assert hostnames(hostlist) == names


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


def test_the_node_line_gives_the_nodes_gpu_count():
    n2 = recorded("scontrol-show-node-n2.txt")  # Gres=gpu:4

    assert node_gpu_count(n2) == 4
    assert node_gpu_count(n2.replace("Gres=gpu:4", "Gres=gpu:a100:2,gpu:v100:1")) == 3
    assert node_gpu_count(n2.replace("Gres=gpu:4", "Gres=(null)")) == 0


def test_a_node_line_without_gres_fails_the_reading():
    with pytest.raises(OwnerSourceError, match="no Gres field"):
        node_gpu_count("NodeName=n2 Arch=x86_64")


def test_listpids_maps_every_pid_slurmd_tracks_to_its_job():
    pids = listpids(recorded("scontrol-listpids-n2.txt"))

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
