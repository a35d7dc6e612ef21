"""The simulated cluster's nodes as their agents see them: eight in-memory GPUs per node whose
processes follow the jobs the cluster runs there, and the real node agent on each.

What runs on a GPU is what the platform would show: another tenant's training job and a
GPU-busy probe put a process there, and GPM tells them apart (a probe's burn keeps its SMs
busy on plain arithmetic; training runs its tensor pipes and leaves SMs waiting on memory);
the other probes only hold their GPUs (their scripts need no GPU library), and a job stuck
after its end has no process left. The leak fault leaves
the next probe's process behind, memory and all, when its job ends, until it is released.

The GPU faults act on one GPU as the hardware would: an Xid 79 takes the GPU off the bus and
kills the job whose process ran there, while the node stays in service (the scheduler keeps
placing jobs on it: whether the platform reacts is what the controller judges); an
uncorrected ECC burst raises the error counts and leaves a row remap pending until the GPU
is reset; a thermal slowdown throttles a GPU and heats it. Each agent takes its Xids
synchronously, one event wait of no time per tick: the demo has no threads."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.agent.xids import XidWatch
from observer.backends.simulated import SimulatedCluster
from observer.clock import Clock
from observer.domain import (
    Behaviour,
    GpmActivity,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
)
from observer.errors import CudaCallError
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.metrics import AgentMetrics
from observer.ownership.fake import FakeHost
from observer.settings.detectors import GpuHealthSettings, NodeLeakSettings

GPU_MEMORY_BYTES = 141 * GIB  # an H200's
DRIVER_BASELINE_BYTES = 600 * 2**20
# What GPM reports of each (an idle H200's counters count nothing).
IDLE_ACTIVITY = GpmActivity(0.0, 0.0, 0.0, 0.0)
TRAINING_ACTIVITY = GpmActivity(0.62, 0.31, 0.44, 0.38)
BUSY_PROBE_ACTIVITY = GpmActivity(0.97, 0.5, 0.0, 0.02)
TRAINING_MEMORY_BYTES = 60 * GIB
BUSY_PROBE_MEMORY_BYTES = 8 * GIB
RESTING_TEMPERATURE_CELSIUS = 35
THROTTLED_TEMPERATURE_CELSIUS = 92
HW_THERMAL_SLOWDOWN = 0x40  # nvml.h nvmlClocksEventReasonHwThermalSlowdown
FELL_OFF_THE_BUS = 79
# A job whose GPU fell off the bus ends as a pod shows it (reason Error, the last line on
# stderr): the gpu-burn probe with its CUDA call error, a tenant's PyTorch job with its own.
GPU_FAULT_REASON = "Error"
PROBE_GPU_FAULT = (
    CudaCallError.exit_code,
    "observer probe gpu-burn: CUDA driver call cuCtxSynchronize failed: "
    "CUDA_ERROR_LAUNCH_FAILED (719)",
)
TRAINING_GPU_FAULT = (1, "RuntimeError: CUDA error: unspecified launch failure")


class _Node:
    def __init__(
        self,
        name: str,
        gpus: int,
        clock: Clock,
        rules: NodeLeakSettings,
        health: GpuHealthSettings | None,
    ) -> None:
        self.gpus = FakeGpuBackend(
            [
                FakeGpu(
                    f"GPU-{name}-{i}",
                    memory_total_bytes=GPU_MEMORY_BYTES,
                    memory_used_bytes=DRIVER_BASELINE_BYTES,
                    temperature_celsius=RESTING_TEMPERATURE_CELSIUS,
                    pci_bus_id=f"00000000:{0x18 + 0x10 * i:02X}:00.0",
                    activity=IDLE_ACTIVITY,
                )
                for i in range(gpus)
            ],
            clock,
        )
        self.host = FakeHost()
        metrics = AgentMetrics(CollectorRegistry())
        # Never stopped, and waited on for no time: step() returns at once.
        self.xids = XidWatch(
            self.gpus.xid_events(), None, 0.0, threading.Event(), metrics.xid_source_up
        )
        self.agent = NodeAgent(
            name,
            Sampler(self.gpus, clock, metrics, counters_interval_seconds=300),
            Attributor(self.host, self.host),
            rules,
            clock,
            metrics,
            health=health,
            xids=self.xids,
        )
        self.held: dict[int, tuple[str, int]] = {}  # GPU index -> (job id, pid)
        self.last_ended: int | None = None  # the pid of the last process that ended here
        self.reuse: int | None = None  # the pid the next process takes (the pid-reuse fault)
        self._flapping: tuple[int, list[Owner]] = (0, [])  # ticks left, owners told unknown

    def tick(self) -> None:
        self.xids.step()
        self.agent.tick()
        left, owners = self._flapping
        if left == 1:
            for owner in owners:  # known again, unless it ended meanwhile
                if self.host.owners.get(owner) == OwnerState(OwnerPhase.UNKNOWN):
                    self.host.owners[owner] = OwnerState(OwnerPhase.RUNNING)
        self._flapping = (max(left - 1, 0), owners)

    def flap(self, ticks: int) -> bool:
        owners = [Owner(OwnerKind.JOB, job_id) for job_id, _ in set(self.held.values())]
        for owner in owners:
            self.host.owners[owner] = OwnerState(OwnerPhase.UNKNOWN)
        self._flapping = (ticks, owners)
        return bool(owners)

    def place(
        self, job: JobStatus, behaviour: Behaviour, count: int, pid: Callable[[], int]
    ) -> None:
        owner = Owner(OwnerKind.JOB, job.job_id)
        # A lost GPU runs nothing: a job the scheduler places on it has no process there.
        free = [i for i, gpu in enumerate(self.gpus.gpus) if i not in self.held and not gpu.lost]
        background = job.run_id is None
        for index in free[:count]:
            gpu = self.gpus.gpus[index]
            used = TRAINING_MEMORY_BYTES if background else BUSY_PROBE_MEMORY_BYTES
            started = pid()  # a later start than any process before it
            process, self.reuse = self.reuse or started, None
            gpu.processes[process] = used
            gpu.memory_used_bytes = DRIVER_BASELINE_BYTES + used
            gpu.utilization_gpu_percent = 72 + (index * 7 + process) % 25 if background else 99
            gpu.activity = TRAINING_ACTIVITY if background else BUSY_PROBE_ACTIVITY
            command = "python train.py" if background else behaviour.value
            self.host.spawn(process, owner, command, start_ticks=started)
            self.held[index] = (job.job_id, process)
        self.host.owners[owner] = OwnerState(OwnerPhase.RUNNING)

    def release(self, job_id: str) -> None:
        for index, (held_by, process) in list(self.held.items()):
            if held_by == job_id:
                gpu = self.gpus.gpus[index]
                gpu.processes.pop(process, None)
                gpu.memory_used_bytes = DRIVER_BASELINE_BYTES
                gpu.utilization_gpu_percent = 0
                gpu.activity = IDLE_ACTIVITY
                self.host.kill(process)
                self.last_ended = process
                del self.held[index]

    def end(self, job_id: str, at: datetime) -> None:
        self.host.owners[Owner(OwnerKind.JOB, job_id)] = OwnerState(OwnerPhase.ENDED, at)


class DemoNodes:
    def __init__(
        self,
        cluster: SimulatedCluster,
        clock: Clock,
        gpus_per_node: int,
        rules: NodeLeakSettings,
        health: GpuHealthSettings | None = None,
    ) -> None:
        """`health`: the agents' GPU health rules (None: the defaults)."""
        self._cluster = cluster
        self._clock = clock
        self._nodes = {
            name: _Node(name, gpus_per_node, clock, rules, health) for name in cluster.nodes
        }
        self._pids = itertools.count(4000)
        self._on: dict[str, tuple[set[str], str | None]] = {}  # job id -> (its nodes, probe run)
        self.leak_next_probe = False  # the fault: the next probe to end leaves its process
        # The confounder: other tenants' jobs free their memory this long after they end.
        self.release_delay = timedelta()
        self._releases: list[tuple[datetime, str, str]] = []  # (when, node, job id)
        # job id -> (its probe run, the node its processes were left on)
        self.leaked: dict[str, tuple[str, str]] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self._nodes)

    @property
    def snapshots(self) -> Mapping[str, Callable[[], NodeSnapshot | None]]:
        return {name: node.agent.snapshot for name, node in self._nodes.items()}

    def tick(self) -> None:
        """Follow the cluster, then let every agent sample its node."""
        running = {}
        for job, behaviour, placement in self._cluster.holdings():
            if job.phase is JobPhase.RUNNING and (
                job.run_id is None or behaviour is Behaviour.GPU_BUSY
            ):
                running[job.job_id] = (job, behaviour, placement)
        for job_id, (job, behaviour, placement) in running.items():
            if job_id not in self._on:
                for name, count in placement.items():
                    self._nodes[name].place(job, behaviour, count, lambda: next(self._pids))
                self._on[job_id] = (set(placement), job.run_id)
        for job_id in [j for j in self._on if j not in running]:
            self._ended(job_id, leaves=self.leak_next_probe)
        now = self._clock.now()
        for due in [r for r in self._releases if r[0] <= now]:
            self._releases.remove(due)
            self._nodes[due[1]].release(due[2])
        for node in self._nodes.values():
            node.tick()

    def release_leaks(self) -> None:
        """The operator kills what was left behind."""
        for job_id, (_, name) in self.leaked.items():
            self._nodes[name].release(job_id)
        self.leaked.clear()

    def busy_gpu(self, node: str, gpu: int | None = None, probe: bool = False) -> int | None:
        """The lowest index of `node`'s GPUs a process runs on (`gpu`: that one only; with
        `probe`, a gpu-busy probe's process), None when there is none: where a GPU fault hits
        work."""
        return min(
            (
                index
                for index, (job_id, _) in self._nodes[node].held.items()
                if gpu in (None, index)
                and (not probe or (job_id in self._on and self._on[job_id][1] is not None))
            ),
            default=None,
        )

    def reuse_pid(self, node: str) -> int | None:
        """The next process started on `node` takes the pid of the last one that ended there
        (a new process, started later). Returns that pid; None while none has ended."""
        pid = self._nodes[node].last_ended
        if pid is not None:
            self._nodes[node].reuse = pid
        return pid

    def flap_owners(self, node: str, ticks: int) -> bool:
        """The owner directory of `node` answers "unknown" for the jobs running there for the
        agent's next `ticks` ticks, then knows them again. False: nothing ran there."""
        return self._nodes[node].flap(ticks)

    def gpu_fall_off(self, node: str, gpu: int, xid: int = FELL_OFF_THE_BUS) -> str | None:
        """GPU `gpu` of `node` reports Xid `xid` and falls off the bus: on its next tick the
        node's agent has the gpu_xid event and opens gpu_lost. The job whose process ran on
        it fails now, everywhere it ran, leaving no process behind; the scheduler, which
        counts GPUs and not which, keeps the node in service and may place new jobs there,
        which run on its other GPUs. Returns the failed job's id (None: nothing ran there)."""
        at = self._nodes[node]
        at.gpus.xid(gpu, xid)
        at.gpus.gpus[gpu].lost = True
        held = at.held.get(gpu)
        if held is None or held[0] not in self._on:  # nothing, or a leaked process, ran there
            return None
        job_id = held[0]
        probe = self._on[job_id][1] is not None
        code, message = PROBE_GPU_FAULT if probe else TRAINING_GPU_FAULT
        self._cluster.fail_job(job_id, GPU_FAULT_REASON, message, code)
        self._ended(job_id, leaves=False)
        return job_id

    def gpu_recover(self, node: str, gpu: int) -> None:
        """The operator resets the lost GPU: it is back, idle, from its agent's next tick
        (gpu_lost closes)."""
        device = self._nodes[node].gpus.gpus[gpu]
        device.lost = False
        device.memory_used_bytes = DRIVER_BASELINE_BYTES
        device.utilization_gpu_percent = 0
        device.activity = IDLE_ACTIVITY

    def ecc_burst(self, node: str, gpu: int, errors: int = 8) -> None:
        """`errors` uncorrected ECC errors on the GPU: its volatile and aggregate counts rise
        and a row remap waits for a reset. The agent's next tick opens gpu_ecc_uncorrected
        (from the volatile count; open for detectors.gpu_health.ecc_window_seconds after the
        last rise); its next counters read (every 300 s) opens gpu_row_remap_pending."""
        device = self._nodes[node].gpus.gpus[gpu]
        device.ecc_volatile_uncorrected_errors += errors
        device.ecc_aggregate_uncorrected_errors += errors
        device.remapped_rows_pending = True

    def ecc_clear(self, node: str, gpu: int) -> None:
        """The GPU is reset: the pending row remap is done (gpu_row_remap_pending closes at
        the next counters read) and the volatile count starts again from 0, as on a real
        reset; the aggregate count stays."""
        device = self._nodes[node].gpus.gpus[gpu]
        device.remapped_rows_pending = False
        device.ecc_volatile_uncorrected_errors = 0

    def thermal_slowdown(self, node: str, gpu: int, on: bool) -> None:
        """The GPU throttles for heat (NVML's HW thermal slowdown clock event, at 92 C) while
        `on`. gpu_clock_slowdown opens once it has lasted detectors.gpu_health.
        slowdown_hold_seconds with a process on the GPU (pick one with busy_gpu), and closes
        when it is off or nothing runs there."""
        device = self._nodes[node].gpus.gpus[gpu]
        if on:
            device.clock_event_reasons |= HW_THERMAL_SLOWDOWN
            device.temperature_celsius = THROTTLED_TEMPERATURE_CELSIUS
        else:
            device.clock_event_reasons &= ~HW_THERMAL_SLOWDOWN
            device.temperature_celsius = RESTING_TEMPERATURE_CELSIUS

    def _ended(self, job_id: str, leaves: bool) -> None:
        """`leaves`: a probe's processes are left behind (the leak fault)."""
        names, run_id = self._on.pop(job_id)
        left = run_id if leaves else None  # the probe run whose processes stay
        for name in names:
            node = self._nodes[name]
            node.end(job_id, self._clock.now())
            if left is not None:
                self.leaked[job_id] = (left, name)
            elif run_id is None and self.release_delay:
                self._releases.append((self._clock.now() + self.release_delay, name, job_id))
            else:
                node.release(job_id)
        if left is not None:
            self.leak_next_probe = False

    def exposition(self, name: str, at: datetime) -> list[tuple[str, dict[str, str], float]]:
        """What the node's agent exporter shows a scrape: each GPU up (0 while lost), and the
        utilisation of those that answer."""
        series: list[tuple[str, dict[str, str], float]] = []
        for index, gpu in enumerate(self._nodes[name].gpus.gpus):
            labels = {"gpu": str(index), "uuid": gpu.uuid}
            series.append(("observer_gpu_up", labels, 0.0 if gpu.lost else 1.0))
            if not gpu.lost:
                series.append(
                    ("observer_gpu_utilization_ratio", labels, gpu.utilization_gpu_percent / 100)
                )
        return series
