"""The agent's GPM series, from the real NVML adapter over the stand-in libnvidia-ml.so.1:
each GPU's SM, tensor and DRAM activity since the previous tick, and which GPUs cannot say."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.clock import ManualClock
from observer.gpu.backend import GPM_CALL
from observer.gpu.nvml import NvmlGpuBackend
from observer.metrics import AgentMetrics, GpuCollector
from observer.ownership.fake import FakeHost
from observer.settings.detectors import NodeLeakSettings
from tests.gpu import fake_nvml

pytestmark = pytest.mark.fake_nvml

RATIOS = (
    "observer_gpu_sm_active_ratio",
    "observer_gpu_sm_occupancy_ratio",
    "observer_gpu_tensor_active_ratio",
    "observer_gpu_dram_active_ratio",
)
# Busy to utilization.gpu on both; only GPM says one is a spinning warp.
TRAINING = fake_nvml.FakeNvmlGpu(
    utilization_gpu_percent=100,
    sm_active_percent=93,
    sm_occupancy_percent=48,
    tensor_active_percent=61,
    dram_active_percent=35,
)
SPINNING = fake_nvml.FakeNvmlGpu(utilization_gpu_percent=100, sm_active_percent=1)
BEFORE_HOPPER = fake_nvml.FakeNvmlGpu(
    utilization_gpu_percent=100, unsupported=frozenset({GPM_CALL})
)


def series(registry: CollectorRegistry, gpu: int, names: tuple[str, ...]) -> list[float | None]:
    labels = {"gpu": str(gpu), "uuid": f"GPU-00000000-0000-0000-0000-{gpu:012d}"}
    return [registry.get_sample_value(name, labels) for name in names]


def test_gpm_series_show_what_utilisation_hides_and_name_the_gpus_without_gpm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvml = fake_nvml.install(fake_nvml.require_library(), tmp_path, monkeypatch)
    nvml.set([TRAINING, SPINNING, BEFORE_HOPPER])
    clock = ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    registry = CollectorRegistry()
    metrics = AgentMetrics(registry)
    host = FakeHost()
    agent = NodeAgent(
        "n1",
        Sampler(NvmlGpuBackend(clock, nvml.library), clock, metrics, counters_interval_seconds=10),
        Attributor(host, host),
        NodeLeakSettings(),
        clock,
        metrics,
    )
    registry.register(GpuCollector(agent.snapshot))
    supported = ("observer_gpu_gpm_supported",)

    agent.tick()
    first = [series(registry, gpu, (*RATIOS, *supported)) for gpu in range(3)]
    clock.advance(5)
    agent.tick()
    agent.close()

    # The first tick takes each GPU's first sample: no interval to report on yet.
    assert first[:2] == [[None] * 5] * 2
    assert first[2] == [None, None, None, None, 0.0]
    assert series(registry, 0, RATIOS) == pytest.approx([0.93, 0.48, 0.61, 0.35])
    assert series(registry, 1, RATIOS) == pytest.approx([0.01, 0.0, 0.0, 0.0])
    assert series(registry, 2, RATIOS) == [None] * 4  # never a 0
    assert [series(registry, gpu, supported) for gpu in range(3)] == [[1.0], [1.0], [0.0]]
    assert series(registry, 1, ("observer_gpu_utilization_ratio",)) == [1.0]
