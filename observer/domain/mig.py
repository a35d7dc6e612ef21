"""MIG (Multi-Instance GPU): the instances a GPU in MIG mode is partitioned into, as NVML
enumerates them. Pure value types, re-exported by `observer.domain`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG device of a GPU in MIG mode (a GPU instance with one compute instance, the
    unit the NVIDIA device plugin hands a pod). Its processes are the GpuSample's processes
    that name its `uuid`; a memory field is None when its read failed."""

    uuid: str  # MIG-<uuid>: what the device plugin (R470+) lists to the kubelet
    gpu_instance_id: int
    compute_instance_id: int
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
