"""Node-local unreleased resources and GPU health, from one tick of one agent.

Rules (each a condition, opened by the tracker after its hold time):
- unreleased_memory: a process still on the GPU after its owner (pod, job) ended + grace;
- orphan_process: a process on the GPU that belongs to no pod or job, beyond grace;
- vanished_process: NVML lists a pid that no longer exists on the host, beyond grace;
- memory_without_process: memory above the driver baseline with no process listed;
- allocated_idle: an owner that has not ended holds GPU memory while the GPU stays at 0 %;
- gpu_lost: the device fell off the bus; nvml_unavailable: the node is blind to its GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    GpuReading,
    OwnerKind,
    OwnerPhase,
    Severity,
    Subject,
    Symptom,
)
from observer.settings.detectors import NodeLeakSettings

GPU_PROCESS_DETECTORS = frozenset(
    {"unreleased_memory", "orphan_process", "vanished_process", "allocated_idle"}
)
GPU_MEMORY_DETECTORS = frozenset({"memory_without_process"})
# Every detector of the node-local rules: what an agent reports of its node.
DETECTORS = GPU_PROCESS_DETECTORS | GPU_MEMORY_DETECTORS | {"gpu_lost", "nvml_unavailable"}


@dataclass(frozen=True, slots=True)
class NodeView:
    node: str
    driver: DriverStatus
    gpus: Sequence[GpuReading]
    processes: Sequence[AttributedProcess]


def evaluate(view: NodeView, rules: NodeLeakSettings) -> list[Symptom]:
    if view.driver.state is not DriverState.OK:
        return [
            Symptom(
                detector="nvml_unavailable",
                subject={"node": view.node},
                severity=Severity.CRITICAL,
                summary=f"NVML unavailable on {view.node}: the node's GPUs are not observed",
                rule="NVML could not be initialised; every GPU reading is missing",
                evidence={"driver_state": view.driver.state.value, "message": view.driver.message},
            )
        ]
    symptoms = list(_gpu_health(view))
    symptoms += _memory_without_process(view, rules)
    by_uuid = {g.identity.uuid: g for g in view.gpus if g.identity is not None}
    for proc in view.processes:
        symptoms += _process_symptoms(view.node, proc, by_uuid.get(proc.gpu_uuid), rules)
    return symptoms


def covers(view: NodeView, detector: str, subject: Subject) -> bool:
    """Whether this tick observed what a condition is about, so its absence means 'gone'."""
    if detector == "nvml_unavailable":
        return True
    if view.driver.state is not DriverState.OK:
        return False
    if detector == "gpu_lost":
        return True
    gpu = next(
        (g for g in view.gpus if g.identity and g.identity.uuid == subject.get("gpu_uuid")), None
    )
    if gpu is None or gpu.sample is None:
        return False
    if detector in GPU_MEMORY_DETECTORS:
        return gpu.sample.memory_used_bytes is not None and gpu.sample.processes is not None
    return gpu.sample.processes is not None


def _gpu_health(view: NodeView) -> Iterator[Symptom]:
    for gpu in view.gpus:
        if gpu.lost:
            errors = [e.message for e in gpu.sample.errors] if gpu.sample else []
            yield Symptom(
                detector="gpu_lost",
                subject={"node": view.node, "gpu": str(gpu.index)},
                severity=Severity.CRITICAL,
                summary=f"GPU {gpu.index} on {view.node} is lost (fell off the bus)",
                rule="NVML answers GPU_IS_LOST for the device",
                evidence={
                    "gpu_index": gpu.index,
                    "gpu_uuid": gpu.identity.uuid if gpu.identity else None,
                    "errors": errors,
                },
            )


def _memory_without_process(view: NodeView, rules: NodeLeakSettings) -> Iterator[Symptom]:
    for gpu in view.gpus:
        sample, identity = gpu.sample, gpu.identity
        if identity is None or sample is None or sample.processes != ():
            continue
        baseline = rules.baseline_memory_bytes or gpu.baseline_memory_bytes
        used = sample.memory_used_bytes
        if baseline is None or used is None or used <= baseline + rules.memory_tolerance_bytes:
            continue
        yield Symptom(
            detector="memory_without_process",
            subject={"node": view.node, "gpu_uuid": identity.uuid},
            severity=Severity.WARNING,
            summary=f"GPU {gpu.index} on {view.node} holds {_gib(used - baseline)} above its "
            "baseline with no process listed",
            rule=f"memory used > baseline + {rules.memory_tolerance_bytes} B with no compute "
            f"process, for {rules.grace_seconds:g} s",
            evidence={
                "gpu_index": gpu.index,
                "gpu_uuid": identity.uuid,
                "memory_used_bytes": used,
                "baseline_memory_bytes": baseline,
                "excess_bytes": used - baseline,
            },
            hold_seconds=rules.grace_seconds,
        )


def _process_symptoms(
    node: str, proc: AttributedProcess, gpu: GpuReading | None, rules: NodeLeakSettings
) -> Iterator[Symptom]:
    subject = {"node": node, "gpu_uuid": proc.gpu_uuid, "pid": str(proc.pid)}
    evidence = {
        "gpu_index": proc.gpu_index,
        "gpu_uuid": proc.gpu_uuid,
        "pid": proc.pid,
        "executable": proc.executable,
        "uid": proc.uid,
        "user": proc.user,
        "command": proc.command,
        "used_memory_bytes": proc.used_memory_bytes,
        "owner": proc.owner.label,
        "owner_phase": proc.owner_state.phase.value,
        "owner_ended_at": (
            proc.owner_state.ended_at.isoformat() if proc.owner_state.ended_at else None
        ),
    }
    held = _gib(proc.used_memory_bytes)
    if not proc.exists:
        yield Symptom(
            detector="vanished_process",
            subject=subject,
            severity=Severity.CRITICAL,
            summary=f"pid {proc.pid} is listed on GPU {proc.gpu_index} ({held}) but no longer "
            "exists on the host",
            rule=f"NVML lists the pid, /proc has no such process, for {rules.grace_seconds:g} s",
            evidence=evidence,
            hold_seconds=rules.grace_seconds,
        )
        return
    if proc.owner.kind is OwnerKind.NONE:
        yield Symptom(
            detector="orphan_process",
            subject=subject,
            severity=Severity.WARNING,
            summary=f"pid {proc.pid} ({_program(proc)}) uses GPU "
            f"{proc.gpu_index} ({held}) and belongs to no pod or job",
            rule=f"no pod or Slurm job in the process's cgroup or environment, for "
            f"{rules.grace_seconds:g} s",
            evidence=evidence,
            hold_seconds=rules.grace_seconds,
        )
        return
    state = proc.owner_state
    if state.phase is OwnerPhase.ENDED:
        yield Symptom(
            detector="unreleased_memory",
            subject=subject,
            severity=Severity.CRITICAL,
            summary=f"pid {proc.pid} still holds {held} on GPU {proc.gpu_index} after its "
            f"owner {proc.owner.label} ended",
            rule=f"owner ended more than {rules.grace_seconds:g} s ago and the process is still "
            "listed on the GPU",
            evidence=evidence,
            hold_seconds=rules.grace_seconds,
            since=state.ended_at,
        )
    elif (
        # Unknown counts: a live process in a pod's or job's cgroup is the best sign of a
        # running owner a node has when no scheduler directory is wired.
        gpu is not None
        and gpu.sample is not None
        and gpu.sample.utilization_gpu_percent == 0
        and proc.used_memory_bytes != 0
    ):
        yield Symptom(
            detector="allocated_idle",
            subject=subject,
            severity=Severity.WARNING,
            summary=f"{proc.owner.label} holds {held} on GPU {proc.gpu_index} while the GPU "
            "does nothing",
            rule=f"owner not ended, process holds memory, GPU utilisation 0 % for "
            f"{rules.idle_seconds:g} s",
            evidence={**evidence, "utilization_gpu_percent": 0},
            hold_seconds=rules.idle_seconds,
        )


def _gib(n: int | None) -> str:
    if n is None:
        return "unknown memory"
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _program(proc: AttributedProcess) -> str:
    """What a person needs to find the process: its program and who runs it."""
    program = proc.command or proc.executable or "unknown program"
    if proc.user is not None:
        return f"{program}, user {proc.user}"
    return program if proc.uid is None else f"{program}, uid {proc.uid}"
