"""The NVML adapter's MIG read (observer/gpu/nvml.py makes it as the call "mig"): whether a
GPU is in MIG mode and, when it is, its MIG devices, each through a handle of its own: UUID,
GPU and compute instance ids, memory, compute processes.

In MIG mode NVML lists the GPU's processes without their memory (it is the instances', not the
GPU's); each MIG device lists its own with it. A GPU's processes are then its instances', each
naming its instance, with any the instances did not list (one that started between the calls)
as the GPU listed them."""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

from observer.domain import GpuProcess, MigInstance

Handle = pynvml.c_nvmlDevice_t
_NOT_AVAILABLE = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE in an unsigned long long


@dataclass(frozen=True, slots=True)
class MigReading:
    instances: tuple[MigInstance, ...]
    processes: tuple[GpuProcess, ...]  # every instance's, each naming its instance


def used_bytes(value: int | None) -> int | None:
    # pynvml turns NVML_VALUE_NOT_AVAILABLE into None; older releases pass it through.
    return None if value is None or value == _NOT_AVAILABLE else int(value)


def read_mig(handle: Handle) -> MigReading | None:
    """The GPU's MIG devices; None when MIG mode is off. Raises pynvml.NVMLError (the adapter
    turns it into the sample's ReadError): a MIG device read half is no reading."""
    current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    if current != pynvml.NVML_DEVICE_MIG_ENABLE:
        return None
    instances: list[MigInstance] = []
    processes: list[GpuProcess] = []
    for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_NOT_FOUND:  # a slot no MIG device fills
                continue
            raise
        uuid = str(pynvml.nvmlDeviceGetUUID(mig))
        memory = pynvml.nvmlDeviceGetMemoryInfo(mig)
        instances.append(
            MigInstance(
                uuid=uuid,
                gpu_instance_id=int(pynvml.nvmlDeviceGetGpuInstanceId(mig)),
                compute_instance_id=int(pynvml.nvmlDeviceGetComputeInstanceId(mig)),
                memory_used_bytes=int(memory.used),
                memory_total_bytes=int(memory.total),
            )
        )
        processes += (
            GpuProcess(int(p.pid), used_bytes(p.usedGpuMemory), uuid)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(mig)
        )
    return MigReading(tuple(instances), tuple(processes))


def with_mig_processes(listed: tuple[GpuProcess, ...], mig: MigReading) -> tuple[GpuProcess, ...]:
    """The GPU's processes: its MIG devices', then those the GPU listed that none did."""
    named = {p.pid for p in mig.processes}
    return (*mig.processes, *(p for p in listed if p.pid not in named))
