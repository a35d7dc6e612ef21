"""What the store keeps beside the domain's own types: GPU samples as the controller keeps
them and their counts, queue samples, node changes, alerts, interventions, report deliveries,
finished-job tallies, the controller's own runs and the probe launches it skipped. Pure
value types, so that the report builders and the controller read them without loading the
database layer."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from observer.domain import JobPhase, JobStatus, JsonValue, QueueState, SchedulerNode

# NVML reports utilisation in whole percent; the rollups count samples per percent.
UTILIZATION_PERCENTS = range(101)

# What kind of task held a GPU, beside the probe names of the observer's own runs.
TENANT_JOB = "job"  # a tenant's own job, not one of the observer's probes
SERVICE_TASK = "inference"  # a replica of the observer's inference service
TASK_NOT_KNOWN = ""  # in the counts: held by a known tenant, but by which task is not known
# The type of task that held a GPU, for who-used-what: the observer's own runs and service
# are PROBE_TYPE, a tenant's own job the type reports.task_types gives it (OTHER_TYPE when no
# rule matches); TASK_NOT_KNOWN in the counts where the sample had none.
PROBE_TYPE = "probe"
OTHER_TYPE = "other"


@dataclass(frozen=True, slots=True)
class StoredGpuSample:
    """One GPU's lean sample as the controller keeps it (a subset of GpuSample, per node)."""

    node: str
    gpu_uuid: str
    gpu_index: int
    at: datetime
    utilization_gpu_percent: int | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    power_milliwatts: int | None = None
    process_count: int | None = None
    tenant: str | None = None  # whose job held the GPU, where the owner is known
    # The probe's name for an observer's run, TENANT_JOB for a tenant's own; None when not
    # known (nothing held it, the owner unknown, jobs of several tasks, stored before 0013).
    task: str | None = None
    # GPM's SM activity since the GPU's previous sample, whole percent; None when GPM gave
    # none (never 0: a GPU without GPM did not idle). gpm_supported says why: False, the GPU
    # or driver has no GPM; None, not read (a GPU's first tick, a failed read, before 0021).
    sm_active_percent: int | None = None
    gpm_supported: bool | None = None
    # PROBE_TYPE or the tenant's job's type (reports.task_types); None where `task` is, or the
    # jobs were of several types, or stored before 0022.
    task_type: str | None = None


class GpuMeasure(StrEnum):
    """What a GPU sample's counts count, per whole percent: NVML's utilisation (the share of
    time any kernel ran) or GPM's SM activity (the share of SMs busy)."""

    UTILIZATION = "utilization"
    SM_ACTIVE = "sm_active"


# Samples per utilisation percent, indexed by percent (readings outside 0..100 at the ends).
Histogram = tuple[int, ...]
# (tenant, task, samples per percent), for the samples attributed to a tenant.
TenantTaskCounts = tuple[tuple[str, str, Histogram], ...]


@dataclass(frozen=True, slots=True)
class GpuSampleCounts:
    """A period's GPU samples counted in the database rather than read one by one: by UTC
    minute, by node (with how many could not be read: for SM activity, how many came from a
    GPU without GPM) and by tenant and task (TASK_NOT_KNOWN
    where not known). A key may come more than once (a period is counted in parts); its
    counts add up."""

    by_minute: tuple[tuple[datetime, Histogram], ...] = ()
    by_node: tuple[tuple[str, Histogram, int], ...] = ()
    by_tenant_task: TenantTaskCounts = ()


# A period's attributed GPU samples counted by the database: (node, tenant, task type,
# samples, the sum of their utilisation percents, those that read 0 %).
UsageCounts = tuple[tuple[str, str, str, int, int, int], ...]
# (tenant, whole GiB of memory used, samples): the tenant's GPUs' memory, counted.
MemoryCounts = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class GpuUsageCounts:
    """Who used the GPUs in a period, as the database counted the samples attributed to a
    tenant: per node, tenant and task type, and the memory used per tenant. A key may come
    more than once (a period is counted in parts); its counts add up."""

    usage: UsageCounts = ()
    memory: MemoryCounts = ()


@dataclass(frozen=True, slots=True)
class RunSpan:
    """Where and when one probe run held GPUs: its nodes, from its start to its end (or to
    the end of what a report reads); its GPUs are those whose samples name its tenant and its
    probe as the task."""

    run_id: str
    tenant: str
    task: str
    nodes: tuple[str, ...]
    start: datetime
    end: datetime


@dataclass(frozen=True, slots=True)
class RunGpuFigures:
    """The GPU samples attributed to one run within its span (RunSpan): how many, of how many
    GPUs, the mean and highest utilisation of those that read it, and the most memory one of
    its GPUs used (None: no sample read it)."""

    run_id: str
    samples: int
    gpus: int
    utilization_avg_percent: float | None
    utilization_max_percent: int | None
    memory_peak_bytes: int | None


@dataclass(frozen=True, slots=True)
class StoredQueueSample:
    """One tenant's queue as a stored scheduler snapshot saw it."""

    at: datetime
    state: QueueState


@dataclass(frozen=True, slots=True)
class StoredNodeChange:
    """A node appeared or changed at `at`; or, `removed`, it left the snapshots and `node`
    is its last-known state."""

    at: datetime
    node: SchedulerNode
    removed: bool = False


@dataclass(frozen=True, slots=True)
class StoredAlert:
    """One firing of an alert: `starts_at` as Alertmanager reports it, `ends_at` the end it
    reported when last seen (for an alert still firing, when it would resolve unless
    refreshed), `last_seen_at` when it was last polled while firing."""

    fingerprint: str
    name: str
    severity: str | None
    starts_at: datetime
    ends_at: datetime | None
    last_seen_at: datetime
    labels: Mapping[str, str]
    summary: str | None = None


class InterventionSource(StrEnum):
    RECORDED = "recorded"  # told by a person: `observer intervention add`
    DETECTED = "detected"  # seen in the platform's own state


@dataclass(frozen=True, slots=True)
class StoredIntervention:
    """A manual intervention: when, by whom, why, on what (e.g. {"node": "gpu-07"}). A
    detected one says what was done in detail["action"]."""

    at: datetime
    by: str
    reason: str
    subject: Mapping[str, str]
    source: InterventionSource = InterventionSource.RECORDED
    detail: Mapping[str, JsonValue] = field(default_factory=dict)


# detail["action"] of a quota change the platform recorded, stored as it is read
QUOTA_CHANGED = "quota_changed"

DELIVERY_FAILED = "failed"


@dataclass(frozen=True, slots=True)
class StoredDelivery:
    """One report handed to one channel: `report` names it ("daily-2026-11-30", "verdict"),
    `outcome` is what the channel took ("full", "summary", "attachment") or DELIVERY_FAILED,
    `detail` its answer (secrets masked)."""

    at: datetime
    report: str
    channel: str
    outcome: str
    attempts: int
    detail: str | None = None


# Finished jobs are counted per quarter hour of their end (UTC): every timezone's offset is
# whole quarter hours, so a local day is whole slots.
JOB_SLOT = timedelta(minutes=15)


def job_slot(at: datetime) -> datetime:
    """The start of the slot holding `at`."""
    size = JOB_SLOT.total_seconds()
    return datetime.fromtimestamp(at.timestamp() // size * size, UTC)


class JobOrigin(StrEnum):
    """Who submitted a listed job: a tenant, or the observer itself (a probe: it has a run
    id), whose outcome the probe runs judge against what the probe expects."""

    TENANT = "tenant"
    OBSERVER = "observer"


def job_origin(job: JobStatus) -> JobOrigin:
    """A tenant's own job, or the observer's (a probe run's, an inference replica's)."""
    return JobOrigin.TENANT if job.run_id is None and job.service is None else JobOrigin.OBSERVER


@dataclass(frozen=True, slots=True)
class JobTally:
    tenant: str
    phase: JobPhase
    reason: str | None  # the platform's
    cause: str | None  # a failed job's (reports' causes.Cause); None for any other
    jobs: int
    origin: JobOrigin | None = JobOrigin.TENANT  # None: tallied before origins were kept


@dataclass(frozen=True, slots=True)
class JobWait:
    """How many of one tenant's jobs that ended in a slot had waited `wait_seconds` (whole
    seconds, the platform's submission to its start) before they started."""

    tenant: str
    wait_seconds: int
    jobs: int
    origin: JobOrigin | None = JobOrigin.TENANT  # None: kept before origins were


# A pending job whose scheduler gave no reason is counted under this word, as a probe's is.
NO_PENDING_REASON = "Unknown"


@dataclass(frozen=True, slots=True)
class PendingTime:
    """The time a tenant's own jobs (not the observer's) spent pending in one slot for one
    reason, in the scheduler's words, added up over the jobs: two jobs pending a minute each
    are 120 seconds."""

    slot: datetime
    tenant: str
    reason: str
    seconds: float


@dataclass(frozen=True, slots=True)
class JobEstimate:
    """A job seen waiting, and the platform's estimate of its start (Slurm's backfill
    StartTime): the first seen and when it was seen, and the last seen before the job started
    (`started_at`, None while it has not). All three None: it started with none ever seen."""

    job_id: str
    tenant: str
    origin: JobOrigin
    gpus: int
    first_expected_start_at: datetime | None = None
    first_seen_at: datetime | None = None
    last_expected_start_at: datetime | None = None
    started_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class JobSlot:
    """Every tenant's jobs that ended in [start, start + JOB_SLOT), counted by tenant, phase,
    reason and cause, as listed up to `listed_until`; `complete` False when the platform said its
    listing may have missed some (`note` says why). `waits`: those that started, by tenant and
    wait (none for slots listed before waits were kept)."""

    start: datetime
    listed_until: datetime
    complete: bool
    note: str
    tallies: tuple[JobTally, ...]
    waits: tuple[JobWait, ...] = ()


class SkipReason(StrEnum):
    """Why a probe launch that came due submitted nothing."""

    BUDGET = "budget"  # over controller.max_probe_gpus or max_probe_gpus_per_tenant
    NO_OTHER_TENANT = "no_other_tenant"  # an isolation probe with a single tenant
    BACKEND_ERROR = "backend_error"  # the platform could not be asked


@dataclass(frozen=True, slots=True)
class ProbeSkip:
    """One copy of a probe that came due for `tenant` at `at` in `window` and was not run."""

    at: datetime
    probe: str
    tenant: str
    window: str | None
    reason: SkipReason


class RestartCause(StrEnum):
    STOPPED = "stopped"  # the previous run recorded a clean stop
    KILLED = "killed_or_crashed"  # it stopped being alive without a word


# The sources a controller may or may not be set up to read, as the reports name them.
WATCHABLE = ("agents", "prometheus", "logs", "alerts")


@dataclass(frozen=True, slots=True)
class ControllerRun:
    """One controller process: started, last recorded alive, and stopped when it stopped
    cleanly (None: killed, crashed, or still running). `watching`: the optional sources it was
    set up to read (`WATCHABLE`; None: a run recorded before the store kept them)."""

    id: int
    started_at: datetime
    last_alive_at: datetime
    host: str
    pid: int
    stopped_at: datetime | None = None
    watching: tuple[str, ...] | None = None

    @property
    def ended_at(self) -> datetime:
        """The last instant it is known to have run."""
        return self.stopped_at or self.last_alive_at


@dataclass(frozen=True, slots=True)
class ControllerRestart:
    """The controller was not running from `down_from` to `up_at`."""

    down_from: datetime
    up_at: datetime
    cause: RestartCause


def controller_not_running(
    runs: Sequence[ControllerRun], end: datetime, grace_seconds: float
) -> list[ControllerRestart]:
    """Every stretch before `end` with no controller running: between its runs, and after
    the last one when that one has not been alive for `grace_seconds` (it stopped, or was
    killed and never started again; its `up_at` is then `end`)."""
    down = controller_restarts(runs)
    if runs:
        last = runs[-1]
        if last.ended_at + timedelta(seconds=grace_seconds) < end:
            cause = RestartCause.KILLED if last.stopped_at is None else RestartCause.STOPPED
            down.append(ControllerRestart(last.ended_at, end, cause))
    return down


def overlap_seconds(
    start: datetime, end: datetime, stretches: Sequence[ControllerRestart]
) -> float:
    """How much of [start, end) falls in `stretches`."""
    return sum(
        max(0.0, (min(end, s.up_at) - max(start, s.down_from)).total_seconds()) for s in stretches
    )


def controller_restarts(runs: Sequence[ControllerRun]) -> list[ControllerRestart]:
    """The downtime between consecutive runs (in start order): a run that recorded no stop
    ended at its last sign of life, killed or crashed."""
    return [
        ControllerRestart(
            before.ended_at,
            after.started_at,
            RestartCause.KILLED if before.stopped_at is None else RestartCause.STOPPED,
        )
        for before, after in itertools.pairwise(runs)
    ]


@dataclass(frozen=True, slots=True)
class InferenceSample:
    """One look at the inference service: the replicas wanted, ready and waiting for a node,
    and one /infer request to each ready replica (`latencies_ms` of those answered 200;
    `errors`, those that failed or answered otherwise)."""

    at: datetime
    service: str
    desired_replicas: int
    ready_replicas: int
    pending_replicas: int
    requests: int
    errors: int
    latencies_ms: tuple[float, ...]


class PhaseKind(StrEnum):
    START = "start"  # deployed until its first replicas were ready
    SCALE_OUT = "scale_out"  # scaled up until every new replica was ready
    RESTART = "restart"  # a rolling restart until every replica was a new one, ready


@dataclass(frozen=True, slots=True)
class InferencePhase:
    """One change of the service carried through: from `started_at` until `ready_at`, when
    the `replicas_to` replicas were ready; `pending_seconds`, how long some replica of it
    waited for a node, last for `pending_reason` (the scheduler's words); `unavailable_seconds`,
    how long no replica answered meanwhile."""

    service: str
    kind: PhaseKind
    started_at: datetime
    ready_at: datetime
    replicas_from: int
    replicas_to: int
    pending_seconds: float
    pending_reason: str | None
    unavailable_seconds: float


@dataclass(frozen=True, slots=True)
class TableSize:
    """One table of the store: its rows and the bytes it takes, its indexes included."""

    name: str
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class StoreSize:
    """The store's size on its volume at `at`, as the controller measured it."""

    at: datetime
    bytes: int


# Growth measured over less than this says little of a day's.
GROWTH_SPAN = timedelta(hours=6)


def growth_per_day(sizes: Sequence[StoreSize], now_bytes: int, now: datetime) -> float | None:
    """Bytes a day the store grew from the oldest of `sizes` (the last day's) to `now_bytes`
    at `now`; None when measured over less than GROWTH_SPAN."""
    first = next(iter(sizes), None)
    if first is None or now - first.at < GROWTH_SPAN:
        return None
    return (now_bytes - first.bytes) / ((now - first.at) / timedelta(days=1))


def days_until_full(free_bytes: int, per_day: float | None) -> float | None:
    """Days until growing `per_day` bytes a day uses `free_bytes`; None when it does not
    grow (or its growth is not known)."""
    return free_bytes / per_day if per_day is not None and per_day > 0 else None


def size_text(size: float) -> str:
    """A size in bytes as a person reads it: 1.2 GB (powers of 1000, as disks are sold)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(size) < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
