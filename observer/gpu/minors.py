"""The NVIDIA driver's own account of its GPUs, `<proc>/driver/nvidia/gpus/<bus id>/information`:
each GPU's UUID beside its device minor number (the N of /dev/nvidiaN), by which GKE's device
plugin and NVIDIA's DRA driver name GPUs. Read from the host's /proc, no NVML call."""

from __future__ import annotations

import re
from pathlib import Path

_FIELD = re.compile(r"^(GPU UUID|Device Minor):\s*(\S+)\s*$", re.MULTILINE)


def uuids_by_minor(proc_root: Path) -> dict[int, str]:
    """Every GPU the driver lists whose file reads whole; none when the driver is not loaded."""
    found: dict[int, str] = {}
    try:
        files = sorted((proc_root / "driver" / "nvidia" / "gpus").glob("*/information"))
    except OSError:
        return found
    for information in files:
        try:
            fields = dict(_FIELD.findall(information.read_text()))
        except OSError:
            continue  # a GPU removed while it was read
        uuid, minor = fields.get("GPU UUID"), fields.get("Device Minor", "")
        if uuid and minor.isdigit():
            found[int(minor)] = uuid
    return found
