"""The node agent's settings (`agent`): its GPU source, cadences and HTTP endpoint."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from observer.settings.base import Group, ListenHost


class AgentSettings(Group):
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
    expose_command_lines: bool = Field(
        False,
        description="Put each GPU process's full command line in /v1/snapshot and in the "
        "findings. Off: only its executable name, uid and user; command lines often carry "
        "tokens, and every tenant's are visible to whoever reaches the agent.",
    )
    passwd_file: Path | None = Field(
        None,
        description="A passwd file of the host's users (e.g. the host's /etc/passwd mounted "
        "read-only) naming the uids of GPU processes; unset: uids only.",
    )
    owners: Literal["auto", "kubelet", "slurm", "none"] = Field(
        "auto",
        description="Who says whether a GPU process's owner still runs: `kubelet` (its "
        "pod-resources API), `slurm` (the node's slurmd), `none` (every owner's state "
        "unknown, reported as blind to owners); `auto`: the kubelet when its socket exists, "
        "else Slurm when `scontrol` is on PATH, else none.",
    )
    pod_resources_socket: Path = Field(
        Path("/var/lib/kubelet/pod-resources/kubelet.sock"),
        description="The kubelet's pod-resources socket (owners `kubelet`).",
    )
    pod_logs_dir: Path = Field(
        Path("/var/log/pods"),
        description="The kubelet's pod log directory (its `podLogsDir`), whose "
        "<namespace>_<name>_<uid> entries join the pods the kubelet lists by name to the "
        "pod UIDs in processes' cgroups.",
    )
    kubelet_pods_url: str | None = Field(
        None,
        description="The kubelet's own /pods on its HTTPS port (`https://<node IP>:10250/pods`), "
        "which says each pod's phase: a pod that completed is ended though the pod-resources "
        "API still lists it (kubelets before 1.34). The agent's ServiceAccount needs `get` on "
        "`nodes/pods` (Kubernetes 1.33+; `nodes/proxy` before). Unset: every listed pod runs.",
    )
    kubelet_token_file: Path = Field(
        Path("/var/run/secrets/kubernetes.io/serviceaccount/token"),
        description="The bearer token sent to the kubelet's /pods, read at every call.",
    )
    kubelet_ca_file: Path | None = Field(
        Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"),
        description="The CA that signed the kubelet's serving certificate (the cluster's, "
        "with serverTLSBootstrap); unset: the certificate is not checked (a kubelet's "
        "self-signed default).",
    )
    owners_interval_seconds: float = Field(
        10.0,
        gt=0,
        description="The owner directory is read again after this long, or sooner when a "
        "process of an owner newer than its last reading appears (at most once per tick).",
    )
    owners_timeout_seconds: float = Field(
        5.0,
        gt=0,
        description="Deadline of each call to the kubelet or slurmd. Above Slurm's own 2 s "
        "retry of munge, so that an authentication outage reads in Slurm's words (a command "
        "cut off says what Slurm had said by then); below its ~9 s retry of an unreachable "
        "slurmctld, which would hold the agent's tick that long.",
    )
    kernel_log_path: Path | None = Field(
        Path("/dev/kmsg"),
        description="The kernel log read for `NVRM: Xid` lines (a second source of Xid "
        "errors beside NVML's events): /dev/kmsg, or a file of syslog lines (kern.log), "
        "`journalctl -o json` entries or dmesg lines; unset: not read.",
    )
    state_dir: Path = Field(
        Path("/var/lib/observer-agent"),
        description="Where the agent keeps what must outlive a restart (the kernel log "
        "position, so each Xid line is reported once).",
    )
    xid_wait_seconds: float = Field(
        1.0,
        gt=0,
        lt=10,
        description="Longest wait for one NVML event, and so the kernel log's polling "
        "cadence and how late the event thread notices a stop.",
    )
    interval_seconds: float = Field(1.0, gt=0, description="Lean sampling cadence.")
    counters_interval_seconds: float = Field(
        60.0,
        gt=0,
        description="Cadence of the expensive tier (energy 3 ms, PCIe throughput 21 ms per GPU).",
    )
    listen_host: ListenHost = Field(
        "0.0.0.0", description="Address of /metrics, /healthz, /v1/snapshot."
    )
    listen_port: int = Field(9400, ge=0, le=65535, description="0 picks a free port.")
    metrics_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="A second port serving /metrics and /healthz alone, so that a "
        "NetworkPolicy can let Prometheus in there while /v1/snapshot (every GPU process and "
        "its owner) stays on listen_port for the controller; unset: one port for all three.",
    )
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

    @field_validator("metrics_port")
    @classmethod
    def _apart_from_listen_port(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value != 0 and value == info.data.get("listen_port"):
            raise ValueError("must differ from agent.listen_port (unset it for one port)")
        return value

    @field_validator("healthz_max_age_seconds")
    @classmethod
    def _two_ticks(cls, value: float, info: ValidationInfo) -> float:
        # The last good tick is up to one interval old on a healthy agent: below two, the
        # kubelet would restart it forever.
        lean = info.data.get("interval_seconds")
        if lean is not None and value < 2 * lean:
            raise ValueError(f"must be at least twice agent.interval_seconds ({2 * lean:g} s)")
        return value
