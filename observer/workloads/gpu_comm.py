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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from observer.errors import GpuCommunicationError, WorkloadError
from observer.workloads.cuda import CudaDevices, PeerCopy

GB = 1e9
# A copy between two GPUs of a node over their direct path, in GB/s one way, by the first
# model name CUDA's device name contains: what a healthy pair of that model reaches with
# cuMemcpyPeerAsync (NVLink 4 on H100/H200 SXM: 450 GB/s a direction on paper; 350 is what
# a healthy pair measures comfortably above; A100 SXM's NVLink 3: 300 on paper; the PCIe
# cards' peer copies go over PCIe Gen4/Gen5). A model not listed is measured, not judged,
# unless --expect-gbps names its figure.
EXPECTED_GBPS: Mapping[str, float] = {
    "H100 PCIe": 40.0,
    "H100 NVL": 40.0,
    "H200 NVL": 40.0,
    "H100": 350.0,
    "H200": 350.0,
    "A100-PCIE": 20.0,
    "A100": 230.0,
}


@dataclass(frozen=True, slots=True)
class Comm:
    size_bytes: int = 256 * 2**20
    repeats: int = 10
    expect_gbps: float | None = None  # None: by model (EXPECTED_GBPS)
    min_fraction: float = 0.75
    require_peer_access: bool = True


@dataclass(frozen=True, slots=True)
class PairResult:
    copy: PeerCopy
    expected_gbps: float | None  # None: no figure for this model, measured only
    failure: str | None  # why the pair fails, in words; None: it passed

    @property
    def gbps(self) -> float:
        return self.copy.bytes_per_second / GB


def expected_gbps(model: str) -> float | None:
    return next((gbps for name, gbps in EXPECTED_GBPS.items() if name in model), None)


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
        expected = work.expect_gbps if work.expect_gbps is not None else expected_gbps(model)
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
