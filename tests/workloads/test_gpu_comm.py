"""`observer probe gpu-comm` as a probe job runs it: the real command line in a process whose
loader finds the stand-in libcuda.so.1, which gives each device a context, answers peer
access and times peer copies by their bytes and a configured bandwidth per pair (a pair can
be made slow or given no direct path); every ordered pair is measured and judged against the
figure for the GPU model, and a failing pair is named with what it measured."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from observer.domain import JobRequest
from observer.errors import GpuCommunicationError
from observer.probes.catalog import GPU_COMM_EXPECTED_GBPS as EXPECTED_GBPS
from observer.probes.programs import probe_arguments
from observer.settings import Settings
from observer.workloads.gpu_comm import expected_gbps

PAIR = re.compile(
    r"^gpu-comm: GPU (\d) -> GPU (\d): (peer|no peer access), ([\d.]+) GB/s \((.*)\): (ok|FAILED)$"
)


def gpu_comm(library_dir: Path, *args: str, **knobs: str) -> subprocess.CompletedProcess[str]:
    return observer(library_dir, "probe", "gpu-comm", "--size-mib", "64", *args, **knobs)


def observer(library_dir: Path, *args: str, **knobs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "observer.cli", *args],
        env={**os.environ, "LD_LIBRARY_PATH": str(library_dir), **knobs},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def pairs(stdout: str) -> dict[tuple[int, int], tuple[str, float, str]]:
    found = {}
    for line in stdout.splitlines():
        match = PAIR.match(line)
        assert match, line
        found[(int(match[1]), int(match[2]))] = (match[3], float(match[4]), match[6])
    return found


def test_every_pair_of_a_healthy_node_copies_at_its_link_rate(fake_cuda_dir: Path) -> None:
    done = gpu_comm(fake_cuda_dir, FAKE_CUDA_DEVICES="4", FAKE_CUDA_PEER_GBPS="380")

    assert done.returncode == 0, done.stderr
    measured = pairs(done.stdout)
    assert sorted(measured) == [(a, b) for a in range(4) for b in range(4) if a != b]
    assert {m[0] for m in measured.values()} == {"peer"}
    # 64 MiB x 10 timed copies at 380 GB/s: the rate comes back from the event timing
    assert all(m[1] == pytest.approx(380, rel=0.01) for m in measured.values())
    assert {m[2] for m in measured.values()} == {"ok"}
    assert done.stderr == ""


def test_a_pair_at_half_its_rate_fails_naming_the_pair_both_ways(fake_cuda_dir: Path) -> None:
    done = gpu_comm(fake_cuda_dir, FAKE_CUDA_DEVICES="4", FAKE_CUDA_SLOW_PAIR="1-3")

    assert done.returncode == GpuCommunicationError.exit_code == 72
    measured = pairs(done.stdout)
    failed = sorted(pair for pair, m in measured.items() if m[2] == "FAILED")
    assert failed == [(1, 3), (3, 1)]
    assert measured[(1, 3)][1] == pytest.approx(190, rel=0.01)
    assert done.stderr.count("\n") == 1
    assert "failed on 2 of 12 pairs" in done.stderr
    assert "GPU 1 -> GPU 3: 190.0 GB/s, under 75% of the 350 GB/s expected" in done.stderr


def test_a_pair_without_a_direct_path_fails_unless_allowed(fake_cuda_dir: Path) -> None:
    refused = gpu_comm(fake_cuda_dir, FAKE_CUDA_DEVICES="2", FAKE_CUDA_NO_PEER="0-1")
    allowed = gpu_comm(
        fake_cuda_dir, "--allow-no-peer", "--expect-gbps", "15",
        FAKE_CUDA_DEVICES="2", FAKE_CUDA_NO_PEER="0-1", FAKE_CUDA_STAGED_GBPS="20",
    )  # fmt: skip

    assert refused.returncode == 72
    assert "GPU 0 -> GPU 1: no peer-to-peer path" in refused.stderr
    assert {m[0] for m in pairs(refused.stdout).values()} == {"no peer access"}
    assert allowed.returncode == 0, allowed.stderr
    assert {m[2] for m in pairs(allowed.stdout).values()} == {"ok"}


def test_the_expected_rate_can_be_given_for_a_model_not_in_the_table(fake_cuda_dir: Path) -> None:
    done = gpu_comm(
        fake_cuda_dir, "--expect-gbps", "500", "--min-percent", "80",
        FAKE_CUDA_DEVICES="2", FAKE_CUDA_PEER_GBPS="380",
    )  # fmt: skip

    assert done.returncode == 72
    assert "380.0 GB/s, under 80% of the 500 GB/s expected" in done.stderr


def test_one_gpu_is_nothing_to_judge_and_no_gpu_is_no_gpu(fake_cuda_dir: Path) -> None:
    one = gpu_comm(fake_cuda_dir, FAKE_CUDA_DEVICES="1")
    none = gpu_comm(fake_cuda_dir, FAKE_CUDA_DEVICES="0")

    assert one.returncode == 1
    assert one.stderr == (
        "observer probe gpu-comm: gpu-comm needs at least two GPUs; the job sees 1 "
        "(CUDA_VISIBLE_DEVICES or the job's GPU allocation decides which are seen)\n"
    )
    assert none.returncode == 69
    assert "no CUDA device visible" in none.stderr


def test_every_context_and_buffer_is_given_back(fake_cuda_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls"

    done = gpu_comm(fake_cuda_dir, FAKE_CUDA_DEVICES="3", FAKE_CUDA_LOG=str(log))

    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    allocated = sum(line.startswith("cuMemAlloc_v2 bytes=") for line in lines)
    assert allocated == 2 * 6  # a source and a target buffer for each ordered pair
    assert lines.count("cuMemFree_v2 ok=1") == allocated
    assert lines.count("cuEventDestroy_v2 ok=1") == 2 * 6
    assert lines.count("cuCtxDestroy_v2 ok=1") == 3
    # one untimed copy and ten timed ones per pair, each of the size asked
    assert sum(line.startswith("cuMemcpyPeerAsync") for line in lines) == 11 * 6
    assert all(f"bytes={64 * 2**20}" in line for line in lines if "cuMemcpyPeerAsync" in line)


def test_the_expected_rate_is_found_by_the_most_specific_model_name() -> None:
    assert expected_gbps("NVIDIA H100 PCIe", [("H100", 350), ("H100 PCIe", 40)]) == 40
    assert expected_gbps("NVIDIA H100 80GB HBM3") == EXPECTED_GBPS["H100"]
    assert expected_gbps("NVIDIA H100 PCIe") == EXPECTED_GBPS["H100 PCIe"]
    assert expected_gbps("NVIDIA H200 NVL") == EXPECTED_GBPS["H200 NVL"]
    assert expected_gbps("NVIDIA GeForce RTX 4090") is None


def test_the_expected_rates_are_settings_passed_on_the_probes_command_line_and_honoured(
    fake_cuda_dir: Path,
) -> None:
    """The stand-in's devices are "NVIDIA H200 (stand-in)": a pair at 380 GB/s passes the
    built-in 350, and fails a site's 600 for its H200s (theirs measured faster)."""
    settings = Settings.model_validate(
        {"controller": {"probes": {"gpu-comm": {"expected_gbps": {"H200": 600, "A100": 230}}}}}
    )
    spec = settings.controller.probe_catalog()["gpu-comm"]
    args = probe_arguments(JobRequest("r", spec.name, "t", None, spec.workload))
    assert args == ["probe", "gpu-comm", "--expect-model", "H200=600", "--expect-model", "A100=230"]

    judged = observer(fake_cuda_dir, *args, FAKE_CUDA_DEVICES="2", FAKE_CUDA_PEER_GBPS="380")
    built_in = gpu_comm(fake_cuda_dir, FAKE_CUDA_DEVICES="2", FAKE_CUDA_PEER_GBPS="380")

    assert judged.returncode == GpuCommunicationError.exit_code, judged.stderr
    assert "GPU 0 -> GPU 1: 380.0 GB/s, under 75% of the 600 GB/s expected" in judged.stderr
    assert built_in.returncode == 0, built_in.stderr
    assert {m[2] for m in pairs(built_in.stdout).values()} == {"ok"}


def test_an_expected_rate_that_is_no_rate_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="expected_gbps"):
        Settings.model_validate(
            {"controller": {"probes": {"gpu-comm": {"expected_gbps": {"H200": 0}}}}}
        )
