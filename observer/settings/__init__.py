"""One typed settings root, loaded from a YAML file with OBSERVER_* environment overrides.

Environment variables use `__` between levels: OBSERVER_AGENT__INTERVAL_SECONDS=2 overrides
`agent.interval_seconds`. The Helm chart's values mirror these names.
"""

from __future__ import annotations

import os
from datetime import time
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from observer.errors import ConfigError
from observer.probes.windows import parse_days

MIB = 1024 * 1024


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentSettings(_Group):
    """The node agent (DaemonSet on GPU nodes)."""

    node_name: str = Field(
        default_factory=lambda: os.uname().nodename,
        description="Node name used as the `node` label and finding subject (downward API).",
    )
    gpu_backend: Literal["nvml", "replay"] = Field(
        "nvml", description="`nvml`: the real driver; `replay`: play `replay_trace_dir`."
    )
    nvml_library_path: Path | None = Field(
        None, description="Load libnvidia-ml.so.1 from this file instead of the loader path."
    )
    replay_trace_dir: Path | None = Field(
        None,
        validate_default=True,
        description="Recorded NVML trace played when gpu_backend is `replay`.",
    )
    replay_loop: bool = Field(True, description="Start the trace over when it ends.")
    proc_root: Path = Field(Path("/proc"), description="Host /proc (hostPID) for attribution.")
    interval_seconds: float = Field(1.0, gt=0, description="Lean sampling cadence.")
    counters_interval_seconds: float = Field(
        60.0,
        gt=0,
        description="Cadence of the expensive tier (energy 3 ms, PCIe throughput 21 ms per GPU).",
    )
    listen_host: str = Field("0.0.0.0", description="Address of /metrics, /healthz, /v1/snapshot.")
    listen_port: int = Field(9400, ge=0, le=65535, description="0 picks a free port.")
    healthz_max_age_seconds: float = Field(
        30.0, gt=0, description="/healthz fails when the last good tick is older than this."
    )
    shutdown_deadline_seconds: float = Field(
        10.0,
        gt=0,
        lt=30,
        description="Stop within this after SIGTERM; below Kubernetes' 30 s default grace.",
    )

    @field_validator("replay_trace_dir")
    @classmethod
    def _trace_for_replay(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None and info.data.get("gpu_backend") == "replay":
            raise ValueError("is required when agent.gpu_backend is 'replay'")
        return value

    @field_validator("counters_interval_seconds")
    @classmethod
    def _slower_than_lean(cls, value: float, info: ValidationInfo) -> float:
        lean = info.data.get("interval_seconds")
        if lean is not None and value < lean:
            raise ValueError("must not be shorter than agent.interval_seconds")
        return value


class NodeLeakSettings(_Group):
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


class LogLossSettings(_Group):
    """Log-canary rules."""

    delivery_p95_max_seconds: float = Field(
        30.0,
        gt=0,
        description="95th percentile of delivery latency above which a run is a "
        "log_delivery_latency finding; shippers batch for seconds, so tens of seconds "
        "is slow.",
    )


class MonitoringLagSettings(_Group):
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
    freshness_series: tuple[str, ...] = Field(
        ("observer_gpu_up",), description="PromQL selectors whose newest sample must be recent."
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


class FairnessSettings(_Group):
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


# --- window occurrences -------------------------------------------------------------------


class ProbeReleaseSettings(_Group):
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


class StuckTerminatingSettings(_Group):
    """Jobs the platform is ending that keep their GPUs."""

    grace_seconds: float = Field(
        120.0,
        ge=0,
        description="How long a job may keep its GPUs after the platform began ending it: "
        "past Slurm's default UnkillableStepTimeout (60 s) and its epilog; Kubernetes' "
        "deletion deadline already includes the pod's own grace period.",
    )


class DetectorSettings(_Group):
    node: NodeLeakSettings = NodeLeakSettings()
    probe_release: ProbeReleaseSettings = ProbeReleaseSettings()
    stuck_terminating: StuckTerminatingSettings = StuckTerminatingSettings()
    log: LogLossSettings = LogLossSettings()
    monitoring_lag: MonitoringLagSettings = MonitoringLagSettings()
    fairness: FairnessSettings = FairnessSettings()


class WindowSettings(_Group):
    name: str = Field(min_length=1)
    days: str = Field("*", description="Cron day-of-week by name: '*', 'mon-fri', 'sat,sun'.")
    start: time = Field(description="Local start time, e.g. '09:00'.")
    end: time = Field(description="Local end time; at or before start: runs past midnight.")

    @field_validator("days")
    @classmethod
    def _days(cls, value: str) -> str:
        parse_days(value)
        return value


class TenantSettings(_Group):
    name: str = Field(min_length=1, description="Slurm account or Kubernetes namespace.")
    queue: str | None = Field(None, description="Slurm partition or Kueue LocalQueue.")
    priority: str | None = Field(None, description="Slurm QOS or priorityClassName.")
    weight: float = Field(1.0, gt=0, description="Entitled share (fair-share weight).")
    quota_gpus: int | None = Field(None, ge=0, description="GPUs the tenant may hold at once.")


class PlanEntrySettings(_Group):
    window: str = Field(min_length=1, description="Name of a window in controller.windows.")
    probe: str = Field(min_length=1, description="Name of a probe in the catalog.")
    every_seconds: float = Field(gt=0, description="How often the probe is launched in the window.")
    tenants: list[str] = Field(
        default_factory=list, description="Tenants it runs for; empty means every tenant."
    )


class ProbeOverrideSettings(_Group):
    """Changes to one catalog probe; unset fields keep the catalog's value."""

    duration_seconds: float | None = Field(None, gt=0)
    gpus_per_node: int | None = Field(None, gt=0)
    nodes: int | None = Field(None, gt=0)
    copies: int | None = Field(None, gt=0)
    deadline_seconds: float | None = Field(None, gt=0)
    log_lines: int | None = Field(None, ge=0)
    log_interval_seconds: float | None = Field(None, ge=0)
    log_line_bytes: int | None = Field(None, ge=0)


class SimulationSettings(_Group):
    """The simulated cluster (controller.backend: simulated)."""

    nodes: int = Field(4, gt=0)
    gpus_per_node: int = Field(8, gt=0)
    pools: list[str] = Field(default_factory=lambda: ["pool-a", "pool-b"], min_length=1)
    policy: Literal["fair_share", "fifo"] = "fair_share"
    favoured_tenant: str | None = Field(
        None, description="An unfair scheduler from the start: this tenant is always served first."
    )
    isolation_broken: bool = Field(
        False, description="Let one tenant read another's work (the isolation probe must fail)."
    )
    submit_hang_seconds: float = Field(
        0.0,
        ge=0,
        description="Each submission blocks this long before the cluster takes it, as a hung "
        "sbatch or API call would (0: none).",
    )


class KubernetesSettings(_Group):
    """The Kubernetes scheduler backend (controller.backend: kubernetes)."""

    host: str | None = Field(
        None, description="API server URL used as is, without credentials (tests, kubectl proxy)."
    )
    kubeconfig_path: Path | None = Field(
        None, description="Kubeconfig used when `host` is unset; in-cluster config if neither is."
    )
    kubeconfig_context: str | None = Field(None, description="Context in the kubeconfig.")
    namespaces: tuple[str, ...] = Field(
        (), description="Tenant namespaces whose jobs and queues are observed and probed."
    )
    image: str = Field("nvidia/cuda:12.4.1-base-ubuntu22.04", description="Probe image.")
    bad_image: str = Field(
        "registry.invalid/gpu-soak-observer/no-such-image:0",
        description="Image of the bad_image probe; `.invalid` never resolves.",
    )
    gpu_busy_image: str | None = Field(
        None, description="Image of gpu_busy probes; `image` if unset."
    )
    gpu_busy_command: tuple[str, ...] | None = Field(
        None,
        description="Command of gpu_busy probes (e.g. a GPU burner reading "
        "$OBSERVER_DURATION_SECONDS); a CPU busy loop if unset.",
    )
    oom_memory_limit: str = Field("64Mi", description="Memory limit the oom probe runs past.")
    ttl_seconds_after_finished: int = Field(
        3600,
        ge=0,
        description="Finished probe Jobs are deleted after this; long enough to read the outcome.",
    )
    request_timeout_seconds: float = Field(10.0, gt=0, description="Timeout of every API call.")
    gpu_resource: str = Field("nvidia.com/gpu", description="Extended resource name of a GPU.")
    pool_label: str = Field("nvidia.com/gpu.product", description="Node label naming its pool.")
    tenant_token_files: dict[str, Path] = Field(
        default_factory=dict,
        description="The isolation probe's credentials: tenant (namespace) -> a file holding a "
        "bearer token of that tenant, e.g. a ServiceAccount token with the tenant's ordinary "
        "rights, mounted from a Secret. Read on every probe, so rotated tokens are picked up. "
        "The server is the one of `host`/kubeconfig/in-cluster; the observer's own client "
        "certificate or token is never sent with it. The token must be able to list pods in "
        "its own namespace, which the probe checks first.",
    )


class SlurmSettings(_Group):
    """The Slurm backend (controller.backend: slurm)."""

    slurm_conf: Path | None = Field(
        None, description="SLURM_CONF for every command; unset: the environment's or the default."
    )
    commands_dir: Path | None = Field(
        None, description="Directory holding sbatch, squeue, sacct, sinfo, scancel; unset: PATH."
    )
    command_timeout_seconds: float = Field(
        20.0,
        gt=0,
        description="Each command is killed after this. While slurmctld is down every command "
        "retries for about 9 s before Slurm reports it, so keep this above 10 s to get "
        "Slurm's own words.",
    )
    output_dir: Path = Field(
        Path("slurm-output"),
        description="Where jobs write observer-<job id>.out and where logs() reads it: a "
        "directory the compute nodes and the controller share. Relative to the controller's "
        "working directory unless absolute; jobs also run in it.",
    )
    time_limit_headroom_minutes: int = Field(
        5,
        ge=1,
        description="Added to a probe's duration for --time, so a slow start is no TIMEOUT.",
    )
    oom_memory_mebibytes: int = Field(
        64, ge=1, description="--mem of an OOM probe, which allocates four times as much."
    )
    sbatch_extra_args: tuple[str, ...] = Field(
        (),
        description="Appended to every sbatch, e.g. ['--reservation=soak', '--constraint=h100'].",
    )
    tenant_users: dict[str, str] = Field(
        default_factory=dict,
        description="The isolation probe's identities: account -> a Unix user of that account "
        "(an ordinary user, not an operator or coordinator). The probe runs squeue, sacct and "
        "scontrol as that user through `run_as_command`, which needs the controller to run as "
        "root or with the matching sudo rights.",
    )
    run_as_command: tuple[str, ...] = Field(
        ("runuser", "-u", "{user}", "--"),
        description="Prefix that runs a command as another user; '{user}' is replaced. As root: "
        "the default. With sudo rights instead: ['sudo', '-n', '-u', '{user}', '--'].",
    )


# squeue(1) JOB STATE CODES, all of them: an unknown word is a shape error, not a guess


def _default_windows() -> list[WindowSettings]:
    return [
        WindowSettings(name="weekday-peak", days="mon-fri", start=time(9), end=time(18)),
        WindowSettings(name="night", days="*", start=time(22), end=time(6)),
        WindowSettings(name="weekend", days="sat,sun", start=time(0), end=time(0)),
    ]


class ControllerSettings(_Group):
    """The controller (one-replica Deployment)."""

    backend: Literal["simulated", "slurm", "kubernetes"] = "simulated"
    timezone: str = Field("UTC", description="The platform's timezone, e.g. Asia/Shanghai.")
    windows: list[WindowSettings] = Field(default_factory=_default_windows)
    tenants: list[TenantSettings] = Field(
        default_factory=lambda: [
            TenantSettings(name="research", weight=0.7),
            TenantSettings(name="prod", weight=0.3),
        ]
    )
    plan: list[PlanEntrySettings] = Field(
        default_factory=lambda: [
            PlanEntrySettings(window="weekday-peak", probe="short", every_seconds=600),
            PlanEntrySettings(window="night", probe="long", every_seconds=3600),
        ]
    )
    gpus_per_node: int = Field(8, gt=0, description="Node size the catalog's probes scale to.")
    probes: dict[str, ProbeOverrideSettings] = Field(
        default_factory=dict, description="Per-probe changes to the catalog, by probe name."
    )
    max_probe_gpus: int = Field(8, gt=0, description="Probe GPUs in use at once, all tenants.")
    max_probe_gpus_per_tenant: int = Field(4, gt=0, description="Probe GPUs at once per tenant.")
    follow_interval_seconds: float = Field(5.0, gt=0, description="How often runs are followed.")
    snapshot_interval_seconds: float = Field(
        30.0, gt=0, description="How often the scheduler's state is sampled and stored."
    )
    job_listing_interval_seconds: float = Field(
        600.0,
        gt=0,
        description="How often every tenant's finished jobs are listed and counted, each "
        "listing from where the last one ended: 10 min keeps accounting queries rare and "
        "lists Kubernetes Jobs well before a TTL of an hour (the probes' own) deletes them.",
    )
    agent_urls: list[str] = Field(
        default_factory=list, description="Node agents to read, as base URLs (http://host:9400)."
    )
    agent_dns_name: str | None = Field(
        None, description="A name resolving to every agent (the agents' headless Service)."
    )
    agent_port: int = Field(9400, ge=1, le=65535, description="Agents' port, with agent_dns_name.")
    agent_read_concurrency: int = Field(
        32,
        ge=1,
        description="Agents read at once (threads and connections). A live agent answers in "
        "milliseconds, a hung one holds its reader for the 5 s timeout: one at a time, 500 "
        "agents and 4 hung ones took 31 s, past the 15 s cadence; 32 at once, 5.8 s "
        "(bench/agent_reads.py), and up to 32 hung agents still cost one timeout.",
    )
    observe_interval_seconds: float = Field(
        15.0, gt=0, description="How often every agent's snapshot is read and stored."
    )
    gpu_sample_interval_seconds: float = Field(
        300.0,
        ge=0,
        description="How often each GPU's sample is kept in the store (0: at every read). "
        "The reports' utilisation needs a few samples per GPU an hour and Prometheus keeps the "
        "fine series: at 1,000 nodes x 8 GPUs every 15 s would grow PostgreSQL by about "
        "12 GB a day, every 300 s by about 0.6 GB.",
    )
    agent_unreachable_grace_seconds: float = Field(
        60.0, ge=0, description="An agent unreadable this long is recorded as a blind spot."
    )
    prometheus_url: str | None = Field(
        None, description="Prometheus's HTTP API for the monitoring-lag checks; unset: off."
    )
    prometheus_timeout_seconds: float = Field(5.0, gt=0, description="Each Prometheus query.")
    monitoring_interval_seconds: float = Field(
        30.0, gt=0, description="How often the monitoring pipeline's lag is checked."
    )
    heartbeat_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels selecting the controller's own heartbeat series in Prometheus "
        "(e.g. its scrape job).",
    )
    log_reader: Literal["pod_logs", "none"] = Field(
        "pod_logs",
        description="Where finished log canaries are read back: the job's own output through "
        "the scheduler (pod-log API, Slurm output file), or nowhere.",
    )
    log_settle_seconds: float = Field(
        60.0, ge=0, description="Wait after a canary ends before reading it back (shippers batch)."
    )
    misfire_grace_seconds: float = Field(
        30.0, gt=0, description="A launch this late (controller busy or paused) is skipped."
    )
    listen_host: str = "0.0.0.0"
    listen_port: int = Field(9401, ge=0, le=65535)
    shutdown_deadline_seconds: float = Field(20.0, gt=0, lt=30)
    simulation: SimulationSettings = SimulationSettings()
    kubernetes: KubernetesSettings = KubernetesSettings()
    slurm: SlurmSettings = SlurmSettings()

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {value!r}") from None
        return value

    @model_validator(mode="after")
    def _plan_refers_to_known_names(self) -> ControllerSettings:
        windows = {w.name for w in self.windows}
        tenants = {t.name for t in self.tenants}
        problems = [
            f"plan.{i}.window: no window named {entry.window!r}"
            for i, entry in enumerate(self.plan)
            if entry.window not in windows
        ] + [
            f"plan.{i}.tenants: no tenant named {name!r}"
            for i, entry in enumerate(self.plan)
            for name in entry.tenants
            if name not in tenants
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self


class StorageSettings(_Group):
    url: str | None = Field(
        None,
        description="SQLAlchemy URL of PostgreSQL (postgresql+psycopg://...); takes precedence "
        "over sqlite_path. Give it through the environment or a Secret, not the config file.",
    )
    sqlite_path: Path = Field(Path("observer.db"), description="The embedded default store.")


class EmailSettings(_Group):
    host: str = Field(min_length=1)
    port: int = Field(587, ge=1, le=65535)
    sender: str = Field(min_length=3)
    recipients: list[str] = Field(min_length=1)
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = None
    password: SecretStr | None = Field(
        None, description="From the environment or a Secret (OBSERVER_REPORTS__DELIVERY__...)."
    )


class DeliverySettings(_Group):
    """Where built reports go besides reports.output_dir (always written first). Webhook URLs
    and signing secrets are secrets: give them through the environment or a mounted Secret."""

    public_base_url: str | None = Field(
        None, description="Where output_dir is served; chats that get the short form link here."
    )
    backoff_seconds: tuple[float, ...] = Field(
        (1.0, 5.0, 30.0), description="Waits between retries of a failed delivery."
    )
    timeout_seconds: float = Field(10.0, gt=0, description="Each delivery request.")
    slack_url: SecretStr | None = None
    feishu_url: SecretStr | None = None
    feishu_secret: SecretStr | None = None
    dingtalk_url: SecretStr | None = None
    dingtalk_secret: SecretStr | None = None
    wecom_url: SecretStr | None = None
    email: EmailSettings | None = None


class ReportSettings(_Group):
    """Daily summaries and the go-live verdict, and the alerts they count."""

    language: Literal["en", "zh-CN"] = Field("en", description="Language of the reports.")
    delivery: DeliverySettings = DeliverySettings()
    daily_build_time: time = Field(
        time(8),
        description="Local time (controller.timezone) after which yesterday's summary is built.",
    )
    output_dir: Path = Field(
        Path("reports"), description="Where summaries and verdicts are written (md, html, json)."
    )
    soak_started_at: AwareDatetime | None = Field(
        None, description="Start of the soak; unset: the first stored probe run's submission."
    )
    soak_ended_at: AwareDatetime | None = Field(
        None,
        description="End of the soak for the verdict; unset: the start of today in the "
        "platform's timezone (whole days only, so the verdict agrees with the summaries).",
    )
    alertmanager_url: str | None = Field(
        None, description="Alertmanager's base URL, whose /api/v2/alerts is polled; unset: off."
    )
    alertmanager_timeout_seconds: float = Field(5.0, gt=0, description="Each Alertmanager read.")
    alert_poll_interval_seconds: float = Field(
        60.0,
        gt=0,
        description="How often firing alerts are read; shorter than the shortest alert worth "
        "counting.",
    )
    ignored_alerts: tuple[str, ...] = Field(
        ("Watchdog", "InfoInhibitor"),
        description="Alert names never counted: kube-prometheus-stack's always-firing ones.",
    )
    verdict_monitoring_lag_max_seconds: float = Field(
        600.0,
        gt=0,
        description="Longest a monitoring-lag condition may stay open before the verdict calls "
        "monitoring lag out of bound; the detector's own limits open it, this judges how long "
        "it lasted (ten minutes: an alert is late, not lost).",
    )
    verdict_unexplained_wait_max_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Share of probe runs that waited without a reason the platform could "
        "explain that still passes (one run in twenty).",
    )
    verdict_blind_max_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Share of the soak the observer may have been blind to a source before a "
        "plain go is out of reach: silence is not health.",
    )
    verdict_intervention_match_seconds: float = Field(
        3600.0,
        ge=0,
        description="A detected intervention counts as audited when a recorded one names the "
        "same subject within this.",
    )


class LoggingSettings(_Group):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = Field(
        "auto", description="`auto`: JSON unless standard error is a terminal."
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="OBSERVER_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    agent: AgentSettings = AgentSettings()
    controller: ControllerSettings = ControllerSettings()
    detectors: DetectorSettings = DetectorSettings()
    storage: StorageSettings = StorageSettings()
    logging: LoggingSettings = LoggingSettings()
    reports: ReportSettings = ReportSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file arrives as init values; the environment overrides it.
        return (env_settings, init_settings)


def load_settings(path: Path | None, overrides: dict[str, Any] | None = None) -> Settings:
    """Read `path` (YAML) if given, merge `overrides` (command-line flags) over it, apply
    OBSERVER_* environment overrides, validate. Raises ConfigError with one
    'field.path: problem' line per problem."""
    data = _merge(_read_yaml(path) if path is not None else {}, overrides or {})
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError([_describe(error) for error in exc.errors()]) from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            merged[key] = _merge(below, value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot be read ({exc.strerror})"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "unparsable"
        raise ConfigError([f"{path}: not valid YAML{where}: {problem}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the top level must be a mapping of setting groups"])
    return data


_MESSAGES = {
    "extra_forbidden": "unknown setting",
    "missing": "is required",
}


def _describe(error: Any) -> str:
    path = ".".join(str(part) for part in error["loc"]) or "(root)"
    message = _MESSAGES.get(error["type"]) or str(error["msg"])
    message = message.replace("Input should be", "must be").replace("Value error, ", "")
    return f"{path}: {message}"
