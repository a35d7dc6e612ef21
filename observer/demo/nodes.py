"""The simulated cluster's nodes as their agents see them: eight in-memory GPUs per node whose
processes follow the jobs the cluster runs there, and the real node agent on each.

What runs on a GPU is what the platform would show: another tenant's training job and a
GPU-busy probe put a process there; the other probes only hold their GPUs (their scripts need
no GPU library), and a job stuck after its end has no process left. The leak fault leaves
the next probe's process behind, memory and all, when its job ends, until it is released."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from datetime import datetime

from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.service import NodeAgent
from observer.backends.simulated import SimulatedCluster
from observer.clock import Clock
from observer.domain import (
    Behaviour,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
)
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.metrics import AgentMetrics
from observer.ownership.fake import FakeHost
from observer.settings.detectors import NodeLeakSettings

GPU_MEMORY_BYTES = 141 * GIB  # an H200's
DRIVER_BASELINE_BYTES = 600 * 2**20
TRAINING_MEMORY_BYTES = 60 * GIB
BUSY_PROBE_MEMORY_BYTES = 8 * GIB


class _Node:
    def __init__(self, name: str, gpus: int, clock: Clock, rules: NodeLeakSettings) -> None:
        self.gpus = FakeGpuBackend(
            [
                FakeGpu(
                    f"GPU-{name}-{i}",
                    memory_total_bytes=GPU_MEMORY_BYTES,
                    memory_used_bytes=DRIVER_BASELINE_BYTES,
                )
                for i in range(gpus)
            ],
            clock,
        )
        self.host = FakeHost()
        metrics = AgentMetrics(CollectorRegistry())
        self.agent = NodeAgent(
            name,
            Sampler(self.gpus, clock, metrics, counters_interval_seconds=300),
            Attributor(self.host, self.host),
            rules,
            clock,
            metrics,
        )
        self.held: dict[int, tuple[str, int]] = {}  # GPU index -> (job id, pid)

    def place(
        self, job: JobStatus, behaviour: Behaviour, count: int, pid: Callable[[], int]
    ) -> None:
        owner = Owner(OwnerKind.JOB, job.job_id)
        free = [i for i in range(len(self.gpus.gpus)) if i not in self.held]
        background = job.run_id is None
        for index in free[:count]:
            gpu = self.gpus.gpus[index]
            used = TRAINING_MEMORY_BYTES if background else BUSY_PROBE_MEMORY_BYTES
            process = pid()
            gpu.processes[process] = used
            gpu.memory_used_bytes = DRIVER_BASELINE_BYTES + used
            gpu.utilization_gpu_percent = 72 + (index * 7 + process) % 25 if background else 99
            self.host.spawn(process, owner, "python train.py" if background else behaviour.value)
            self.held[index] = (job.job_id, process)
        self.host.owners[owner] = OwnerState(OwnerPhase.RUNNING)

    def release(self, job_id: str) -> None:
        for index, (held_by, process) in list(self.held.items()):
            if held_by == job_id:
                gpu = self.gpus.gpus[index]
                gpu.processes.pop(process, None)
                gpu.memory_used_bytes = DRIVER_BASELINE_BYTES
                gpu.utilization_gpu_percent = 0
                self.host.kill(process)
                del self.held[index]

    def end(self, job_id: str, at: datetime) -> None:
        self.host.owners[Owner(OwnerKind.JOB, job_id)] = OwnerState(OwnerPhase.ENDED, at)


class DemoNodes:
    def __init__(
        self, cluster: SimulatedCluster, clock: Clock, gpus_per_node: int, rules: NodeLeakSettings
    ) -> None:
        self._cluster = cluster
        self._clock = clock
        self._nodes = {name: _Node(name, gpus_per_node, clock, rules) for name in cluster.nodes}
        self._pids = itertools.count(4000)
        self._on: dict[str, tuple[set[str], str | None]] = {}  # job id -> (its nodes, probe run)
        self.leak_next_probe = False  # the fault: the next probe to end leaves its process
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
            self._ended(job_id)
        for node in self._nodes.values():
            node.agent.tick()

    def release_leaks(self) -> None:
        """The operator kills what was left behind."""
        for job_id, (_, name) in self.leaked.items():
            self._nodes[name].release(job_id)
        self.leaked.clear()

    def _ended(self, job_id: str) -> None:
        names, run_id = self._on.pop(job_id)
        for name in names:
            node = self._nodes[name]
            node.end(job_id, self._clock.now())
            if run_id is not None and self.leak_next_probe:
                self.leaked[job_id] = (run_id, name)
            else:
                node.release(job_id)
        if run_id is not None and self.leak_next_probe:
            self.leak_next_probe = False

    def exposition(self, name: str, at: datetime) -> list[tuple[str, dict[str, str], float]]:
        """What the node's agent exporter shows a scrape: each GPU up, and its utilisation."""
        series: list[tuple[str, dict[str, str], float]] = []
        for index, gpu in enumerate(self._nodes[name].gpus.gpus):
            labels = {"gpu": str(index), "uuid": gpu.uuid}
            series.append(("observer_gpu_up", labels, 1.0))
            series.append(
                ("observer_gpu_utilization_ratio", labels, gpu.utilization_gpu_percent / 100)
            )
        return series
