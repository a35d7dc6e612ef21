"""Pure value types shared by every layer. No I/O, no vendor types. The probe runs' own are
in `runs.py`, a figure against its reference as a sentence states it in `comparison.py`, both
imported from here like the rest."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from observer.domain.comparison import Comparison as Comparison
from observer.domain.comparison import compare as compare
from observer.domain.comparison import compare_seconds as compare_seconds
from observer.domain.comparison import compare_shares as compare_shares
from observer.domain.comparison import duration_parts as duration_parts
from observer.domain.comparison import written as written
from observer.domain.comparison import written_seconds as written_seconds
from observer.domain.mig import MigInstance as MigInstance
from observer.domain.runs import AccessAttempt as AccessAttempt
from observer.domain.runs import Attempt as Attempt
from observer.domain.runs import Expectation as Expectation
from observer.domain.runs import Outcome as Outcome
from observer.domain.runs import ProbeRun as ProbeRun
from observer.domain.runs import RunState as RunState

JsonValue = Any


# A view is stale - the observer is blind to its source - once it is older than this many of
# its source's intervals: then it opens nothing, closes nothing, and the gap is blind time.
STALE_AFTER_INTERVALS = 3


class ReadErrorKind(StrEnum):
    """Why one hardware read failed; each kind has its own handling in the sampler."""

    NOT_SUPPORTED = "not_supported"  # remembered: the call is not retried every tick
    GPU_LOST = "gpu_lost"  # opens a gpu_lost condition
    DRIVER_NOT_LOADED = "driver_not_loaded"  # the driver went away under us: initialise again
    NOT_FOUND = "not_found"
    NO_PERMISSION = "no_permission"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ReadError:
    call: str
    kind: ReadErrorKind
    message: str


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    index: int
    uuid: str
    name: str
    memory_total_bytes: int | None
    pci_bus_id: str | None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_memory_bytes: int | None  # None: NVML could not attribute memory (e.g. under MIG)
    mig_uuid: str | None = None  # the MIG instance it runs on, when its GPU is in MIG mode


@dataclass(frozen=True, slots=True)
class GpuSample:
    """The lean tier: read every tick. A field is None only when its read failed (see
    `errors`) or was skipped as known unsupported; it is never a made-up value."""

    at: datetime
    index: int
    utilization_gpu_percent: int | None = None
    utilization_memory_percent: int | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    processes: tuple[GpuProcess, ...] | None = None
    power_milliwatts: int | None = None
    temperature_celsius: int | None = None
    sm_clock_mhz: int | None = None
    clock_event_reasons: int | None = None
    performance_state: int | None = None
    ecc_volatile_uncorrected_errors: int | None = None
    # The MIG instances of a GPU in MIG mode; None: MIG off, not supported or not read.
    mig_instances: tuple[MigInstance, ...] | None = None
    errors: tuple[ReadError, ...] = ()

    @property
    def lost(self) -> bool:
        return any(e.kind is ReadErrorKind.GPU_LOST for e in self.errors)


@dataclass(frozen=True, slots=True)
class GpmActivity:
    """What a GPU did between two GPM samples (NVML's GPU Performance Monitoring, Hopper and
    later), each a fraction 0..1 of the interval: what `utilization_gpu_percent`, the share
    of time any kernel ran, cannot tell (one warp spinning on one SM reads 100 % there)."""

    sm_active_ratio: float  # the mean share of SMs busy (a warp resident)
    sm_occupancy_ratio: float  # resident warps over the SMs' maximum
    tensor_active_ratio: float  # the share of cycles any tensor pipe was busy
    dram_active_ratio: float  # DRAM bandwidth used over its peak


class GpmState(StrEnum):
    """A GPU's GPM answer that is no activity: never read as a 0."""

    NOT_SUPPORTED = "not_supported"  # a GPU before Hopper, or a driver without GPM


@dataclass(frozen=True, slots=True)
class GpuCounters:
    """The expensive tier: cumulative and health counters read on a slower cadence."""

    at: datetime
    index: int
    energy_millijoules: int | None = None
    pcie_tx_kilobytes_per_second: int | None = None
    pcie_rx_kilobytes_per_second: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failed: bool | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retired_pages_pending: bool | None = None
    ecc_aggregate_uncorrected_errors: int | None = None  # over the device's lifetime
    pcie_replay_errors: int | None = None
    # NVLink data-link errors summed over the active links: NVML's DL_REPLAY, DL_RECOVERY and
    # DL_CRC_FLIT + DL_CRC_DATA counters.
    nvlink_replay_errors: int | None = None
    nvlink_recovery_errors: int | None = None
    nvlink_crc_errors: int | None = None
    errors: tuple[ReadError, ...] = ()


class XidSource(StrEnum):
    NVML = "nvml"  # an NVML event set (nvmlEventSetWait_v2)
    KERNEL_LOG = "kernel_log"  # an `NVRM: Xid` line of the kernel log


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One Xid error as a source reported it. NVML names the device by index (and the PCI bus
    id it read when registering) but no process; the kernel log names the PCI bus id and,
    on most drivers, the pid and process name, but no index."""

    at: datetime
    code: int
    source: XidSource
    pci_bus_id: str | None  # as the source wrote it
    gpu_index: int | None = None
    pid: int | None = None
    process_name: str | None = None
    detail: str = ""  # the driver's text after the code


@dataclass(frozen=True, slots=True)
class XidSourcesState:
    """Why each of a node's Xid sources misses Xids, as its event thread last found them
    (None: it misses none). `nvml`: some GPU not registered for NVML's events (which, and
    why), or the event set not open or its wait failing; `kernel_log`: its lines not read, or
    in no format the reader knows. The node sees its Xids while either source sees them."""

    nvml: str | None
    kernel_log: str | None

    @property
    def blind(self) -> bool:
        return self.nvml is not None and self.kernel_log is not None


class OwnerKind(StrEnum):
    POD = "pod"
    SLURM_JOB = "slurm_job"
    JOB = "job"  # a job known by id only (recorded traces)
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Owner:
    kind: OwnerKind
    id: str = ""
    container_id: str = ""

    @property
    def label(self) -> str:
        return f"{self.kind.value}/{self.id}" if self.id else self.kind.value


NO_OWNER = Owner(OwnerKind.NONE)


class OwnerPhase(StrEnum):
    RUNNING = "running"
    ENDED = "ended"
    UNKNOWN = "unknown"  # the directory could not tell; never treated as ended


@dataclass(frozen=True, slots=True)
class OwnerState:
    phase: OwnerPhase
    ended_at: datetime | None = None
    name: str | None = None  # what people call the owner (a pod's namespace/name), where known


@dataclass(frozen=True, slots=True)
class AttributedProcess:
    """A GPU process as NVML lists it, joined with what the node knows about it."""

    gpu_index: int
    gpu_uuid: str
    pid: int
    used_memory_bytes: int | None
    exists: bool
    command: str | None  # the full command line: only with agent.expose_command_lines
    owner: Owner
    owner_state: OwnerState
    executable: str | None = None  # the program's file name, never its arguments
    uid: int | None = None  # the real uid it runs as
    user: str | None = None  # that uid's name, where the node can tell
    mig_uuid: str | None = None  # the MIG instance it runs on (GpuProcess.mig_uuid)


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class FindingKind(StrEnum):
    EVENT = "event"  # it happened
    CONDITION = "condition"  # it opens, stays open, closes


Subject = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Symptom:
    """What a detector sees on one evaluation. The condition tracker turns symptoms that
    persist beyond `hold_seconds` into findings; `since` is when the cause began, if the
    detector knows it better than 'first seen'."""

    detector: str
    subject: Subject
    severity: Severity
    summary: str
    rule: str  # the rule that fired, in words a person can check against the evidence
    evidence: Mapping[str, JsonValue]
    hold_seconds: float = 0.0
    since: datetime | None = None

    @property
    def key(self) -> str:
        return finding_key(self.detector, self.subject)


@dataclass(frozen=True, slots=True)
class Finding:
    detector: str
    kind: FindingKind
    subject: Subject
    severity: Severity
    summary: str
    opened_at: datetime
    closed_at: datetime | None
    evidence: Mapping[str, JsonValue] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return finding_key(self.detector, self.subject)

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


def finding_key(detector: str, subject: Subject) -> str:
    """Stable identity of a condition: its detector and subject, order-independent."""
    return detector + "|" + ",".join(f"{k}={subject[k]}" for k in sorted(subject))


class DriverState(StrEnum):
    OK = "ok"
    NOT_LOADED = "not_loaded"  # the node is blind until the driver comes back
    LIBRARY_MISSING = "library_missing"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class DriverStatus:
    state: DriverState
    driver_version: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU on one tick: identity (None while the device cannot be opened), the lean
    sample, the latest expensive counters, the learned driver memory baseline, and what its
    SMs did (GPM)."""

    index: int
    identity: GpuIdentity | None
    sample: GpuSample | None
    counters: GpuCounters | None
    baseline_memory_bytes: int | None
    # Since the previous tick; None: not read this tick (the first of a GPU's two samples,
    # a read that failed, or a backend that has none).
    activity: GpmActivity | GpmState | None = None

    @property
    def lost(self) -> bool:
        return self.identity is None or (self.sample is not None and self.sample.lost)


@dataclass(frozen=True, slots=True)
class GpuAssignment:
    """One GPU the node's scheduler agent gave one owner. The owner's id is "" when the agent
    names the owner but the node cannot tell its id (a pod whose UID is not yet known)."""

    gpu_uuid: str
    owner: Owner
    owner_name: str | None
    # The parts of the GPU given (MIG devices, as the source names them); empty: all of it.
    parts: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return self.owner_name or self.owner.label


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """The node allocation layer: what the node's scheduler agent (the kubelet, slurmd) says it
    gave whom, from its last reading. While it cannot be read (`up` false, `reason` why) no
    assignment is given and every owner's state is unknown."""

    source: str  # "kubelet" | "slurm", or "none" when no scheduler agent was found
    up: bool
    reason: str | None
    read_at: datetime | None
    assignments: tuple[GpuAssignment, ...] = ()
    allocatable: frozenset[str] | None = None  # GPU UUIDs it can assign; None: it does not say

    def assigned(self, gpu_uuid: str) -> tuple[GpuAssignment, ...]:
        return tuple(a for a in self.assignments if a.gpu_uuid == gpu_uuid)

    def knows(self, gpu_uuid: str) -> bool:
        """Whether this layer speaks of the GPU at all, so 'assigned to nobody' is a fact."""
        return self.up and self.allocatable is not None and gpu_uuid in self.allocatable


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """Everything one agent knows at one tick: what /v1/snapshot serves and /metrics shows."""

    node: str
    at: datetime
    driver: DriverStatus
    gpus: tuple[GpuReading, ...]
    processes: tuple[AttributedProcess, ...]
    findings: tuple[Finding, ...]  # open ones and those closed within the retention window
    allocation: NodeAllocation | None = None  # None: no owner directory asked (replay, none)


# --- The scheduler and the probes -------------------------------------------------------


class JobPhase(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.CANCELLED)


# Every log-canary line, whoever writes it: "observer-canary run=<run id> seq=<n> ts=<unix s>",
# n counting from 0, then for a padded canary " pad=<k>:" and k times "x" (a line torn short
# shows by its count). The writers (`observer probe log-canary|log-burst`, the simulated
# cluster) and the log-loss detector share it.
CANARY_MARK = "observer-canary"
CANARY_TS_CHARS = 20  # as `date +%s.%N`: ten digits of seconds, a point, nine of nanoseconds


class Behaviour(StrEnum):
    """What a probe's workload does; each backend turns it into its platform's terms."""

    SLEEP = "sleep"  # hold the GPUs for the duration, then exit with exit_code
    GPU_BUSY = "gpu_busy"  # keep the GPUs busy for the duration (a known busy interval)
    LOG_CANARY = "log_canary"  # write sequenced, timestamped lines, then exit
    BAD_COMMAND = "bad_command"  # a command that does not exist
    BAD_IMAGE = "bad_image"  # an image that cannot be pulled (container platforms)
    OOM = "oom"  # allocate past the memory limit
    GPU_COMM = "gpu_comm"  # copy between every pair of the job's GPUs, judged by link rate


@dataclass(frozen=True, slots=True)
class Workload:
    gpus_per_node: int
    nodes: int = 1
    duration_seconds: float = 60.0
    behaviour: Behaviour = Behaviour.SLEEP
    exit_code: int = 0
    log_lines: int = 0
    log_interval_seconds: float = 0.0
    log_line_bytes: int = 0  # pad each canary line to about this size; 0: unpadded
    gpu_memory_gib: float = 4.0  # gpu_busy: device memory each burner holds
    gpu_utilization_percent: float = 100.0  # gpu_busy: the burner's target busy share
    # gpu_comm: a GPU pair's expected copy rate, GB/s one way, by GPU model name (the longest
    # name CUDA's device name contains wins); (): the program's own table
    expected_gbps: tuple[tuple[str, float], ...] = ()

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


def canary_padding(run_id: str, workload: Workload) -> str:
    """The " pad=<k>:xx..." field that brings the run's longest canary line (newline included)
    to `workload.log_line_bytes`; "" when unpadded or already that long. One string per run,
    so a shell script writes it without counting (shorter sequence numbers: shorter lines)."""
    longest = f"{CANARY_MARK} run={run_id} seq={max(workload.log_lines - 1, 0)} ts="
    room = workload.log_line_bytes - len(longest) - CANARY_TS_CHARS - len(" pad=:\n")
    k = room - len(str(room))
    while k + len(str(k)) < room:  # the count's own digits take room too
        k += 1
    return f" pad={k}:{'x' * k}" if k > 0 else ""


@dataclass(frozen=True, slots=True)
class JobRequest:
    """One probe submission. `run_id` travels with the job (label, comment) so a restarted
    controller can adopt what it had submitted."""

    run_id: str
    probe: str
    tenant: str  # Slurm account, Kubernetes namespace
    queue: str | None  # Slurm partition, Kueue LocalQueue
    workload: Workload
    priority: str | None = None  # Slurm QOS, Kubernetes priorityClassName


@dataclass(frozen=True, slots=True)
class JobStatus:
    """A job as the platform reports it now. `reason` and `message` are the platform's own
    words (Slurm's Reason, a pod condition's reason/message, an event)."""

    job_id: str
    run_id: str | None  # None for jobs the observer did not submit
    tenant: str
    queue: str | None
    phase: JobPhase
    gpus: int
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    nodes: tuple[str, ...] = ()
    # What the node agents name as the owner of the job's GPU processes: Slurm's and the
    # simulator's job id, the UIDs of a Kubernetes Job's pods. Empty: the platform named none.
    owner_ids: tuple[str, ...] = ()
    # Set while the platform ends the job but it still holds its resources: Slurm's end of a
    # job COMPLETING, Kubernetes' deletionTimestamp (the deletion's grace included). The phase
    # stays the platform's own (Slurm's COMPLETING is running, a deleted Job is cancelled).
    ending_since: datetime | None = None
    priority: str | None = None  # Slurm's QOS, a pod's priorityClassName
    user: str | None = None  # who submitted it, where the platform says (Slurm's user name)
    # The observer's inference service it is a replica of: the observer's own, as a probe's.
    service: str | None = None
    # How many times the platform ended it and queued it again (Slurm's restart_cnt, a
    # Kubernetes Job's failed pods), the attempts it can still name (sacct --duplicates;
    # fewer while accounting is unreachable), and, requeued, when its latest could start.
    restarts: int = 0
    attempts: tuple[Attempt, ...] = ()
    eligible_at: datetime | None = None
    # A pending job's expected start as the platform estimates it (Slurm's backfill
    # scheduler's StartTime); None: it gives none, or the job is not pending.
    expected_start_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class QueueState:
    tenant: str
    queue: str | None
    pending_jobs: int
    pending_gpus: int
    running_jobs: int
    running_gpus: int
    longest_wait_seconds: float
    pending_reasons: Mapping[str, int] = field(default_factory=dict)
    # The tenant's guarantee, where its queue system sets one for it alone (a ClusterQueue
    # only its LocalQueues feed): the entitlement the fairness detector weighs it against.
    nominal_gpus: int | None = None
    borrowing_limit_gpus: int | None = None
    # Whose jobs hold the running GPUs: by priority (Slurm QOS, priorityClassName) and by user,
    # where the platform names them.
    running_gpus_by_priority: Mapping[str, int] = field(default_factory=dict)
    running_gpus_by_user: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LocalQueue:
    """A Kueue LocalQueue: a namespace's door to a ClusterQueue, with its own workloads."""

    namespace: str
    name: str
    cluster_queue: str
    pending_workloads: int = 0
    admitted_workloads: int = 0


@dataclass(frozen=True, slots=True)
class QueueQuota:
    """A queue system's queue and what it guarantees: a Kueue ClusterQueue (its GPU
    nominalQuota and borrowingLimit summed over flavors, what its admitted and reserving
    workloads use) or a Volcano Queue (its weight, its GPU capability, its state). `tenants`
    are the namespaces whose LocalQueues feed it (Kueue) or whose PodGroups were seen in it.
    A limit is None where the queue sets none: no nominal quota, borrowing without limit."""

    system: str  # "kueue" | "volcano"
    name: str
    resource: str  # the GPUs' resource name its figures count (nvidia.com/gpu)
    tenants: tuple[str, ...] = ()
    local_queues: tuple[LocalQueue, ...] = ()  # those feeding it (Kueue), by namespace, name
    nominal_gpus: int | None = None
    borrowing_limit_gpus: int | None = None
    used_gpus: int = 0  # Kueue: flavorsUsage; Volcano: what its running pods hold
    reserved_gpus: int = 0  # Kueue: flavorsReservation
    borrowed_gpus: int = 0
    pending_workloads: int = 0  # Kueue: pendingWorkloads; Volcano: status.pending PodGroups
    admitted_workloads: int = 0  # Kueue: admittedWorkloads; Volcano: status.running
    cohort: str | None = None
    weight: int | None = None  # Volcano's spec.weight
    state: str | None = None  # Volcano's status.state (Open, Closed, Closing)


@dataclass(frozen=True, slots=True)
class SchedulerNode:
    name: str
    pool: str | None
    gpus_total: int
    gpus_allocated: int
    state: str  # the platform's word: idle, mixed, allocated, drained, down, Ready, NotReady...
    reason: str | None = None  # why drained/down/cordoned, as the platform says it


@dataclass(frozen=True, slots=True)
class SchedulerSnapshot:
    at: datetime
    queues: tuple[QueueState, ...]
    nodes: tuple[SchedulerNode, ...]
    # every job not finished, the observer's and everyone else's, and every job that ended
    # but still holds resources (`ending_since` set)
    jobs: tuple[JobStatus, ...]
    quotas: tuple[QueueQuota, ...] = ()  # the queue systems' queues (Kueue, Volcano)


class TargetState(StrEnum):
    UP = "up"
    DOWN = "down"
    UNKNOWN = "unknown"  # not scraped yet


@dataclass(frozen=True, slots=True)
class TargetHealth:
    """One scrape target as Prometheus reports it on /api/v1/targets."""

    job: str
    instance: str
    labels: Mapping[str, str]
    health: TargetState
    last_scrape: datetime | None  # None: never scraped
    last_scrape_duration_seconds: float
    last_error: str  # empty after a good scrape
    scrape_interval_seconds: float
    scrape_timeout_seconds: float
