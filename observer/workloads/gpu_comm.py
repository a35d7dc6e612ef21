"""`observer probe gpu-comm`: whether the GPUs a job holds can talk to each other, and how
fast. Every ordered pair of the job's devices copies a buffer from one to the other through
the CUDA driver API (cuda.py: peer access enabled where the driver allows it, the copies
timed by events), and each pair's rate is judged against the figure expected of the GPU
model's link. A pair the driver gives no direct path (peer access disabled, a broken NVLink)
or that copies at under `min_fraction` of the expected rate is a multi-GPU communication
failure: the program names the pair and what it measured, and ends with
GpuCommunicationError's exit code."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from observer.errors import GpuCommunicationError, WorkloadError
from observer.probes.catalog import GPU_COMM_EXPECTED_GBPS
from observer.workloads.cuda import CudaDevices, PeerCopy

GB = 1e9
# The built-in table (the catalog's, which the probe's settings replace) as the command line
# gives a table: (model name, GB/s one way) pairs.
EXPECTED_GBPS: tuple[tuple[str, float], ...] = tuple(GPU_COMM_EXPECTED_GBPS.items())


@dataclass(frozen=True, slots=True)
class Comm:
    size_bytes: int = 256 * 2**20
    repeats: int = 10
    expect_gbps: float | None = None  # None: by model, from `by_model`
    min_fraction: float = 0.75
    require_peer_access: bool = True
    by_model: tuple[tuple[str, float], ...] = EXPECTED_GBPS


@dataclass(frozen=True, slots=True)
class PairResult:
    copy: PeerCopy
    expected_gbps: float | None  # None: no figure for this model, measured only
    failure: str | None  # why the pair fails, in words; None: it passed

    @property
    def gbps(self) -> float:
        return self.copy.bytes_per_second / GB


def expected_gbps(
    model: str, by_model: Sequence[tuple[str, float]] = EXPECTED_GBPS
) -> float | None:
    """The rate of the longest model name `model` (CUDA's device name) contains: "H100 PCIe"
    before "H100", whatever order a table lists them in."""
    named = [(len(name), gbps) for name, gbps in by_model if name in model]
    return max(named)[1] if named else None


def judge(copy: PeerCopy, expected: float | None, work: Comm) -> PairResult:
    pair = f"GPU {copy.source} -> GPU {copy.target}"
    gbps = copy.bytes_per_second / GB
    if work.require_peer_access and not copy.peer_access:
        failure = f"{pair}: no peer-to-peer path (the driver refuses peer access); {gbps:.1f} GB/s"
        return PairResult(copy, expected, failure)
    if expected is not None and gbps < work.min_fraction * expected:
        failure = (
            f"{pair}: {gbps:.1f} GB/s, under {work.min_fraction:.0%} of the {expected:g} GB/s "
            "expected"
        )
        return PairResult(copy, expected, failure)
    return PairResult(copy, expected, None)


def communicate(
    work: Comm,
    open_devices: Callable[[], CudaDevices] = CudaDevices.open,
    report: Callable[[PairResult], None] = lambda _: None,
) -> Sequence[PairResult]:
    """Every ordered pair of the devices the job sees, each `report`ed as it is measured.
    Raises WorkloadError with fewer than two devices (the probe was given one GPU: nothing
    to judge), GpuCommunicationError naming every failing pair."""
    devices = open_devices()
    try:
        if devices.count < 2:
            raise WorkloadError(
                f"gpu-comm needs at least two GPUs; the job sees {devices.count} "
                "(CUDA_VISIBLE_DEVICES or the job's GPU allocation decides which are seen)"
            )
        model = devices.name(0)
        expected = (
            work.expect_gbps
            if work.expect_gbps is not None
            else expected_gbps(model, work.by_model)
        )
        results = []
        for source, target in itertools.permutations(range(devices.count), 2):
            copied = devices.copy(source, target, work.size_bytes, work.repeats)
            results.append(judge(copied, expected, work))
            report(results[-1])
    finally:
        devices.close()
    failures = [r.failure for r in results if r.failure]
    if failures:
        raise GpuCommunicationError(
            f"multi-GPU communication failed on {len(failures)} of {len(results)} pairs "
            f"({model}): " + "; ".join(failures)
        )
    return results
