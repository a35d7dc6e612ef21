"""MIG through the real NVML adapter, over the stand-in libnvidia-ml.so.1: a GPU in MIG mode
is read with its MIG devices, and its processes each name the instance they run on."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from observer.clock import ManualClock
from observer.domain import GpuProcess, MigInstance, ReadError, ReadErrorKind
from observer.gpu.nvml import NvmlGpuBackend
from tests.gpu.fake_nvml import FakeMigDevice, FakeNvml, FakeNvmlGpu

pytestmark = pytest.mark.fake_nvml

GiB = 2**30
NOTHING_SKIPPED: frozenset[str] = frozenset()
# An H200 split for inference tenants: a 3g.71gb slice and two 1g.18gb ones, one of them idle.
INFERENCE = (
    FakeMigDevice(1, 0, 40 * GiB, 71 * GiB, processes=((5100, 39 * GiB), (5101, GiB))),
    FakeMigDevice(7, 0, 9 * GiB, 18 * GiB, processes=((5200, 8 * GiB),)),
    FakeMigDevice(8, 0, 0, 18 * GiB),
)


@pytest.fixture
def backend(fake_nvml_state: FakeNvml) -> Iterator[NvmlGpuBackend]:
    backend = NvmlGpuBackend(
        ManualClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC)), library_path=fake_nvml_state.library
    )
    yield backend
    backend.close()


def test_a_gpu_in_mig_mode_is_read_with_each_mig_device(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(), FakeNvmlGpu(mig_mode=True, mig=INFERENCE)])
    backend.open()

    whole, split = backend.sample(0, NOTHING_SKIPPED), backend.sample(1, NOTHING_SKIPPED)

    assert whole.mig_instances is None
    assert split.errors == ()
    assert split.mig_instances == tuple(
        MigInstance(
            uuid=device.uuid(1, slot),
            gpu_instance_id=device.gpu_instance_id,
            compute_instance_id=device.compute_instance_id,
            memory_used_bytes=device.memory_used_bytes,
            memory_total_bytes=device.memory_total_bytes,
        )
        for slot, device in enumerate(INFERENCE)
    )
    # Each process with the memory its MIG device counts, which the GPU's own list lacks.
    assert split.processes == tuple(
        GpuProcess(pid, used, device.uuid(1, slot))
        for slot, device in enumerate(INFERENCE)
        for pid, used in device.processes
    )


def test_mig_instance_uuids_are_those_of_the_mig_handles(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(mig_mode=True, mig=INFERENCE[:1])])
    backend.open()

    [instance] = backend.sample(0, NOTHING_SKIPPED).mig_instances or ()

    assert instance.uuid.startswith("MIG-")
    assert instance.uuid != backend.identify(0).uuid


def test_mig_mode_with_no_mig_device_yet_is_an_empty_partition(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(mig_mode=True)])
    backend.open()

    sample = backend.sample(0, NOTHING_SKIPPED)

    assert (sample.mig_instances, sample.processes, sample.errors) == ((), (), ())


def test_a_gpu_without_mig_says_so_once_and_is_not_asked_again(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(unsupported=frozenset({"mig"}), processes=((42, GiB),))])
    backend.open()

    first = backend.sample(0, NOTHING_SKIPPED)
    second = backend.sample(0, frozenset({"mig"}))

    assert first.errors == (ReadError("mig", ReadErrorKind.NOT_SUPPORTED, "Not Supported"),)
    assert first.processes == second.processes == (GpuProcess(42, GiB),)
    assert second.mig_instances is None
    assert fake_nvml_state.calls()["nvmlDeviceGetMigMode"] == 1


def test_a_reconfigured_gpu_is_read_as_it_is_now(
    backend: NvmlGpuBackend, fake_nvml_state: FakeNvml
) -> None:
    fake_nvml_state.set([FakeNvmlGpu(mig_mode=True, mig=INFERENCE)])
    backend.open()
    before = backend.sample(0, NOTHING_SKIPPED)

    merged = dataclasses.replace(INFERENCE[1], gpu_instance_id=9, memory_total_bytes=36 * GiB)
    fake_nvml_state.set([FakeNvmlGpu(mig_mode=True, mig=(INFERENCE[0], merged))])
    after = backend.sample(0, NOTHING_SKIPPED)

    assert len(before.mig_instances or ()) == len(INFERENCE)
    assert [(m.gpu_instance_id, m.memory_total_bytes) for m in after.mig_instances or ()] == [
        (INFERENCE[0].gpu_instance_id, INFERENCE[0].memory_total_bytes),
        (9, 36 * GiB),
    ]
