"""GPM through the real NVML adapter over the stand-in libnvidia-ml.so.1: what a GPU's SMs,
tensor pipes and DRAM did between two ticks, or that the GPU cannot say."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from observer.agent.sampler import Sampler
from observer.clock import ManualClock
from observer.domain import GpmActivity, GpmState, ReadError, ReadErrorKind
from observer.gpu.backend import GPM_CALL
from observer.gpu.nvml import NvmlGpuBackend
from observer.metrics import AgentMetrics
from tests.gpu.fake_nvml import FakeNvml, FakeNvmlGpu

pytestmark = pytest.mark.fake_nvml

TRAINING = FakeNvmlGpu(
    utilization_gpu_percent=100,
    sm_active_percent=37,
    sm_occupancy_percent=21,
    tensor_active_percent=12,
    dram_active_percent=64,
)
# "Busy" to utilization.gpu, one warp spinning: what GPM tells apart.
SPINNING = dataclasses.replace(
    TRAINING,
    sm_active_percent=1,
    sm_occupancy_percent=0,
    tensor_active_percent=0,
    dram_active_percent=0,
)
BEFORE_HOPPER = FakeNvmlGpu(utilization_gpu_percent=100, unsupported=frozenset({GPM_CALL}))


@pytest.fixture
def backend(fake_nvml_state: FakeNvml) -> Iterator[NvmlGpuBackend]:
    backend = NvmlGpuBackend(
        ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC)), fake_nvml_state.library
    )
    yield backend
    backend.close()


def configured(gpu: FakeNvmlGpu) -> object:
    """The ratios the stand-in was told, as `ratios` writes them (to a float's rounding)."""
    percents = (
        gpu.sm_active_percent,
        gpu.sm_occupancy_percent,
        gpu.tensor_active_percent,
        gpu.dram_active_percent,
    )
    return pytest.approx(tuple(p / 100 for p in percents))


def ratios(answer: object) -> object:
    """An activity as the tuple of its ratios; any other answer as it is."""
    return dataclasses.astuple(answer) if isinstance(answer, GpmActivity) else answer


def test_a_gpu_with_gpm_reports_its_activity_since_the_previous_read(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([TRAINING, SPINNING])
    backend.open()

    assert [backend.activity(i) for i in (0, 1)] == [None, None]  # one sample: no interval yet
    assert [ratios(backend.activity(i)) for i in (0, 1)] == [
        configured(TRAINING),
        configured(SPINNING),
    ]


def test_each_read_covers_only_the_interval_since_the_one_before(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([TRAINING])
    backend.open()
    backend.activity(0)

    fake_nvml_state.set([SPINNING])
    straddling = backend.activity(0)  # training, then spinning, within one interval
    after = backend.activity(0)

    assert isinstance(straddling, GpmActivity)
    assert SPINNING.sm_active_percent / 100 < straddling.sm_active_ratio
    assert straddling.sm_active_ratio < TRAINING.sm_active_percent / 100
    assert ratios(after) == configured(SPINNING)


def test_a_gpu_without_gpm_is_not_supported_never_zero_and_asked_once(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([BEFORE_HOPPER])
    backend.open()

    assert [backend.activity(0) for _ in range(3)] == [GpmState.NOT_SUPPORTED] * 3
    calls = fake_nvml_state.calls()
    assert calls["nvmlGpmQueryDeviceSupport"] == 1
    assert calls["nvmlGpmSampleAlloc"] == calls["nvmlGpmSampleGet"] == 0


def test_a_lost_gpu_is_a_read_error_and_starts_a_new_interval_when_it_returns(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([TRAINING])
    backend.open()
    backend.activity(0)

    fake_nvml_state.set([dataclasses.replace(TRAINING, lost=True)])
    assert backend.activity(0) == ReadError(GPM_CALL, ReadErrorKind.GPU_LOST, "GPU is lost")

    fake_nvml_state.set([TRAINING])
    assert backend.activity(0) is None  # its counters restarted: no earlier sample holds
    assert ratios(backend.activity(0)) == configured(TRAINING)


def test_every_sample_buffer_is_freed(backend: NvmlGpuBackend, fake_nvml_state: FakeNvml) -> None:
    fake_nvml_state.set([TRAINING, TRAINING])
    backend.open()
    for _ in range(2):
        backend.activity(0)
        backend.activity(1)
    fake_nvml_state.set([TRAINING, dataclasses.replace(TRAINING, lost=True)])
    backend.activity(1)

    backend.close()

    calls = fake_nvml_state.calls()
    assert calls["nvmlGpmSampleAlloc"] == 4  # two per GPU
    assert calls["nvmlGpmSampleFree"] == 4


def test_each_tick_carries_every_gpus_activity_or_why_it_has_none(
    fake_nvml_state: FakeNvml,
) -> None:
    fake_nvml_state.set([TRAINING, BEFORE_HOPPER])
    clock = ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    sampler = Sampler(
        NvmlGpuBackend(clock, fake_nvml_state.library),
        clock,
        AgentMetrics(CollectorRegistry()),
        counters_interval_seconds=10,
    )

    ticks = []
    for _ in range(2):
        ticks.append([ratios(gpu.activity) for gpu in sampler.tick().gpus])
        clock.advance(5)
    sampler.close()

    assert ticks == [
        [None, GpmState.NOT_SUPPORTED],
        [configured(TRAINING), GpmState.NOT_SUPPORTED],
    ]
