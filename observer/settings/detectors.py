"""The detectors' rules (`detectors`): unreleased resources, GPU health, log loss,
monitoring lag and queue fairness."""

from __future__ import annotations

from pydantic import Field, model_validator

from observer.settings.base import Group

MIB = 1024 * 1024


class NodeLeakSettings(Group):
    """Node-local unreleased-resource rules (the agent's detector)."""

    grace_seconds: float = Field(
        60.0,
        ge=0,
        description="How long after its owner ended a process may still hold a GPU; kubelet "
        "waits 30 s between SIGTERM and SIGKILL and the driver needs a moment after that.",
    )
    idle_seconds: float = Field(
        600.0,
        gt=0,
        description="A running owner holding GPU memory at 0 % utilisation this long is "
        "allocated-but-idle; ten minutes lets data loading and checkpoints pass.",
    )
    idle_sm_active_ratio: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Where a GPU reports GPM (Hopper and later), it is idle while its SM "
        "activity stays below this share, whatever its utilisation (one warp spinning on one "
        "SM reads 100 %); null: idle only at 0 % utilisation.",
    )
    memory_tolerance_bytes: int = Field(
        256 * MIB,
        ge=0,
        description="Memory above the driver baseline ignored when no process is listed.",
    )
    baseline_memory_bytes: int | None = Field(
        None,
        ge=0,
        description="Driver baseline per GPU; learned (least memory seen with no process) "
        "if unset.",
    )


class GpuInServiceSettings(Group):
    """A node whose agent reported a fatal GPU fault must leave service in time."""

    grace_seconds: float = Field(
        600.0,
        ge=0,
        description="How long after a fatal GPU fault (fatal Xid, GPU lost, row remap failure) "
        "the scheduler may still keep the node in service before unhealthy_gpu_in_service.",
    )


class GpuHealthSettings(Group):
    """GPU health conditions from the counters the agent samples (the agent's detector), and
    how its Xid events are merged."""

    ecc_window_seconds: float = Field(
        3600.0,
        gt=0,
        description="An uncorrected ECC error keeps its GPU's gpu_ecc_uncorrected condition "
        "open this long after the last increase of the volatile or aggregate count; an hour "
        "spans the agent's 60 s counter reads many times over.",
    )
    slowdown_hold_seconds: float = Field(
        60.0,
        ge=0,
        description="How long hardware slowdown, thermal or power-brake clock events must "
        "last while a process runs on the GPU before gpu_clock_slowdown opens; a brief power "
        "brake during a load step is not a throttled job.",
    )
    pcie_replay_max_per_minute: float = Field(
        10.0,
        gt=0,
        description="PCIe replays per minute between two counter reads above which "
        "gpu_pcie_replay_rate opens; a healthy link replays rarely (the recorded H200: one "
        "since driver load).",
    )
    nvlink_errors_max_per_minute: float = Field(
        60.0,
        ge=0,
        description="NVLink replay and CRC errors per minute (all active links of a GPU, "
        "between two counter reads) above which gpu_nvlink_errors opens; 0 counts every "
        "one. A link replays what failed its CRC check, so a few cost little: NVIDIA's "
        "DCGM fails its health check at 100 CRC errors per second, and one a second is a "
        "marginal link long before that. A recovery error (the link retrained) opens it at "
        "any rate.",
    )
    xid_merge_window_seconds: float = Field(
        10.0,
        ge=0,
        description="An NVML Xid event and a kernel-log Xid line of the same GPU and code "
        "within this of each other are one event (both sources report every Xid).",
    )


class LogLossSettings(Group):
    """Log-canary rules."""

    delivery_p95_max_seconds: float = Field(
        30.0,
        gt=0,
        description="95th percentile of delivery latency above which a run is a "
        "log_delivery_latency finding; shippers batch for seconds, so tens of seconds "
        "is slow.",
    )


class MonitoringLagSettings(Group):
    """Monitoring-lag rules and the series they watch. Defaults fit the chart's 30 s scrape
    interval: when all is well a value read back is up to one interval old, two after one
    missed scrape; a limit of 3 intervals + 15 s tolerates a second miss and query time
    before calling it lag. For another interval use 3 * interval + 15 s."""

    heartbeat_max_lag_seconds: float = Field(
        105.0, gt=0, description="Oldest the heartbeat may be when read back (3 * 30 s + 15 s)."
    )
    series_max_age_seconds: float = Field(
        105.0, gt=0, description="Oldest the newest sample of a watched series may be."
    )
    scrape_max_age_seconds: float = Field(
        105.0, gt=0, description="Longest a target may go without a scrape attempt."
    )
    hold_seconds: float = Field(
        30.0,
        ge=0,
        description="How long a heartbeat, freshness, scrape or unreachable symptom must last "
        "before its condition opens: one slow query or one failed scrape (a pod restarting) "
        "is not lag. Flat-line and busy-lag rules span their own window and open at once.",
    )
    freshness_series: tuple[str, ...] | None = Field(
        None,
        description="PromQL selectors whose newest sample must be recent; unset: derived from "
        "what is configured, the controller's heartbeat always and the agents' observer_gpu_up "
        "when agents are configured.",
    )
    scrape_jobs: tuple[str, ...] = Field(
        (), description="Jobs whose targets are checked; empty: every active target."
    )
    flatline_window_seconds: float = Field(
        300.0, gt=0, description="Window in which Prometheus and the agent readings are compared."
    )
    flatline_min_agent_distinct_values: int = Field(
        3,
        ge=2,
        description="Distinct agent readings in the window that make one Prometheus value a "
        "flat line (3: a single step at the window's edge is not enough).",
    )
    gpu_utilization_metric: str = Field(
        "observer_gpu_utilization_ratio", description="Metric showing a GPU's utilisation, 0-1."
    )
    gpu_uuid_label: str = Field("uuid", description="Its label carrying the GPU UUID.")
    busy_utilization_threshold_ratio: float = Field(
        0.5, gt=0, le=1, description="Utilisation that counts as busy for the GPU-busy probe."
    )
    busy_lag_max_seconds: float = Field(
        75.0,
        gt=0,
        description="Longest from a GPU-busy probe's start until Prometheus shows the GPU busy: "
        "the agent's tick, two 30 s scrape intervals (one may be missed) and 15 s margin.",
    )


class FairnessSettings(Group):
    """Queue fairness and unexplained-wait rules."""

    disadvantage_wait_seconds: float = Field(
        300.0,
        gt=0,
        description="A tenant's fairness probe that starts this much later than the other "
        "tenants' probes of the same launch counts against the scheduler, and only queue "
        "samples in which a tenant's jobs have waited longer than this weigh its share (a job "
        "submitted just before a sample has not had a scheduling cycle yet); five minutes is "
        "more than a scheduling cycle and less than a probe's run time.",
    )
    disadvantage_share_tolerance: float = Field(
        0.2,
        ge=0,
        lt=1,
        description="A tenant with jobs pending that receives less than (1 - this) of its "
        "entitled GPUs is disadvantaged; one that receives at least that and still asks for "
        "more is over-asking. Whole GPUs make shares coarse: 3 of an entitled 3.6 is 0.83.",
    )
    persistence_k: int = Field(
        3,
        gt=0,
        description="Disadvantaged in at least this many of the last `persistence_m` "
        "completed window occurrences (of any window) makes a finding.",
    )
    persistence_m: int = Field(
        5,
        gt=0,
        description="How many recent window occurrences are weighed, peaks and nights "
        "together. 3 of 5: a pattern over two or three days of windows, while one or two bad "
        "windows (a big training run, an outage) are not a policy.",
    )
    unexplained_wait_grace_seconds: float = Field(
        120.0,
        ge=0,
        description="How long a pending probe may go without a reason, or with a reason the "
        "scheduler's state contradicts; longer than Slurm's default scheduling cycle (60 s) "
        "plus a backfill pass (30 s), so a reason not yet refreshed is not a finding.",
    )
    batch_gap_seconds: float = Field(
        10.0,
        gt=0,
        description="Fairness probes submitted within this of each other form one launch "
        "batch; one launch submits every tenant's probe within a second or two.",
    )

    @model_validator(mode="after")
    def _k_within_m(self) -> FairnessSettings:
        if self.persistence_k > self.persistence_m:
            raise ValueError("persistence_k must not exceed persistence_m")
        return self


class ProbeReleaseSettings(Group):
    """The controlled experiment: our own probes' GPUs back to idle after each run ends."""

    grace_seconds: float = Field(
        90.0,
        ge=0,
        description="How long after a probe's end its GPUs may still hold its processes or "
        "memory: kubelet's 30 s from SIGTERM to SIGKILL, the driver's teardown, and one agent "
        "read (15 s) fit well within it.",
    )
    snapshot_max_age_seconds: float = Field(
        60.0,
        gt=0,
        description="An agent snapshot older than this says nothing about the node now: it "
        "neither opens nor closes this finding, and the other unreleased-resource findings "
        "call the node's layer unknown. Four of the controller's 15 s reads.",
    )


class StuckTerminatingSettings(Group):
    """Jobs the platform is ending that keep their GPUs."""

    grace_seconds: float = Field(
        120.0,
        ge=0,
        description="How long a job may keep its GPUs after the platform began ending it: "
        "past Slurm's default UnkillableStepTimeout (60 s) and its epilog; Kubernetes' "
        "deletion deadline already includes the pod's own grace period.",
    )


class DetectorSettings(Group):
    node: NodeLeakSettings = NodeLeakSettings()
    gpu_health: GpuHealthSettings = GpuHealthSettings()
    gpu_in_service: GpuInServiceSettings = GpuInServiceSettings()
    probe_release: ProbeReleaseSettings = ProbeReleaseSettings()
    stuck_terminating: StuckTerminatingSettings = StuckTerminatingSettings()
    log: LogLossSettings = LogLossSettings()
    monitoring_lag: MonitoringLagSettings = MonitoringLagSettings()
    fairness: FairnessSettings = FairnessSettings()
