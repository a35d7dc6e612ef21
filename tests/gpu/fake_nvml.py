"""Drives the stand-in libnvidia-ml.so.1 (deploy/local/fake_nvml/fake_nvml.c, whose header
documents the state-file format): finds or builds the library, writes its state file and reads
its call log."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import components

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "deploy" / "local" / "build-fake-nvml.sh"
LIBRARY_ENV = "OBSERVER_TEST_FAKE_NVML_LIB"

# The GpuSample / GpuCounters fields each call name fills; the fake's `unsupported` takes these
# call names too.
SAMPLE_FIELDS_BY_CALL = {
    "utilization": ("utilization_gpu_percent", "utilization_memory_percent"),
    "memory": ("memory_used_bytes", "memory_total_bytes"),
    "processes": ("processes",),
    "power": ("power_milliwatts",),
    "temperature": ("temperature_celsius",),
    "sm_clock": ("sm_clock_mhz",),
    "clock_event_reasons": ("clock_event_reasons",),
    "performance_state": ("performance_state",),
    "ecc_volatile_uncorrected": ("ecc_volatile_uncorrected_errors",),
    "mig": ("mig_instances",),
}
COUNTER_FIELDS_BY_CALL = {
    "energy": ("energy_millijoules",),
    "pcie_tx_throughput": ("pcie_tx_kilobytes_per_second",),
    "pcie_rx_throughput": ("pcie_rx_kilobytes_per_second",),
    "remapped_rows": (
        "remapped_rows_correctable",
        "remapped_rows_uncorrectable",
        "remapped_rows_pending",
        "remapped_rows_failed",
    ),
    "retired_pages": ("retired_pages_single_bit", "retired_pages_double_bit"),
    "retired_pages_pending": ("retired_pages_pending",),
    "ecc_aggregate_uncorrected": ("ecc_aggregate_uncorrected_errors",),
    "pcie_replay": ("pcie_replay_errors",),
    "nvlink_errors": ("nvlink_replay_errors", "nvlink_recovery_errors", "nvlink_crc_errors"),
}


@dataclass(frozen=True)
class FakeNvLink:
    """One NVLink of a device: whether it is active, and its data-link error counters."""

    active: bool = True
    replay: int = 0
    recovery: int = 0
    crc_flit: int = 0
    crc_data: int = 0

    def state_item(self) -> str:
        values = (self.active, self.replay, self.recovery, self.crc_flit, self.crc_data)
        return ":".join(str(int(v)) for v in values)


@dataclass(frozen=True)
class FakeMigDevice:
    """One MIG device of a GPU in MIG mode (an H200's 1g.18gb slice by default): its GPU and
    compute instance ids, memory, and compute processes (pid, used bytes or None: "na")."""

    gpu_instance_id: int
    compute_instance_id: int = 0
    memory_used_bytes: int = 0
    memory_total_bytes: int = 17_951_621_120
    processes: tuple[tuple[int, int | None], ...] = ()

    def state_item(self) -> str:
        values = (
            self.gpu_instance_id,
            self.compute_instance_id,
            self.memory_used_bytes,
            self.memory_total_bytes,
        )
        item = ":".join(str(v) for v in values)
        if self.processes:
            item += ":" + "+".join(f"{p}/{'na' if b is None else b}" for p, b in self.processes)
        return item

    def uuid(self, gpu_index: int, slot: int) -> str:
        """The UUID the stand-in gives the MIG device at `slot` of GPU `gpu_index`."""
        return f"MIG-00000000-0000-0000-{slot + 1:04d}-{gpu_index:012d}"


H200_NVLINKS = (FakeNvLink(),) * 18  # an H200 SXM's NVLink 4 links, all up and clean


@dataclass(frozen=True)
class FakeNvmlGpu:
    """One device of the state file. Defaults are an idle H200 as recorded in the h200-trace
    (whose VM recorded no NVLink: its links are an H200 SXM's), its SMs idle; field names are
    the state-file keys and, but for GPM's four and the last six, GpuSample / GpuCounters
    fields."""

    utilization_gpu_percent: int = 0
    utilization_memory_percent: int = 0
    memory_used_bytes: int = 644_939_776
    memory_total_bytes: int = 150_754_820_096
    power_milliwatts: int = 122_080
    temperature_celsius: int = 33
    sm_clock_mhz: int = 1980
    clock_event_reasons: int = 1
    performance_state: int = 0
    ecc_volatile_uncorrected_errors: int = 0
    energy_millijoules: int = 2_243_311
    pcie_tx_kilobytes_per_second: int = 1385
    pcie_rx_kilobytes_per_second: int = 912
    remapped_rows_correctable: int = 0
    remapped_rows_uncorrectable: int = 0
    remapped_rows_pending: bool = False
    remapped_rows_failed: bool = False
    retired_pages_single_bit: int = 0
    retired_pages_double_bit: int = 0
    retired_pages_pending: bool = False
    ecc_aggregate_uncorrected_errors: int = 0
    pcie_replay_errors: int = 1
    sm_active_percent: int = 0  # what GPM reports (GpmActivity's ratios, in percent)
    sm_occupancy_percent: int = 0
    tensor_active_percent: int = 0
    dram_active_percent: int = 0
    processes: tuple[tuple[int, int | None], ...] = ()  # (pid, used bytes or None: "na")
    nvlinks: tuple[FakeNvLink, ...] = H200_NVLINKS  # () : a device without NVLink
    unsupported: frozenset[str] = frozenset()
    lost: bool = False
    mig_mode: bool = False  # MIG on: `processes` is then unused, each MIG device has its own
    mig: tuple[FakeMigDevice, ...] = ()

    def state_line(self) -> str:
        pairs = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "processes":
                text = ",".join(f"{pid}:{'na' if used is None else used}" for pid, used in value)
            elif field.name in ("nvlinks", "mig"):
                text = ",".join(item.state_item() for item in value)
            elif field.name == "unsupported":
                text = ",".join(sorted(value))
            else:
                text = str(int(value))
            if text:  # an empty list is left out: the fake's lists take no empty value
                pairs.append(f"{field.name}={text}")
        return "gpu " + " ".join(pairs)


@dataclass(frozen=True)
class FakeXid:
    """An Xid queued for the library's event sets; ids must rise."""

    id: int
    gpu: int
    code: int

    def state_line(self) -> str:
        return f"xid id={self.id} gpu={self.gpu} code={self.code}"


def write_state(
    path: Path,
    gpus: Sequence[FakeNvmlGpu],
    *,
    driver_not_loaded: bool = False,
    xids: Sequence[FakeXid] = (),
) -> None:
    lines = ["driver_not_loaded"] if driver_not_loaded else []
    lines += [gpu.state_line() for gpu in gpus]
    lines += [xid.state_line() for xid in xids]
    # Replaced, not rewritten: the library notices a new inode even within one mtime tick.
    staged = path.with_name(path.name + ".new")
    staged.write_text("".join(line + "\n" for line in lines))
    staged.replace(path)


@dataclass(frozen=True)
class FakeNvml:
    """One test's stand-in NVML: the library, and the state file and call log the test's
    environment points it at."""

    library: Path
    state_path: Path
    call_log: Path

    def set(
        self,
        gpus: Sequence[FakeNvmlGpu],
        *,
        driver_not_loaded: bool = False,
        xids: Sequence[FakeXid] = (),
    ) -> None:
        write_state(self.state_path, gpus, driver_not_loaded=driver_not_loaded, xids=xids)

    def calls(self) -> Counter[str]:
        """How often each NVML symbol has been called since the test began."""
        if not self.call_log.exists():
            return Counter()
        return Counter(self.call_log.read_text().split())


def install(library: Path, directory: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """Points the library at a state file and a call log in `directory` for one test."""
    fake = FakeNvml(library, directory / "fake-nvml-state", directory / "fake-nvml-calls")
    fake.set([])
    monkeypatch.setenv("FAKE_NVML_STATE", str(fake.state_path))
    monkeypatch.setenv("FAKE_NVML_CALLS", str(fake.call_log))
    return fake


def require_library() -> Path:
    """The stand-in library: $OBSERVER_TEST_FAKE_NVML_LIB, else built (or found up to date) in
    .build/fake-nvml by deploy/local/build-fake-nvml.sh. When it cannot be had the test fails on
    CI (CI=true) and is skipped elsewhere."""
    components.require("fake_nvml")
    library, problem = _locate_library()
    if library is not None:
        return library
    components.unavailable(f"{problem} (bash {BUILD_SCRIPT.relative_to(REPO_ROOT)})")


@functools.cache
def _locate_library() -> tuple[Path | None, str]:
    configured = os.environ.get(LIBRARY_ENV)
    if configured:
        path = Path(configured)
        return (path, "") if path.is_file() else (None, f"{LIBRARY_ENV}={configured}: no such file")
    try:
        built = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{BUILD_SCRIPT} could not run: {exc}"
    if built.returncode != 0:
        return None, f"{BUILD_SCRIPT} failed: {built.stderr.strip()[-2000:]}"
    return Path(built.stdout.strip().splitlines()[-1]), ""
