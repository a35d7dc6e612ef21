"""The store's tables. Their schema in a database comes from the migrations, never from
`metadata.create_all`; a test checks that the two agree."""

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

from observer.records import UTILIZATION_PERCENTS


class UtcDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware instant, always read back in UTC. SQLite stores no offset, so values
    are normalised to UTC on the way in (which also keeps its text comparisons ordered);
    naive datetimes are refused rather than guessed."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()}: the store needs an aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# JSONB on PostgreSQL so evidence can be indexed and queried later; plain JSON text on SQLite.
JsonDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

# SQLite autoincrements only an INTEGER PRIMARY KEY; PostgreSQL needs 64 bits for weeks of
# samples from thousands of GPUs.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class _Table(SQLModel, registry=registry()):
    """Base of the store's tables: their own metadata, not SQLModel's process-wide one."""


metadata = _Table.metadata


class FindingRow(_Table, table=True):
    __tablename__ = "findings"
    # Re-saving the same condition (same key, same opening) updates it instead of adding it.
    __table_args__ = (sa.UniqueConstraint("key", "opened_at", name="uq_findings_key_opened_at"),)

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(index=True)
    detector: str = Field(index=True)
    kind: str
    severity: str
    subject: dict[str, str] = Field(sa_column=sa.Column(JsonDocument, nullable=False))
    summary: str
    opened_at: datetime = Field(sa_type=UtcDateTime, index=True)
    closed_at: datetime | None = Field(default=None, sa_type=UtcDateTime, index=True)
    evidence: dict[str, Any] = Field(sa_column=sa.Column(JsonDocument, nullable=False))
    node: str | None = Field(default=None, index=True)


class GpuSampleRow(_Table, table=True):
    __tablename__ = "gpu_samples"
    # (node, GPU, at) follows one GPU; (at) reads a period of the whole fleet.
    __table_args__ = (
        sa.Index("ix_gpu_samples_node_gpu_uuid_at", "node", "gpu_uuid", "at"),
        sa.Index("ix_gpu_samples_at", "at"),
    )

    id: int | None = Field(default=None, sa_column=sa.Column(BigId, primary_key=True))
    node: str
    gpu_uuid: str
    gpu_index: int
    at: datetime = Field(sa_type=UtcDateTime)
    utilization_gpu_percent: int | None = None
    memory_used_bytes: int | None = Field(default=None, sa_type=sa.BigInteger)
    memory_total_bytes: int | None = Field(default=None, sa_type=sa.BigInteger)
    power_milliwatts: int | None = Field(default=None, sa_type=sa.BigInteger)
    process_count: int | None = None
    tenant: str | None = None  # whose job held the GPU, where the owner is known
    task: str | None = None  # a probe's name, "job" (a tenant's own): records.StoredGpuSample
    sm_active_percent: int | None = None  # GPM; None, never 0, without it: StoredGpuSample
    gpm_supported: bool | None = None
    task_type: str | None = None  # "probe", or the tenant's job's type: StoredGpuSample


class ProbeRunRow(_Table, table=True):
    __tablename__ = "probe_runs"

    run_id: str = Field(primary_key=True)
    probe: str
    tenant: str = Field(index=True)
    queue: str | None = None
    user: str | None = None  # the platform's (Slurm's user name); NULL: it named none
    window: str | None = None
    expectation: str
    gpus: int
    nodes: int
    state: str = Field(index=True)
    job_id: str | None = None
    submitted_at: datetime | None = Field(default=None, sa_type=UtcDateTime, index=True)
    started_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    outcome: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    pending_reasons: dict[str, float] = Field(sa_column=sa.Column(JsonDocument, nullable=False))
    node_names: list[str] = Field(
        sa_column=sa.Column(JsonDocument, nullable=False, server_default="[]")
    )
    owner_ids: list[str] = Field(
        sa_column=sa.Column(JsonDocument, nullable=False, server_default="[]")
    )
    reclaims_run_id: str | None = None
    # The observer's own estimate of its wait at submission (NULL: none: ProbeRun's).
    expected_wait_seconds: float | None = None
    # The attempts the platform ended and requeued, each a JSON object (storage/runs.py).
    attempts: list[dict[str, Any]] = Field(
        sa_column=sa.Column(JsonDocument, nullable=False, server_default="[]")
    )
    eligible_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    # When the log-loss check read this run's canary lines back (None: not yet, or no canary).
    log_checked_at: datetime | None = Field(default=None, sa_type=UtcDateTime)


class QueueSampleRow(_Table, table=True):
    """One (tenant, queue) of one stored scheduler snapshot: a few rows per snapshot."""

    __tablename__ = "queue_samples"

    id: int | None = Field(default=None, sa_column=sa.Column(BigId, primary_key=True))
    at: datetime = Field(sa_type=UtcDateTime, index=True)
    tenant: str
    queue: str | None = None
    pending_jobs: int
    pending_gpus: int
    running_jobs: int
    running_gpus: int
    longest_wait_seconds: float
    pending_reasons: dict[str, int] = Field(sa_column=sa.Column(JsonDocument, nullable=False))
    nominal_gpus: int | None = None
    borrowing_limit_gpus: int | None = None
    running_gpus_by_priority: dict[str, int] = Field(
        sa_column=sa.Column(JsonDocument, nullable=False, server_default=sa.text("'{}'"))
    )
    running_gpus_by_user: dict[str, int] = Field(
        sa_column=sa.Column(JsonDocument, nullable=False, server_default=sa.text("'{}'"))
    )


class NodeStateRow(_Table, table=True):
    """A change log, not a sample per snapshot: a row when a node first appears, when its
    state changes and when it leaves the snapshots (`removed`, with its last-known state).
    A node's state at an instant is its last row at or before it."""

    __tablename__ = "node_states"
    # (node, at, id) finds each node's last change before an instant; (at) reads a period.
    __table_args__ = (sa.Index("ix_node_states_node_at_id", "node", "at", "id"),)

    id: int | None = Field(default=None, sa_column=sa.Column(BigId, primary_key=True))
    at: datetime = Field(sa_type=UtcDateTime, index=True)
    node: str
    pool: str | None = None
    gpus_total: int
    gpus_allocated: int
    state: str
    reason: str | None = None
    removed: bool


# The sqlmodel metaclass sets __table__ at run time; its stubs do not declare it.
findings_table: sa.Table = FindingRow.__table__  # type: ignore[attr-defined]
gpu_samples_table: sa.Table = GpuSampleRow.__table__  # type: ignore[attr-defined]
probe_runs_table: sa.Table = ProbeRunRow.__table__  # type: ignore[attr-defined]
queue_samples_table: sa.Table = QueueSampleRow.__table__  # type: ignore[attr-defined]
node_states_table: sa.Table = NodeStateRow.__table__  # type: ignore[attr-defined]


class AlertRow(_Table, table=True):
    """One firing of one alert as Alertmanager reported it: the same fingerprint firing again
    later (a new startsAt) is a new row, polling it again updates the row."""

    __tablename__ = "alerts"
    __table_args__ = (
        sa.UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_fingerprint_starts_at"),
    )

    id: int | None = Field(default=None, sa_column=sa.Column(BigId, primary_key=True))
    fingerprint: str
    name: str
    severity: str | None = None
    starts_at: datetime = Field(sa_type=UtcDateTime, index=True)
    ends_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    last_seen_at: datetime = Field(sa_type=UtcDateTime)
    labels: dict[str, str] = Field(sa_column=sa.Column(JsonDocument, nullable=False))
    summary: str | None = None


class InterventionRow(_Table, table=True):
    """A manual intervention on the platform: recorded by a person (`observer intervention
    add`) or detected from the platform's own state."""

    __tablename__ = "interventions"

    id: int | None = Field(default=None, sa_column=sa.Column(BigId, primary_key=True))
    at: datetime = Field(sa_type=UtcDateTime, index=True)
    by: str
    reason: str
    subject: dict[str, str] = Field(sa_column=sa.Column(JsonDocument, nullable=False))
    source: str
    detail: dict[str, Any] = Field(sa_column=sa.Column(JsonDocument, nullable=False))


alerts_table: sa.Table = AlertRow.__table__  # type: ignore[attr-defined]
interventions_table: sa.Table = InterventionRow.__table__  # type: ignore[attr-defined]


class ReportDeliveryRow(_Table, table=True):
    """One hand-over of one report to one channel: delivered or failed, after how many
    attempts, and why (the channel's answer, secrets masked)."""

    __tablename__ = "report_deliveries"

    id: int | None = Field(default=None, sa_column=sa.Column(BigId, primary_key=True))
    at: datetime = Field(sa_type=UtcDateTime, index=True)
    report: str = Field(index=True)  # "daily-2026-11-30", "verdict"
    channel: str
    outcome: str
    attempts: int
    detail: str | None = None


report_deliveries_table: sa.Table = ReportDeliveryRow.__table__  # type: ignore[attr-defined]


# GPU samples counted as they are stored, so that a report reads a few rows per minute and
# per node-hour instead of every sample: column pN holds how many samples read N percent
# (NVML reports whole percent; readings outside 0..100 count at the ends).


def _percent_columns() -> list[sa.Column[int]]:
    return [sa.Column(f"p{p}", sa.Integer(), nullable=False) for p in UTILIZATION_PERCENTS]


def _counts(prefix: str) -> tuple[sa.Table, sa.Table, sa.Table]:
    """A measure's samples counted per whole percent three ways: the whole fleet per UTC
    minute (samples with a reading: windows and local hours); per node and UTC hour (pools
    mapped at report time, nodes seen, `unread` samples); per tenant whose job held the GPU,
    the kind of task it was and UTC hour (samples attributed and read; task "": not known,
    several tasks, or counted before 0013)."""
    minutes = sa.Table(
        f"{prefix}_minutes",
        metadata,
        sa.Column("minute", UtcDateTime(), primary_key=True),
        *_percent_columns(),
    )
    node_hours = sa.Table(
        f"{prefix}_node_hours",
        metadata,
        sa.Column("hour", UtcDateTime(), primary_key=True),
        sa.Column("node", sa.String(), primary_key=True),
        sa.Column("unread", sa.Integer(), nullable=False),
        *_percent_columns(),
    )
    task_hours = sa.Table(
        f"{prefix}_task_hours",
        metadata,
        sa.Column("hour", UtcDateTime(), primary_key=True),
        sa.Column("tenant", sa.String(), primary_key=True),
        sa.Column("task", sa.String(), primary_key=True),
        *_percent_columns(),
    )
    return minutes, node_hours, task_hours


# NVML's utilisation (unread: no reading).
gpu_minutes_table, gpu_node_hours_table, gpu_task_hours_table = _counts("gpu")
# GPM's SM activity (samples with one; unread: samples of a GPU without GPM, so that a report
# names the nodes that could not say).
gpu_sm_minutes_table, gpu_sm_node_hours_table, gpu_sm_task_hours_table = _counts("gpu_sm")

# Who used what: per UTC hour, node (its pool mapped at report time), tenant whose job held
# the GPU and that job's task type ("" not known), the samples, the sum of their utilisation
# percents (read ones) and how many read 0 %. Counted from 0022 on.
gpu_usage_hours_table = sa.Table(
    "gpu_usage_hours",
    metadata,
    sa.Column("hour", UtcDateTime(), primary_key=True),
    sa.Column("node", sa.String(), primary_key=True),
    sa.Column("tenant", sa.String(), primary_key=True),
    sa.Column("task_type", sa.String(), primary_key=True),
    sa.Column("samples", sa.Integer(), nullable=False),
    sa.Column("busy_percent", sa.BigInteger(), nullable=False),
    sa.Column("idle_samples", sa.Integer(), nullable=False),
)
# The memory a tenant's GPUs used, per UTC hour, in whole GiB (rounded down): its percentiles.
gpu_memory_hours_table = sa.Table(
    "gpu_memory_hours",
    metadata,
    sa.Column("hour", UtcDateTime(), primary_key=True),
    sa.Column("tenant", sa.String(), primary_key=True),
    sa.Column("gib", sa.Integer(), primary_key=True),
    sa.Column("samples", sa.Integer(), nullable=False),
)


# Every tenant's finished jobs, counted per quarter hour (UTC) of their end: every timezone's
# offset is whole quarter hours, so a local day is whole slots. Re-listing a slot replaces
# its counts. job_listings says how far each slot was listed and whether the platform said
# its listing was complete; a slot without a row was never listed.
job_listings_table = sa.Table(
    "job_listings",
    metadata,
    sa.Column("slot", UtcDateTime(), primary_key=True),
    sa.Column("listed_until", UtcDateTime(), nullable=False),
    sa.Column("complete", sa.Boolean(), nullable=False),
    sa.Column("note", sa.String(), nullable=False),
)
job_tallies_table = sa.Table(
    "job_tallies",
    metadata,
    sa.Column("slot", UtcDateTime(), primary_key=True),
    sa.Column("tenant", sa.String(), primary_key=True),
    sa.Column("phase", sa.String(), primary_key=True),
    sa.Column("reason", sa.String(), primary_key=True),  # "" when the platform gave none
    sa.Column("cause", sa.String(), primary_key=True),  # "": not failed, or tallied before 0008
    sa.Column("origin", sa.String(), primary_key=True),  # tenant | observer; "": before 0008
    sa.Column("jobs", sa.Integer(), nullable=False),
)
# The waits of the jobs a slot counts that started, in whole seconds, per tenant.
job_waits_table = sa.Table(
    "job_waits",
    metadata,
    sa.Column("slot", UtcDateTime(), primary_key=True),
    sa.Column("tenant", sa.String(), primary_key=True),
    sa.Column("origin", sa.String(), primary_key=True),  # tenant | observer; "": before 0018
    sa.Column("wait_seconds", sa.Integer(), primary_key=True),
    sa.Column("jobs", sa.Integer(), nullable=False),
)
# Every tenant's own jobs' time pending, per quarter hour (UTC), tenant and the scheduler's
# reason: each snapshot adds the time since the one before to the reason a job had then.
job_pending_table = sa.Table(
    "job_pending",
    metadata,
    sa.Column("slot", UtcDateTime(), primary_key=True),
    sa.Column("tenant", sa.String(), primary_key=True),
    sa.Column("reason", sa.String(), primary_key=True),
    sa.Column("seconds", sa.Float(), nullable=False),
)
# Every job seen waiting in a snapshot and the platform's estimate of its start: a row when
# it first gets one, completed when it starts (records.JobEstimate), never one per snapshot.
job_estimates_table = sa.Table(
    "job_estimates",
    metadata,
    sa.Column("job_id", sa.String(), primary_key=True),
    sa.Column("tenant", sa.String(), nullable=False),
    sa.Column("origin", sa.String(), nullable=False),  # tenant | observer
    sa.Column("gpus", sa.Integer(), nullable=False),
    sa.Column("first_expected_start_at", UtcDateTime(), nullable=True),
    sa.Column("first_seen_at", UtcDateTime(), nullable=True),
    sa.Column("last_expected_start_at", UtcDateTime(), nullable=True),
    sa.Column("started_at", UtcDateTime(), nullable=True, index=True),
)

# One row per controller process: how long it ran and whether it stopped cleanly.
controller_runs_table = sa.Table(
    "controller_runs",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("started_at", UtcDateTime(), nullable=False),
    sa.Column("last_alive_at", UtcDateTime(), nullable=False),
    sa.Column("stopped_at", UtcDateTime(), nullable=True),  # NULL: killed, crashed or running
    sa.Column("host", sa.String(), nullable=False),
    sa.Column("pid", sa.Integer(), nullable=False),
    sa.Column("watching", JsonDocument, nullable=True),  # NULL: recorded before 0017
)

# The store's size on its volume, measured each hour by the controller: its growth per day.
store_sizes_table = sa.Table(
    "store_sizes",
    metadata,
    sa.Column("at", UtcDateTime(), primary_key=True),
    sa.Column("bytes", sa.BigInteger(), nullable=False),
)

# Each copy of a probe that came due and was not submitted, and why: the launches a probe
# missed, for its coverage in the reports.
probe_skips_table = sa.Table(
    "probe_skips",
    metadata,
    sa.Column("id", BigId, primary_key=True),
    sa.Column("at", UtcDateTime(), nullable=False, index=True),
    sa.Column("probe", sa.String(), nullable=False),
    sa.Column("tenant", sa.String(), nullable=False),
    sa.Column("window", sa.String(), nullable=True),
    sa.Column("reason", sa.String(), nullable=False),
)

# The inference service's looks (each a request to every ready replica) and the changes
# carried through (start, scale-out, rolling restart), for its availability and latency.
inference_samples_table = sa.Table(
    "inference_samples",
    metadata,
    sa.Column("id", BigId, primary_key=True),
    sa.Column("at", UtcDateTime(), nullable=False, index=True),
    sa.Column("service", sa.String(), nullable=False),
    sa.Column("desired_replicas", sa.Integer(), nullable=False),
    sa.Column("ready_replicas", sa.Integer(), nullable=False),
    sa.Column("pending_replicas", sa.Integer(), nullable=False),
    sa.Column("requests", sa.Integer(), nullable=False),
    sa.Column("errors", sa.Integer(), nullable=False),
    sa.Column("latencies_ms", JsonDocument, nullable=False),
)

inference_phases_table = sa.Table(
    "inference_phases",
    metadata,
    sa.Column("id", BigId, primary_key=True),
    sa.Column("service", sa.String(), nullable=False),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("started_at", UtcDateTime(), nullable=False),
    sa.Column("ready_at", UtcDateTime(), nullable=False, index=True),
    sa.Column("replicas_from", sa.Integer(), nullable=False),
    sa.Column("replicas_to", sa.Integer(), nullable=False),
    sa.Column("pending_seconds", sa.Float(), nullable=False),
    sa.Column("pending_reason", sa.String(), nullable=True),
    sa.Column("unavailable_seconds", sa.Float(), nullable=False),
    sa.UniqueConstraint("service", "kind", "started_at", name="uq_inference_phases_phase"),
)

# Each release that ran `observer db upgrade` here, with the schema it left: an older release
# rolled back to reads it to name the way back (storage/upgrades.py). Every release from 0019
# on reads these columns: a later migration may add to this table, never rename or drop.
schema_upgrades_table = sa.Table(
    "schema_upgrades",
    metadata,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("at", UtcDateTime(), nullable=False),
    sa.Column("version", sa.String(), nullable=False),
    sa.Column("revision", sa.String(), nullable=False),
    # Where Helm installed it (the chart's environment); NULL elsewhere (systemd, by hand).
    sa.Column("helm_release", sa.String(), nullable=True),
    sa.Column("helm_namespace", sa.String(), nullable=True),
)
