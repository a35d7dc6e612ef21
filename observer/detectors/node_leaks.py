"""Node-local unreleased resources and GPU health, from one tick of one agent.

Rules (each a condition, opened by the tracker after its hold time):
- unreleased_memory: a process still on the GPU after its owner (pod, job) ended + grace;
- orphan_process: a process on the GPU that belongs to no pod or job, beyond grace;
- vanished_process: NVML lists a pid that no longer exists on the host, beyond grace;
- memory_without_process: memory above the driver baseline with no process listed;
- allocated_idle: an owner that has not ended holds GPU memory while the GPU stays at 0 %
  (with `idle_sm_active_ratio` set, on a GPU that reports GPM: while its SM activity stays
  below that, so that one warp spinning on one SM is not work), or (the node layer) a GPU
  the node's scheduler agent gave a running owner has no process and stays at 0 %;
- gpu_not_assigned: a process of a running owner on a GPU the scheduler agent did not give it
  (a container that sees GPUs it did not request: isolation), or on a MIG instance of a GPU
  the owner was given other MIG devices of (by their UUIDs);
- owner_state_unknown: the node's scheduler agent cannot be read, so no owner's state is known;
- gpu_lost: the device fell off the bus; nvml_unavailable: the node is blind to its GPUs.
Process findings carry `gpu_assigned_to`, whom the scheduler agent gave the GPU ([]: nobody),
where it speaks of that GPU; those of a process on a MIG instance name the instance
(`mig_uuid` in subject and evidence, and in the summary).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    GpmActivity,
    GpuAssignment,
    GpuReading,
    JsonValue,
    NodeAllocation,
    Owner,
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
GPU_NOT_ASSIGNED = "gpu_not_assigned"
_MIG_UUID = re.compile(r"^MIG-[0-9a-f]{8}-")
OWNER_STATE_UNKNOWN = "owner_state_unknown"
# Every detector of the node-local rules: what an agent reports of its node.
DETECTORS = (
    GPU_PROCESS_DETECTORS
    | GPU_MEMORY_DETECTORS
    | {GPU_NOT_ASSIGNED, OWNER_STATE_UNKNOWN, "gpu_lost", "nvml_unavailable"}
)


@dataclass(frozen=True, slots=True)
class NodeView:
    node: str
    driver: DriverStatus
    gpus: Sequence[GpuReading]
    processes: Sequence[AttributedProcess]
    allocation: NodeAllocation | None = None  # None: no scheduler agent asked


def evaluate(view: NodeView, rules: NodeLeakSettings) -> list[Symptom]:
    blind_to_owners = list(_owner_state_unknown(view))
    if view.driver.state is not DriverState.OK:
        return [
            *blind_to_owners,
            Symptom(
                detector="nvml_unavailable",
                subject={"node": view.node},
                severity=Severity.CRITICAL,
                summary=f"NVML unavailable on {view.node}: the node's GPUs are not observed",
                rule="NVML could not be initialised; every GPU reading is missing",
                evidence={"driver_state": view.driver.state.value, "message": view.driver.message},
            ),
        ]
    symptoms = [*blind_to_owners, *_gpu_health(view)]
    symptoms += _memory_without_process(view, rules)
    symptoms += _assigned_idle(view, rules)
    by_uuid = {g.identity.uuid: g for g in view.gpus if g.identity is not None}
    for proc in view.processes:
        symptoms += _process_symptoms(
            view.node, proc, by_uuid.get(proc.gpu_uuid), view.allocation, rules
        )
    return symptoms


def covers(view: NodeView, detector: str, subject: Subject) -> bool:
    """Whether this tick observed what a condition is about, so its absence means 'gone'."""
    if detector in ("nvml_unavailable", OWNER_STATE_UNKNOWN):
        return True
    if view.driver.state is not DriverState.OK:
        return False
    if detector == "gpu_lost":
        return True
    if detector == GPU_NOT_ASSIGNED or (detector == "allocated_idle" and "pid" not in subject):
        # Seen only through the allocation layer: while it is down, nothing of it closes.
        allocation = view.allocation
        if allocation is None or not allocation.knows(subject.get("gpu_uuid", "")):
            return False
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


def _owner_state_unknown(view: NodeView) -> Iterator[Symptom]:
    allocation = view.allocation
    if allocation is None or allocation.up:
        return
    yield Symptom(
        detector=OWNER_STATE_UNKNOWN,
        subject={"node": view.node},
        severity=Severity.WARNING,
        summary=f"owner state unknown on {view.node}: {allocation.source} cannot be read, so "
        "no process's owner is known to run or to have ended",
        rule="the node's scheduler agent (kubelet pod-resources, slurmd) does not answer",
        evidence={
            "source": allocation.source,
            "reason": allocation.reason,
            "last_read_at": allocation.read_at.isoformat() if allocation.read_at else None,
        },
    )


def _assigned_idle(view: NodeView, rules: NodeLeakSettings) -> Iterator[Symptom]:
    allocation = view.allocation
    if allocation is None:
        return
    for gpu in view.gpus:
        sample, identity = gpu.sample, gpu.identity
        if identity is None or sample is None or sample.processes != ():
            continue
        if sample.utilization_gpu_percent != 0 or not allocation.knows(identity.uuid):
            continue
        for assignment in allocation.assigned(identity.uuid):
            yield Symptom(
                detector="allocated_idle",
                subject={"node": view.node, "gpu_uuid": identity.uuid, "owner": assignment.label},
                severity=Severity.WARNING,
                summary=f"{assignment.label} was given GPU {gpu.index} on {view.node} and runs "
                "nothing on it",
                rule=f"the {allocation.source} assigned the GPU to a running owner, no process on "
                f"it, GPU utilisation 0 % for {rules.idle_seconds:g} s",
                evidence={
                    "gpu_index": gpu.index,
                    "gpu_uuid": identity.uuid,
                    "owner": assignment.label,
                    "owner_id": assignment.owner.id or None,
                    "source": allocation.source,
                    "utilization_gpu_percent": 0,
                },
                hold_seconds=rules.idle_seconds,
            )


def _process_symptoms(
    node: str,
    proc: AttributedProcess,
    gpu: GpuReading | None,
    allocation: NodeAllocation | None,
    rules: NodeLeakSettings,
) -> Iterator[Symptom]:
    subject = {"node": node, "gpu_uuid": proc.gpu_uuid, "pid": str(proc.pid)}
    if proc.mig_uuid is not None:
        subject["mig_uuid"] = proc.mig_uuid
    knows_gpu = allocation is not None and allocation.knows(proc.gpu_uuid)
    holders = allocation.assigned(proc.gpu_uuid) if allocation is not None and knows_gpu else ()
    evidence = {
        "gpu_index": proc.gpu_index,
        "gpu_uuid": proc.gpu_uuid,
        "mig_uuid": proc.mig_uuid,
        "pid": proc.pid,
        "executable": proc.executable,
        "uid": proc.uid,
        "user": proc.user,
        "command": proc.command,
        "used_memory_bytes": proc.used_memory_bytes,
        "owner": proc.owner.label,
        "owner_name": proc.owner_state.name,
        "owner_phase": proc.owner_state.phase.value,
        "owner_ended_at": (
            proc.owner_state.ended_at.isoformat() if proc.owner_state.ended_at else None
        ),
    }
    if knows_gpu:
        evidence["gpu_assigned_to"] = [a.label for a in holders]
    owner = proc.owner_state.name or proc.owner.label
    held = _gib(proc.used_memory_bytes)
    on = _device(proc)
    if not proc.exists:
        yield Symptom(
            detector="vanished_process",
            subject=subject,
            severity=Severity.CRITICAL,
            summary=f"pid {proc.pid} is listed on {on} ({held}) but no longer exists on the host",
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
            summary=f"pid {proc.pid} ({_program(proc)}) uses {on} ({held}) and belongs to no "
            "pod or job"
            + (", and the GPU is assigned to nobody" if knows_gpu and not holders else ""),
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
            summary=f"pid {proc.pid} still holds {held} on {on} after its owner {owner} ended",
            rule=f"owner ended more than {rules.grace_seconds:g} s ago and the process is still "
            "listed on the GPU",
            evidence=evidence,
            hold_seconds=rules.grace_seconds,
            since=state.ended_at,
        )
        return
    # Running: the directory answered for this owner, so the allocation layer is its kind's.
    if (
        state.phase is OwnerPhase.RUNNING
        and allocation is not None
        and knows_gpu
        and not _given(proc, holders)
    ):
        given = sorted(a.gpu_uuid for a in allocation.assignments if a.owner == _bare(proc))
        breach = evidence
        if proc.mig_uuid is not None and any(a.owner == _bare(proc) for a in holders):
            # Given other MIG devices of this GPU: who holds this one is what matters.
            holders = tuple(a for a in holders if proc.mig_uuid in a.parts)
            breach = {**evidence, "gpu_assigned_to": [a.label for a in holders]}
        yield Symptom(
            detector=GPU_NOT_ASSIGNED,
            subject=subject,
            severity=Severity.CRITICAL,
            summary=f"{owner} runs pid {proc.pid} ({_program(proc)}) on {on}, "
            f"which the {allocation.source} did not give it"
            + (f" but gave {', '.join(a.label for a in holders)}" if holders else ""),
            rule=f"a running owner's process on a GPU not among those the {allocation.source} "
            f"assigned it, for {rules.grace_seconds:g} s",
            evidence={**breach, "owner_gpus": given, "source": allocation.source},
            hold_seconds=rules.grace_seconds,
        )
    # Unknown counts: a live process in a pod's or job's cgroup is the best sign of a
    # running owner a node has when no scheduler directory is wired.
    idle = _idleness(gpu, rules)
    if idle is not None and proc.used_memory_bytes != 0:
        sm_active = idle.get("sm_active_ratio")
        if sm_active is None:
            doing, measure = "the GPU does nothing", "GPU utilisation 0 %"
        else:
            doing = f"its SMs are {sm_active:.0%} active"
            measure = f"SM activity below {rules.idle_sm_active_ratio:.0%} (GPM)"
        yield Symptom(
            detector="allocated_idle",
            subject=subject,
            severity=Severity.WARNING,
            summary=f"{owner} holds {held} on {on} while {doing}",
            rule=f"owner not ended, process holds memory, {measure} for {rules.idle_seconds:g} s",
            evidence={**evidence, **idle},
            hold_seconds=rules.idle_seconds,
        )


def _given(proc: AttributedProcess, holders: Sequence[GpuAssignment]) -> bool:
    """Whether the process's owner was given the device it runs on: the GPU, or, for a
    process on a MIG instance of a GPU the owner was given MIG devices of by UUID (NVIDIA's
    device plugin), that MIG device. Parts named otherwise (a minor's `gi`, a DRA device, a
    pre-R470 `MIG-GPU-…/gi/ci`) cannot be told from one another by a MIG UUID: the GPU's."""
    mine = [a for a in holders if a.owner == _bare(proc)]
    if not mine:
        return False
    if proc.mig_uuid is None or any(not a.parts for a in mine):
        return True
    parts = {part for a in mine for part in a.parts}
    if not all(_MIG_UUID.match(part) for part in parts):
        return True
    return proc.mig_uuid in parts


def _idleness(gpu: GpuReading | None, rules: NodeLeakSettings) -> dict[str, JsonValue] | None:
    """What shows the GPU idle this tick, as evidence; None while it works or is unread. SM
    activity where the setting asks for it and the GPU reported it this tick, else 0 %
    utilisation."""
    if gpu is None or gpu.sample is None:
        return None
    threshold = rules.idle_sm_active_ratio
    if threshold is not None and isinstance(gpu.activity, GpmActivity):
        if gpu.activity.sm_active_ratio >= threshold:
            return None
        return {
            "sm_active_ratio": gpu.activity.sm_active_ratio,
            "utilization_gpu_percent": gpu.sample.utilization_gpu_percent,
        }
    return {"utilization_gpu_percent": 0} if gpu.sample.utilization_gpu_percent == 0 else None


def _bare(proc: AttributedProcess) -> Owner:
    """The owner as the allocation layer names it: a pod, not one of its containers."""
    return Owner(proc.owner.kind, proc.owner.id)


def _device(proc: AttributedProcess) -> str:
    """The device a process runs on, as a person finds it: the GPU, and its MIG instance."""
    if proc.mig_uuid is None:
        return f"GPU {proc.gpu_index}"
    return f"MIG instance {proc.mig_uuid} of GPU {proc.gpu_index}"


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
