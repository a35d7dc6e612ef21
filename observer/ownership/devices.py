"""GPU device ids as the kubelet's pod-resources API reports them, mapped to the NVML UUID of
the GPU they are or are part of, whichever plugin or driver named them:

- NVIDIA's device plugin (`nvidia.com/gpu`, `nvidia.com/mig-*`): the GPU's UUID, a MIG
  device's UUID (`MIG-<uuid>`, or `MIG-GPU-<parent uuid>/<gi>/<ci>` from drivers before
  R470), with a `::<n>` replica suffix under time-slicing. Its `deviceIDStrategy=index` changes
  only the ids the container is given (NVIDIA_VISIBLE_DEVICES), never those it lists to the
  kubelet (`internal/plugin/server.go`).
- GKE's device plugin (`nvidia.com/gpu`): the device file, `nvidia<minor>`, a MIG partition
  `nvidia<minor>/gi<n>`, with a `/vgpu<n>` suffix under time-sharing.
- NVIDIA's DRA driver (`gpu.nvidia.com`, the `dynamic_resources` of a container): device
  `gpu-<minor>`, a MIG device `gpu-<minor>-mig-<profile>-<start>-<size>`.

The minor number is the one in /dev/nvidia<minor>, which the driver reports beside each GPU's
UUID. A MIG device's UUID (`MIG-<uuid>`) names its GPU only through NVML's MIG handles: the
agent's sampler gives the GPU of each MIG instance it read (`NodeGpus.mig_parents`). A device
id none of these forms names, or whose GPU the node does not know (a MIG UUID of a GPU not
sampled yet), is kept as it is: it matches no GPU, so no GPU is said to be assigned to nobody,
or to the wrong pod, on its account."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

NVIDIA_DRA_DRIVER = "gpu.nvidia.com"
_MINOR = re.compile(r"^nvidia(\d+)(/gi\d+)?$")
_DRA = re.compile(r"^gpu-(\d+)(-mig-\d+-\d+-\d+)?$")
_OLD_MIG = re.compile(r"^MIG-(GPU-[0-9a-f-]+)/\d+/\d+$")


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """The node's GPUs by the names device plugins and DRA drivers give them: the device
    minor number, and the MIG devices on each (MIG UUID -> the GPU's UUID)."""

    by_minor: Mapping[int, str] = field(default_factory=dict)
    mig_parents: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Device:
    """One device the kubelet lists: the GPU it is on, and the part of it (a MIG device's id
    as listed) when it is not the whole GPU."""

    gpu: str
    part: str | None = None


def is_gpu_resource(resource_name: str) -> bool:
    return resource_name == "nvidia.com/gpu" or resource_name.startswith("nvidia.com/mig-")


def plugin_device(device_id: str, gpus: NodeGpus) -> Device:
    """A device plugin's id of a GPU or of part of one."""
    device_id = device_id.partition("::")[0].split("/vgpu")[0]
    if device_id.startswith("GPU-"):
        return Device(device_id)
    if old := _OLD_MIG.match(device_id):
        return Device(old[1], device_id)
    if device_id.startswith("MIG-"):
        return Device(gpus.mig_parents.get(device_id, device_id), device_id)
    if minor := _MINOR.match(device_id):
        return _by_minor(gpus, int(minor[1]), device_id, whole=minor[2] is None)
    return Device(device_id)


def dra_device(driver: str, device_name: str, gpus: NodeGpus) -> Device | None:
    """A DRA driver's device; None for a device that is no GPU of the node's (another driver's,
    or NVIDIA's VFIO pass-through, which NVML does not see)."""
    named = _DRA.match(device_name) if driver == NVIDIA_DRA_DRIVER else None
    if named is None:
        return None
    return _by_minor(gpus, int(named[1]), device_name, whole=named[2] is None)


def _by_minor(gpus: NodeGpus, minor: int, device_id: str, *, whole: bool) -> Device:
    uuid = gpus.by_minor.get(minor)
    if uuid is None:
        return Device(device_id)
    return Device(uuid, None if whole else device_id)
