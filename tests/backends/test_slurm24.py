"""The real Slurm 24.11 of deploy/local/infra/slurm24-up.sh answers as 24.11 does."""

from __future__ import annotations

import json

import pytest

from tests.backends.slurm24_harness import Slurm24


@pytest.mark.slurm24
def test_squeue_json_names_release_24_11_and_data_parser_v0_0_42(slurm24: Slurm24):
    job_id = slurm24.cli("sbatch", "--parsable", "--output=/dev/null", "--wrap", "sleep 1").strip()

    # 24.11 lists an ended job only when asked for every state
    document = json.loads(slurm24.cli("squeue", "--json", "--states=all", f"--jobs={job_id}"))

    assert [job["job_id"] for job in document["jobs"]] == [int(job_id)]
    version = document["meta"]["slurm"]["version"]
    assert (version["major"], version["minor"]) == ("24", "11")
    assert document["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.42"
