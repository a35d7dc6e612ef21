"""`observer probe gpu-burn` as a probe job runs it: the real command line in a process (whose
loader finds the stand-in through LD_LIBRARY_PATH), on a machine with no CUDA driver (one line,
exit 69: "no GPU on the node") and against the stand-in libcuda.so.1, which records every driver
call and refuses what a driver would (a PTX image without .version/.target/.entry, an unknown
kernel name, bad launch parameters); a refused command line in this process."""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from observer.errors import NO_GPU_EXIT_CODE
from observer.workloads.gpu_burn import KERNEL_NAME, PTX
from tests.components import unavailable
from tests.support.cli import run_cli


def gpu_burn(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "observer.cli", "probe", "gpu-burn", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def with_stand_in(library_dir: Path, log: Path, **knobs: str) -> dict[str, str]:
    return {"LD_LIBRARY_PATH": str(library_dir), "FAKE_CUDA_LOG": str(log), **knobs}


def calls(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text().splitlines()]


def test_without_libcuda_it_says_so_in_one_line_and_exits_69() -> None:
    if ctypes.util.find_library("cuda"):
        pytest.skip("this machine has a CUDA driver")

    done = gpu_burn("--seconds", "5", "--memory-gib", "1")

    assert done.returncode == NO_GPU_EXIT_CODE == 69
    assert done.stderr == (
        "observer probe gpu-burn: no libcuda.so.1: this node has no NVIDIA driver, or the "
        "container was not started with the NVIDIA runtime\n"
    )
    assert done.stdout == ""


def test_a_driver_that_sees_no_device_is_no_gpu_too(fake_cuda_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls"

    done = gpu_burn(
        "--seconds", "5", "--memory-gib", "1",
        env=with_stand_in(fake_cuda_dir, log, FAKE_CUDA_DEVICES="0"),
    )  # fmt: skip

    assert done.returncode == 69
    assert done.stderr == (
        "observer probe gpu-burn: no CUDA device visible: cuInit failed: "
        "CUDA_ERROR_NO_DEVICE (100)\n"
    )
    assert calls(log) == ["cuInit"]


def test_a_device_the_job_was_not_given_is_no_gpu(fake_cuda_dir: Path, tmp_path: Path) -> None:
    done = gpu_burn(
        "--seconds", "1", "--memory-gib", "1", "--device", "3",
        env=with_stand_in(fake_cuda_dir, tmp_path / "calls", FAKE_CUDA_DEVICES="1"),
    )  # fmt: skip

    assert done.returncode == 69
    assert done.stderr.startswith("observer probe gpu-burn: no CUDA device visible: device 3: ")
    assert "CUDA_ERROR_INVALID_DEVICE (101)" in done.stderr
    assert done.stderr.count("\n") == 1


def test_more_memory_than_the_gpu_has_is_out_of_memory(fake_cuda_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls"

    done = gpu_burn(
        "--seconds", "1", "--memory-gib", "8",
        env=with_stand_in(fake_cuda_dir, log, FAKE_CUDA_MEMORY_BYTES=str(4 * 2**30)),
    )  # fmt: skip

    assert done.returncode == 71
    assert done.stderr == (
        "observer probe gpu-burn: out of GPU memory: cuMemAlloc_v2 of 8.0 GiB failed: "
        "CUDA_ERROR_OUT_OF_MEMORY (2)\n"
    )
    # the context it made is still destroyed
    assert calls(log) == [
        "cuInit",
        "cuDeviceGet",
        "cuCtxCreate_v2",
        "cuMemAlloc_v2",
        "cuCtxDestroy_v2",
    ]


def test_a_burn_makes_the_driver_calls_in_order_with_valid_arguments(
    fake_cuda_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "calls"

    done = gpu_burn(
        "--seconds", "1", "--memory-gib", "2", env=with_stand_in(fake_cuda_dir, log)
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    lines = log.read_text().splitlines()
    names = calls(log)
    launches = names.count("cuLaunchKernel")
    assert launches >= 2
    assert names == [
        "cuInit",
        "cuDeviceGet",
        "cuCtxCreate_v2",
        "cuMemAlloc_v2",
        "cuModuleLoadData",
        "cuModuleGetFunction",
        *["cuLaunchKernel"] * launches,
        "cuMemFree_v2",
        "cuModuleUnload",
        "cuCtxDestroy_v2",
    ]
    assert "cuCtxCreate_v2 flags=4 device=0" in lines  # CU_CTX_SCHED_BLOCKING_SYNC: no spinning
    assert f"cuMemAlloc_v2 bytes={2 * 2**30}" in lines
    assert f"cuModuleLoadData bytes={len(PTX)} valid=1 entry={KERNEL_NAME}" in lines
    assert f"cuModuleGetFunction name={KERNEL_NAME}" in lines
    assert all("params_ok=1" in line for line in lines if line.startswith("cuLaunchKernel"))
    assert "cuMemFree_v2 ok=1" in lines and "cuCtxDestroy_v2 ok=1" in lines
    assert re.fullmatch(
        rf"gpu-burn: device 0, 2 GiB held, {launches} launches, busy \d+\.\d% of \d+\.\d s\n",
        done.stdout,
    )


def test_the_duty_cycle_follows_the_target_utilisation(fake_cuda_dir: Path, tmp_path: Path) -> None:
    env = with_stand_in(fake_cuda_dir, tmp_path / "calls")
    full = gpu_burn("--seconds", "2", "--memory-gib", "1", env=env)
    half = gpu_burn("--seconds", "2", "--memory-gib", "1", "--utilization", "50", env=env)

    def duty(done: subprocess.CompletedProcess[str]) -> float:
        found = re.search(r"busy (\d+\.\d)%", done.stdout)
        assert found, done.stderr
        return float(found[1])

    assert duty(full) > 90
    assert 30 < duty(half) < 70


def test_the_kernel_is_ptx_the_driver_can_jit(tmp_path: Path) -> None:
    assert re.search(r"^\.version \d+\.\d+$", PTX, flags=re.MULTILINE)
    assert re.search(r"^\.target sm_\d+$", PTX, flags=re.MULTILINE)
    assert re.search(rf"^\.visible \.entry {KERNEL_NAME}\(", PTX, flags=re.MULTILINE)
    ptxas = _ptxas()
    source = tmp_path / "burn.ptx"
    source.write_text(PTX)
    for arch in ("sm_80", "sm_90"):  # A100, H100/H200
        done = subprocess.run(
            [ptxas, f"-arch={arch}", str(source), "-o", str(tmp_path / f"{arch}.cubin")],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr


def _ptxas() -> str:
    """The toolkit's assembler: on PATH, or from the dev extra's nvidia-cuda-nvcc-cu12 wheel."""
    if found := shutil.which("ptxas"):
        return found
    try:
        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        unavailable("ptxas: neither on PATH nor from nvidia-cuda-nvcc-cu12 (the dev extra)")
    wheel = Path(spec.submodule_search_locations[0]) / "bin" / "ptxas"
    if not wheel.is_file():
        unavailable(f"ptxas: nvidia-cuda-nvcc-cu12 has no {wheel}")
    return str(wheel)


def test_a_utilisation_out_of_range_is_refused_by_the_parser() -> None:
    done = run_cli("probe", "gpu-burn", "--seconds", "1", "--memory-gib", "1", "--utilization", "0")

    assert done.exit_code == 2
    assert "--utilization: must be above 0 and at most 100, not 0" in done.stderr
