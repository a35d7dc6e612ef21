"""The controller's settings (`controller`): windows, tenants and the probe plan, the
agents and Prometheus it reads, and the scheduler backend it drives."""

from __future__ import annotations

from collections.abc import Collection
from datetime import time
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, PositiveFloat, field_validator, model_validator

from observer import __version__
from observer.probes.catalog import ProbeSpec, platform_catalog, with_overrides
from observer.probes.windows import parse_days
from observer.settings.base import (
    FieldProblems,
    Group,
    HttpUrl,
    ListenHost,
    LocalTime,
    repeated,
)
from observer.settings.inference import InferenceSettings
from observer.settings.log_readers import LogsSettings
from observer.settings.placement import PodResourcesSettings, PoolSettings, TolerationSettings


class WindowSettings(Group):
    name: str = Field(min_length=1)
    days: str = Field("*", description="Cron day-of-week by name: '*', 'mon-fri', 'sat,sun'.")
    start: LocalTime = Field(description="Local start time, e.g. '09:00'.")
    end: LocalTime = Field(description="Local end time; at or before start: runs past midnight.")

    @field_validator("days")
    @classmethod
    def _days(cls, value: str) -> str:
        parse_days(value)
        return value


class TenantSettings(Group):
    name: str = Field(min_length=1, description="Slurm account or Kubernetes namespace.")
    queue: str | None = Field(None, description="Slurm partition or Kueue LocalQueue.")
    priority: str | None = Field(None, description="Slurm QOS or priorityClassName.")
    weight: float = Field(1.0, gt=0, description="Entitled share (fair-share weight).")
    quota_gpus: int | None = Field(None, ge=0, description="GPUs the tenant may hold at once.")


class PlanEntrySettings(Group):
    window: str = Field(min_length=1, description="Name of a window in controller.windows.")
    probe: str = Field(min_length=1, description="Name of a probe in the catalog.")
    every_seconds: float = Field(gt=0, description="How often the probe is launched in the window.")
    tenants: list[str] = Field(
        default_factory=list, description="Tenants it runs for; empty means every tenant."
    )


class ProbeOverrideSettings(Group):
    """Changes to one catalog probe; unset fields keep the catalog's value."""

    duration_seconds: float | None = Field(None, gt=0)
    gpus_per_node: int | None = Field(None, gt=0)
    nodes: int | None = Field(None, gt=0)
    copies: int | None = Field(None, gt=0)
    deadline_seconds: float | None = Field(None, gt=0)
    log_lines: int | None = Field(None, ge=0)
    log_interval_seconds: float | None = Field(None, ge=0)
    log_line_bytes: int | None = Field(None, ge=0)
    gpu_memory_gib: float | None = Field(None, ge=0, description="gpu_busy: GPU memory held.")
    gpu_utilization_percent: float | None = Field(
        None, gt=0, le=100, description="gpu_busy: the burner's target utilisation."
    )
    expected_gbps: dict[Annotated[str, Field(min_length=1)], PositiveFloat] | None = Field(
        None,
        description="gpu_comm: a GPU pair's expected copy rate, GB/s one way, by GPU model "
        "name (the longest name CUDA's device name contains wins, e.g. {H200: 350, "
        "'H200 NVL': 40}); replaces the whole built-in table. A model not listed is "
        "measured, not judged.",
    )


class SimulationSettings(Group):
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

    def node_names(self) -> list[str]:
        return [f"node-{i:03d}" for i in range(self.nodes)]

    def pool_of(self, index: int) -> str:
        return self.pools[index % len(self.pools)]


class KubernetesSettings(Group):
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
    image: str = Field(
        f"gpu-soak-observer:{__version__}",
        description="Probe image: one with `observer` on its PATH, which runs every probe's "
        "program (`observer probe ...`). The chart sets the observer's own image.",
    )
    bad_image: str = Field(
        "registry.invalid/gpu-soak-observer/no-such-image:0",
        description="Image of the bad_image probe; `.invalid` never resolves.",
    )
    gpu_busy_image: str | None = Field(
        None, description="Image of gpu_busy probes; `image` if unset."
    )
    gpu_busy_command: tuple[str, ...] | None = Field(
        None,
        description="Command of gpu_busy probes, e.g. a site's own GPU burner reading "
        "$OBSERVER_DURATION_SECONDS; unset: `observer probe gpu-burn`. It runs as "
        "`run_as_user` on a read-only root filesystem with a writable /tmp.",
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
    # The probe pods pass Pod Security `restricted`: non-root, no capability, RuntimeDefault
    # seccomp, no privilege escalation, read-only root filesystem, no API token.
    run_as_user: int = Field(
        65532, ge=1, description="Uid the probe containers run as (never root)."
    )
    run_as_group: int = Field(65532, ge=1, description="Gid the probe containers run as.")
    tolerations: tuple[TolerationSettings, ...] = Field(
        (), description="Tolerations of every probe pod, e.g. of the GPU nodes' taints."
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels every probe pod requires."
    )
    priority_class_name: str | None = Field(
        None, description="PriorityClass of probe pods whose tenant sets no `priority`."
    )
    runtime_class_name: str | None = Field(
        None, description="RuntimeClass of every probe pod; a pool's own wins. Unset: the default."
    )
    pools: dict[str, PoolSettings] = Field(
        default_factory=dict,
        description="Placement on each pool, by its name (the nodes' `pool_label` value).",
    )
    tenant_pools: dict[str, str] = Field(
        default_factory=dict,
        description="Tenant (namespace) -> the pool of `pools` its probe pods run on: the pod "
        "requires the pool's label, tolerates its taints and takes its runtime and priority.",
    )
    probe_resources: dict[str, PodResourcesSettings] = Field(
        default_factory=dict,
        description="Probe name -> CPU and memory of its pod, over the size of its program "
        "(observer/probes/programs.py).",
    )
    tenant_resources: dict[str, PodResourcesSettings] = Field(
        default_factory=dict,
        description="Tenant (namespace) -> CPU and memory of its probe pods, over every other "
        "size: for a namespace whose LimitRange or ResourceQuota wants other figures.",
    )
    image_pull_secrets: tuple[str, ...] = Field(
        (), description="Secrets, in each tenant namespace, to pull the probe images with."
    )
    audit_log_path: Path | None = Field(
        None,
        description="The API server's audit log (its --audit-log-path, JSON lines) as the "
        "controller can read it, e.g. mounted from the control-plane node: who changed a "
        "ResourceQuota or ClusterQueue is the user it names, the field manager kept beside. "
        "Read on from where the last read stopped, from the start after a rotation. Unset, or "
        "while unreadable (one warning): the field managers (metadata.managedFields).",
    )


class SlurmSettings(Group):
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
    observer_program: Path | None = Field(
        None,
        description="The `observer` program every probe job runs on its node (`observer "
        "probe ...`); unset: the one beside the controller's Python (its virtual "
        "environment, which the nodes then share), else `observer` on the nodes' PATH.",
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


def _default_windows() -> list[WindowSettings]:
    return [
        WindowSettings(name="weekday-peak", days="mon-fri", start=time(9), end=time(18)),
        WindowSettings(name="night", days="*", start=time(22), end=time(6)),
        WindowSettings(name="weekend", days="sat,sun", start=time(0), end=time(0)),
    ]


class ControllerSettings(Group):
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
    quota_reclaim_seconds: float = Field(
        300.0,
        gt=0,
        description="After a quota probe was refused or held and then cancelled, and once "
        "the tenant's own running jobs leave room, how long a one-GPU probe of the same "
        "tenant may still be held by its quota before quota_not_reclaimed opens: five of "
        "Slurm's 60 s scheduling cycles; Kueue and Volcano admit on the next event, within "
        "seconds.",
    )
    follow_interval_seconds: float = Field(5.0, gt=0, description="How often runs are followed.")
    alive_interval_seconds: float = Field(
        10.0,
        gt=0,
        description="How often the controller records in the store that it is alive: a kill "
        "or crash is placed to within this, and the time until the next start is blind.",
    )
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
    agent_urls: list[HttpUrl] = Field(
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
    agent_read_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="The whole of one agent's read, from connecting to the snapshot's last "
        "byte: an agent that never answers, or trickles its answer, is cut off here and is "
        "unreachable for this read.",
    )
    agent_snapshot_max_bytes: int = Field(
        4 * 2**20,
        ge=1,
        description="The largest snapshot body read from an agent; the read stops as soon as "
        "it passes this and the agent is unreachable for this read. A real 8-GPU node with 40 "
        "processes and 24 findings serves 35 KB: 4 MiB is over 100 times that.",
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
    prometheus_url: HttpUrl | None = Field(
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
    misfire_grace_seconds: float = Field(
        30.0, gt=0, description="A launch this late (controller busy or paused) is skipped."
    )
    listen_host: ListenHost = "0.0.0.0"
    listen_port: int = Field(9401, ge=0, le=65535)
    shutdown_deadline_seconds: float = Field(20.0, gt=0, lt=30)
    simulation: SimulationSettings = SimulationSettings()
    kubernetes: KubernetesSettings = KubernetesSettings()
    slurm: SlurmSettings = SlurmSettings()
    logs: LogsSettings = LogsSettings()
    inference: InferenceSettings = InferenceSettings()

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {value!r}") from None
        return value

    @property
    def agents_configured(self) -> bool:
        """Whether any node agent is to be read (agent_urls or agent_dns_name)."""
        return bool(self.agent_urls or self.agent_dns_name)

    @property
    def quotas(self) -> list[int]:
        """The tenants' GPU quotas, where they have one."""
        return [t.quota_gpus for t in self.tenants if t.quota_gpus is not None]

    def probe_catalog(self) -> dict[str, ProbeSpec]:
        """The platform's probes with the overrides applied; loading checked that every name
        they use is one of them."""
        return with_overrides(
            platform_catalog(self.gpus_per_node, self.quotas),
            {name: o.model_dump(exclude_none=True) for name, o in self.probes.items()},
        )

    @model_validator(mode="after")
    def _consistent(self) -> ControllerSettings:
        # What the controller would otherwise refuse at start, or run in a way nobody meant
        # (a name meaning two things, a limit that can never hold), checked at load by every
        # command.
        problems = self._unknown_names() + self._repeated_names()
        if not problems:  # the catalog is built only from known probes
            problems += self._limits()
        if problems:
            raise FieldProblems(problems)
        return self

    def _unknown_names(self) -> list[tuple[str, str]]:
        probes = platform_catalog(self.gpus_per_node, self.quotas).keys()
        windows = {w.name for w in self.windows}
        tenants = {t.name for t in self.tenants}
        problems = [
            (f"probes.{name}", _unknown("probe", name, probes))
            for name in self.probes
            if name not in probes
        ]
        for i, entry in enumerate(self.plan):
            if entry.window not in windows:
                problems.append((f"plan.{i}.window", _unknown("window", entry.window, windows)))
            if entry.probe not in probes:
                problems.append((f"plan.{i}.probe", _unknown("probe", entry.probe, probes)))
            problems += [
                (f"plan.{i}.tenants.{j}", _unknown("tenant", name, tenants))
                for j, name in enumerate(entry.tenants)
                if name not in tenants
            ]
        tenant = self.inference.tenant
        if tenant is not None and tenant not in tenants:
            problems.append(("inference.tenant", _unknown("tenant", tenant, tenants)))
        elif self.inference.enabled and not tenants:
            problems.append(("inference.tenant", "no tenant to run the service as"))
        favoured = self.simulation.favoured_tenant
        if favoured is not None and favoured not in tenants:
            problems.append(("simulation.favoured_tenant", _unknown("tenant", favoured, tenants)))
        # The isolation probe's identities, by tenant: one under a misspelt name is never used,
        # and its tenant has none.
        kubernetes = self.kubernetes
        identities: dict[str, Collection[str]] = {
            "slurm.tenant_users": self.slurm.tenant_users.keys(),
            "kubernetes.tenant_token_files": kubernetes.tenant_token_files.keys(),
            "kubernetes.tenant_pools": kubernetes.tenant_pools.keys(),
            "kubernetes.tenant_resources": kubernetes.tenant_resources.keys(),
        }
        problems += [
            (f"kubernetes.probe_resources.{name}", _unknown("probe", name, probes))
            for name in kubernetes.probe_resources
            if name not in probes
        ]
        problems += [
            (f"kubernetes.tenant_pools.{tenant}", _unknown("pool", pool, kubernetes.pools))
            for tenant, pool in kubernetes.tenant_pools.items()
            if pool not in kubernetes.pools
        ]
        problems += [
            (f"{field}.{name}", _unknown("tenant", name, tenants))
            for field, by_tenant in identities.items()
            for name in by_tenant
            if name not in tenants
        ]
        return problems

    def _repeated_names(self) -> list[tuple[str, str]]:
        """Names something refers to, given twice; and a probe planned twice in one window
        for the same tenant, which would launch it twice."""
        problems = [
            *repeated("windows", [w.name for w in self.windows], "name"),
            *repeated("tenants", [t.name for t in self.tenants], "name"),
            *repeated("agent_urls", self.agent_urls),
            *repeated("kubernetes.namespaces", self.kubernetes.namespaces),
        ]
        everyone = [t.name for t in self.tenants]
        for i, entry in enumerate(self.plan):
            problems += repeated(f"plan.{i}.tenants", entry.tenants)
            for j, earlier in enumerate(self.plan[:i]):
                both = set(entry.tenants or everyone) & set(earlier.tenants or everyone)
                if (earlier.window, earlier.probe) == (entry.window, entry.probe) and both:
                    problems.append(
                        (
                            f"plan.{i}",
                            f"probe {entry.probe!r} in window {entry.window!r} for "
                            f"{', '.join(sorted(both))} again (first at item {j})",
                        )
                    )
                    break
        return problems

    def _limits(self) -> list[tuple[str, str]]:
        """Limits that contradict one another: each names the one it must outlast or fit."""
        problems = []
        catalog = self.probe_catalog()
        for name, override in self.probes.items():
            spec = catalog[name]
            deadline, duration = spec.deadline_seconds, spec.workload.duration_seconds
            if deadline > duration:
                continue
            if override.deadline_seconds is not None:
                problems.append(
                    (
                        f"probes.{name}.deadline_seconds",
                        f"must be longer than the probe's duration_seconds ({duration:g} s)",
                    )
                )
            else:
                problems.append(
                    (
                        f"probes.{name}.duration_seconds",
                        f"must be shorter than the probe's deadline_seconds ({deadline:g} s)",
                    )
                )
        if self.agent_read_timeout_seconds >= self.observe_interval_seconds:
            # One agent that never answers would hold every read past its cadence.
            problems.append(
                (
                    "agent_read_timeout_seconds",
                    "must be shorter than controller.observe_interval_seconds "
                    f"({self.observe_interval_seconds:g} s)",
                )
            )
        ttl = self.kubernetes.ttl_seconds_after_finished
        if self.backend == "kubernetes" and ttl <= self.job_listing_interval_seconds:
            # Kubernetes deletes a finished probe Job before the job listing counts it.
            problems.append(
                (
                    "kubernetes.ttl_seconds_after_finished",
                    "must be longer than controller.job_listing_interval_seconds "
                    f"({self.job_listing_interval_seconds:g} s)",
                )
            )
        return problems


def _unknown(kind: str, name: str, known: Collection[str]) -> str:
    if kind == "probe" and name == "quota":
        return "no probe named 'quota': it needs a tenant with quota_gpus"
    return f"no {kind} named {name!r} (known: {', '.join(sorted(known)) or 'none'})"
