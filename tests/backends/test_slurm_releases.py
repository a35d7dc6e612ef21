"""Every release from 22.05 to 25.05 read alike: the jobs and nodes 22.05.8 printed, in the
shapes each later data_parser prints them (tests/backends/slurm_releases.py says where each
shape comes from), give the scheduler backend the same answers;
a shape this observer does not know is one line naming the release and the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from observer.backends.slurm.parse import listed_nodes, node_listing, parse_sacct, squeue_jobs
from observer.domain import JobStatus
from observer.errors import BackendError
from observer.slurm_json import ShapeError, document
from tests.backends.slurm_releases import RELEASES, as_printed_by, no_val
from tests.backends.test_slurm_parse import recorded_json

LATER = [p for p in RELEASES if p > 38]


@pytest.mark.parametrize("parser", LATER)
def test_each_release_reads_the_same_jobs_as_22_05(parser: int):
    printed = recorded_json("squeue.json")

    assert squeue_jobs(as_printed_by(printed, parser)) == squeue_jobs(printed)


@pytest.mark.parametrize("parser", LATER)
def test_each_release_reads_the_same_nodes_from_its_own_listing(parser: int):
    printed = recorded_json("sinfo.json")

    assert listed_nodes(as_printed_by(printed, parser)) == listed_nodes(printed)
    queue = as_printed_by(recorded_json("squeue.json"), parser)
    assert node_listing(queue) == ("scontrol", "show", "nodes")


def test_22_05_lists_its_nodes_with_sinfo():
    assert node_listing(recorded_json("squeue.json")) == ("sinfo",)


def test_a_job_of_24_11_ending_completing_is_ending_since_its_end():
    queue = as_printed_by(recorded_json("squeue.json"), 42)
    job = next(j for j in queue["jobs"] if j["job_id"] == 986)
    job["job_state"] = ["RUNNING", "COMPLETING"]
    job["end_time"] = no_val(1796155400)

    read = {s.job_id: s for s in squeue_jobs(queue)}["986"]

    assert read.ending_since == datetime.fromtimestamp(1796155400, UTC)


def test_a_data_parser_newer_than_any_known_is_refused_naming_the_release():
    queue = as_printed_by(recorded_json("squeue.json"), 43)
    queue["meta"]["plugin"]["data_parser"] = "data_parser/v0.0.44"
    queue["meta"]["slurm"]["release"] = "26.05.0"

    with pytest.raises(BackendError) as refused:
        squeue_jobs(queue)

    assert str(refused.value) == (
        "squeue --json: Slurm 26.05.0 prints data_parser v0.0.44, which this observer does not "
        "read (it reads v0.0.38 to v0.0.43: Slurm 22.05 to 25.05)"
    )


def test_a_field_of_a_known_release_in_another_shape_names_the_release_and_the_field():
    queue = as_printed_by(recorded_json("squeue.json"), 42)
    queue["jobs"][0]["job_state"] = "COMPLETED"  # 22.05's string where 24.11 prints a list
    del queue["jobs"][1]["submit_time"]

    with pytest.raises(BackendError, match=r"Slurm 24\.11\.0 \(data_parser v0\.0\.42\).*job_state"):
        squeue_jobs(queue)
    queue["jobs"][0]["job_state"] = ["COMPLETED"]
    with pytest.raises(BackendError, match=r"of Slurm 24\.11\.0 .*: no field 'submit_time'"):
        squeue_jobs(queue)


def test_warning_lines_before_the_json_are_passed_over():
    printed = (Path(__file__).parent / "slurm_output" / "squeue.json").read_text()
    warned = "squeue: warning: the MinJobAge of 300 is low\nslurm_load_jobs: retrying\n" + printed

    assert document(warned, "squeue --json") == json.loads(printed)


def test_a_document_cut_short_says_so_with_how_much_came():
    printed = (Path(__file__).parent / "slurm_output" / "squeue.json").read_text()

    with pytest.raises(
        ShapeError, match=r"squeue --json printed JSON cut short or broken after 500 bytes"
    ):
        document(printed[:500], "squeue --json")
    with pytest.raises(ShapeError, match=r"printed no JSON object \('slurm_load_jobs error"):
        document("slurm_load_jobs error: Unable to contact slurm controller\n", "squeue --json")


RECORDED = Path(__file__).parents[1] / "fixtures" / "slurm"


def _recorded(release: str) -> tuple[dict[str, str], dict[str, Any], str]:
    """The jobs record.sh submitted (id -> what it is), squeue --json and sacct --parsable2 as
    the real `release` printed them (tests/fixtures/slurm/README.md)."""
    lines = (RECORDED / release / "jobs.txt").read_text().splitlines()
    rows = [line.split() for line in lines if line and not line.startswith("#")]
    named = {job_id: name for name, job_id in rows}
    queue = json.loads((RECORDED / release / "squeue.json").read_text())
    return named, queue, (RECORDED / release / "sacct-parsable2.txt").read_text()


def _by_name(named: dict[str, str], jobs: list[JobStatus]) -> dict[str, tuple[object, ...]]:
    return {
        named[s.job_id]: (
            s.phase,
            s.reason,
            s.exit_code,
            s.gpus,
            len(s.nodes),
            s.ending_since is not None,
        )
        for s in jobs
        if s.job_id in named
    }


def test_the_same_jobs_read_alike_from_the_real_22_05_and_the_real_24_11():
    old_names, old_queue, old_sacct = _recorded("22.05")
    new_names, new_queue, new_sacct = _recorded("24.11")

    old, new = (
        _by_name(old_names, squeue_jobs(old_queue)),
        _by_name(new_names, squeue_jobs(new_queue)),
    )

    # 24.11 lists no ended job without --states=all; what both list reads the same.
    assert set(new) == {
        "gpu-running",
        "completing",
        "qos-limited",
        "wants-all",
        "behind",
        "held-array",
    }
    assert {name: old[name] for name in new} == new
    assert new["completing"][-1] and new["qos-limited"][1] == "QOSMaxGRESPerJob"
    old_ended = _by_name(old_names, list(parse_sacct(old_sacct).values()))
    new_ended = _by_name(new_names, list(parse_sacct(new_sacct).values()))
    for name in ("completed", "exit-3", "killed"):
        assert new_ended[name] == old_ended[name]


def test_the_real_24_11_lists_its_nodes_with_scontrol_and_they_read_as_22_05s():
    _, new_queue, _ = _recorded("24.11")
    listing = node_listing(new_queue)
    printed = "-".join(listing[1:])
    nodes = listed_nodes(
        json.loads((RECORDED / "24.11" / f"{listing[0]}-{printed}.json").read_text())
    )
    old = listed_nodes(json.loads((RECORDED / "22.05" / "sinfo.json").read_text()))

    assert [(n.name, n.pool, n.gpus_total) for n in nodes] == [
        (n.name, n.pool, n.gpus_total) for n in old
    ]
    assert {n.name: n.state for n in nodes} == {"n1": "mixed", "n2": "idle", "n3": "idle"}


@pytest.mark.parametrize("parser", RELEASES)
def test_a_pending_jobs_start_time_is_its_expected_start_unless_a_year_out(parser: int):
    printed = recorded_json("squeue.json")
    [held] = [j for j in printed["jobs"] if j["job_state"] == "PENDING"]
    submitted = held["submit_time"]
    estimates = {
        "in ten minutes": submitted + 600,
        "unset": 0,
        # slurmctld's placeholder for a job it cannot place: a year after a scheduling pass
        "placeholder": submitted - 1 + 365 * 86400,
    }
    read: dict[str, datetime | None] = {}
    for name, start in estimates.items():
        held["start_time"] = start
        [job] = [j for j in squeue_jobs(as_printed_by(printed, parser)) if j.job_id == "987"]
        read[name] = job.expected_start_at

    assert read == {
        "in ten minutes": datetime.fromtimestamp(submitted + 600, UTC),
        "unset": None,
        "placeholder": None,
    }
    running = [j for j in squeue_jobs(as_printed_by(printed, parser)) if j.phase.name == "RUNNING"]
    assert running and all(j.expected_start_at is None for j in running)


@pytest.mark.parametrize(
    "parser", [p for p in RELEASES if p >= 40]
)  # times {set, infinite, number}
def test_an_infinite_start_time_is_no_expected_start(parser: int):
    printed = as_printed_by(recorded_json("squeue.json"), parser)
    [held] = [j for j in printed["jobs"] if str(j["job_id"]) == "987"]
    held["start_time"] = {"set": True, "infinite": True, "number": 0}

    [job] = [j for j in squeue_jobs(printed) if j.job_id == "987"]

    assert job.expected_start_at is None
