"""bench/device_check.sh, the one command a GPU machine runs, kept working on the stand-ins:
the burn runs on the stand-in libcuda.so.1 with the real agent beside it, which reads GPU 0
through the real pynvml adapter over the stand-in libnvidia-ml.so.1 and lists the burn's pid;
gpu-comm copies between every pair of the GPUs present and its figures come back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu import fake_nvml

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.fake_nvml
def test_the_device_check_runs_on_the_stand_ins_and_the_agent_sees_the_burn() -> None:
    fake_nvml.require_library()

    done = subprocess.run(
        ["bash", str(REPO / "bench" / "device_check.sh"), "--stand-in", "--seconds", "6"],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["library"] == "stand-in"
    assert [g["index"] for g in result["device"]["gpus"]] == [0, 1]
    burn = result["burn"]
    assert burn["exit_code"] == 0
    assert "busy" in burn["burn_says"]
    assert burn["agent_attributed_pid"] is True
    assert burn["agent_used_memory_bytes"] == 2**30  # what the burn's GPU lists for its pid
    assert burn["utilization_gpu_percent"]["samples"] >= 1
    assert burn["sm_active_ratio"]["p50"] == pytest.approx(0.93)  # what the stand-in was told
    assert 0 <= burn["cpu_seconds_per_gpu_second"] < 1
    assert result["sampling"]["gpus"] == 2 and result["sampling"]["observer_us_per_gpu"] > 0
    assert result["sampling"]["gpm"]["observer_us_per_gpu"] > 0
    assert result["xid"] == {"0": "registered", "1": "registered"}
    comm = result["gpu_comm"]
    assert comm["exit_code"] == 0 and comm["failure"] is None
    assert [(p["source"], p["target"]) for p in comm["pairs"]] == [(0, 1), (1, 0)]
    assert {(p["peer_access"], p["gbps"], p["expected_gbps"], p["ok"]) for p in comm["pairs"]} == {
        (True, 380.0, 350.0, True)  # the stand-in's rate, judged against an H200's
    }
    assert result["mig"]["0"] == {"mode": "disabled"}
    split = result["mig"]["1"]  # the stand-in's GPU 1, in MIG mode with two MIG devices
    assert split["mode"] == "enabled"
    assert [m["gpu_instance_id"] for m in split["instances"]] == [7, 8]
    assert all(m["uuid"].startswith("MIG-") for m in split["instances"])
    assert split["sample_us"]["with_mig"] > 0 and split["sample_us"]["without_mig"] > 0
