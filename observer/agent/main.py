"""Composition of the node agent: the running daemon and the as-fast-as-possible replay.

A node pays for every module the agent imports (most of its resident memory is imports):
what only one configuration uses (the kubelet's gRPC client, Slurm's commands) is imported
where that configuration is built. tests/agent/test_lean_imports.py keeps it so."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from observer import codec
from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.agent.xids import XidWatch
from observer.clock import Clock, ManualClock, SystemClock, TraceTimeline
from observer.domain import DriverState, Finding
from observer.gpu.backend import GpuBackend, XidEventSource
from observer.gpu.kernel_log import KernelLog
from observer.gpu.minors import uuids_by_minor
from observer.gpu.replay import ReplayGpuBackend, Trace
from observer.http import serving
from observer.logging_setup import get_logger
from observer.loops import PeriodicLoop
from observer.metrics import AgentMetrics, GpuCollector
from observer.ownership.base import (
    OwnerDirectory,
    OwnerSource,
    ProcessTable,
    Undetected,
)
from observer.ownership.devices import NodeGpus
from observer.ownership.procfs import ProcFs
from observer.ownership.replay import ReplayOwners
from observer.ownership.tracked import TrackedOwners
from observer.settings import Settings
from observer.settings.agent import AgentSettings
from observer.settings.detectors import NodeLeakSettings

_log = get_logger("observer.agent")


def build_agent(
    settings: Settings,
    clock: Clock,
    registry: CollectorRegistry,
    stop: threading.Event | None = None,
) -> NodeAgent:
    """With `stop`, the agent has an Xid event thread (not started) that stops with it."""
    cfg = settings.agent
    backend: GpuBackend
    processes: ProcessTable
    owners: OwnerDirectory
    tracked: TrackedOwners | None = None
    kernel_log: KernelLog | None = None
    metrics = AgentMetrics(registry)
    if cfg.gpu_backend == "replay":
        assert cfg.replay_trace_dir is not None  # enforced by the settings validator
        trace = Trace.load(cfg.replay_trace_dir)
        timeline = TraceTimeline(trace.start, trace.end, clock.now().timestamp(), cfg.replay_loop)
        backend = ReplayGpuBackend(trace, timeline, clock)
        sampler = Sampler(backend, clock, metrics, cfg.counters_interval_seconds)
        # A recording's pids exist only in the recording: its owners.json stands in for
        # /proc and for the scheduler.
        processes = owners = ReplayOwners(cfg.replay_trace_dir, timeline, clock)
    else:
        from observer.gpu.nvml import NvmlGpuBackend  # noqa: PLC0415 - only nodes with NVML

        backend = NvmlGpuBackend(clock, cfg.nvml_library_path)
        processes = ProcFs(cfg.proc_root, cfg.passwd_file)
        sampler = Sampler(backend, clock, metrics, cfg.counters_interval_seconds)
        source = owner_source(cfg, clock, sampler.uuids_by_index, sampler.mig_parents)
        owners = tracked = TrackedOwners(source, cfg.owners_interval_seconds)
        kernel_log = _kernel_log(cfg, clock)
    xids = None
    if stop is not None:
        events: XidEventSource = backend.xid_events()
        xids = XidWatch(events, kernel_log, cfg.xid_wait_seconds, stop, metrics.xid_source_up)
    agent = NodeAgent(
        node=cfg.node_name,
        sampler=sampler,
        attributor=Attributor(processes, owners, cfg.expose_command_lines),
        rules=settings.detectors.node,
        clock=clock,
        metrics=metrics,
        owners=tracked,
        health=settings.detectors.gpu_health,
        xids=xids,
    )
    registry.register(GpuCollector(agent.snapshot))
    return agent


def _kernel_log(cfg: AgentSettings, clock: Clock) -> KernelLog | None:
    """The kernel log reader, positioned in this boot's log; None when it is not to be read
    or the boot cannot be told (a position without its boot would be misread after one)."""
    if cfg.kernel_log_path is None:
        return None
    boot_id_file = cfg.proc_root / "sys" / "kernel" / "random" / "boot_id"
    try:
        boot_id = boot_id_file.read_text().strip()
    except OSError as exc:
        _log.warning("kernel log not read: the boot id is unknown", error=str(exc))
        return None
    # Record times count from boot on the monotonic clock, which the host and its containers
    # share.
    boot_time = clock.now() - timedelta(seconds=time.clock_gettime(time.CLOCK_MONOTONIC))
    return KernelLog(
        cfg.kernel_log_path, cfg.state_dir / "kernel-log-position.json", boot_id, boot_time, clock
    )


def owner_source(
    cfg: AgentSettings,
    clock: Clock,
    gpus: Callable[[], Mapping[int, str]],
    mig_parents: Callable[[], Mapping[str, str]] = dict,
) -> OwnerSource:
    """The node's scheduler agent as `agent.owners` names it; `auto` takes the kubelet when
    its socket exists, else Slurm when scontrol is on PATH. With none (`none`, or `auto`
    finding neither) the agent reports itself blind to owners, saying why, so that the
    reports count the node as not knowing its owners. `gpus`: the node's GPUs by NVML index,
    which Slurm's GRES indices are taken to follow; `mig_parents`: the GPU of each MIG
    instance (by UUID), which the kubelet names MIG devices by."""
    choice = cfg.owners
    if choice == "none":
        return Undetected("agent.owners is none: no scheduler agent is asked")
    if choice == "auto":
        if cfg.pod_resources_socket.exists():
            choice = "kubelet"
        elif shutil.which("scontrol"):
            choice = "slurm"
        else:
            return Undetected(
                "agent.owners is auto and this node has neither the kubelet's pod-resources "
                f"socket ({cfg.pod_resources_socket}) nor scontrol on PATH"
            )
    if choice == "kubelet":
        from observer.ownership.kubelet import KubeletPodResources  # noqa: PLC0415 - gRPC
        from observer.ownership.kubelet_pods import KubeletPods  # noqa: PLC0415

        pods = None
        if cfg.kubelet_pods_url is not None:
            pods = KubeletPods(
                cfg.kubelet_pods_url,
                cfg.kubelet_token_file,
                cfg.kubelet_ca_file,
                cfg.owners_timeout_seconds,
            )
        return KubeletPodResources(
            clock,
            cfg.pod_resources_socket,
            cfg.pod_logs_dir,
            cfg.owners_timeout_seconds,
            gpus=lambda: NodeGpus(uuids_by_minor(cfg.proc_root), mig_parents()),
            pods=pods,
        )
    from observer.ownership.slurmd import SlurmdOwners  # noqa: PLC0415 - Slurm nodes only

    return SlurmdOwners(
        cfg.node_name,
        gpus,
        slurm_conf=None,  # the environment's SLURM_CONF, as every Slurm command reads it
        commands_dir=None,
        timeout_seconds=cfg.owners_timeout_seconds,
        clock=clock,
    )


def run_agent(
    settings: Settings,
    stop: threading.Event,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    on_listening: Callable[[int], object] | None = None,
) -> None:
    """Serve and sample until `stop` is set, then stop within the shutdown deadline."""
    cfg = settings.agent
    clock = clock or SystemClock()
    registry = registry or CollectorRegistry()
    agent = build_agent(settings, clock, registry, stop)
    loop = PeriodicLoop("agent", cfg.interval_seconds, agent.tick, clock, stop, agent.metrics.loops)

    def health() -> tuple[bool, dict[str, Any]]:
        age = loop.last_success_age_seconds()
        snap = agent.snapshot()
        driver = snap.driver.state if snap else DriverState.ERROR
        ok = age is not None and age <= cfg.healthz_max_age_seconds
        allocation = snap.allocation if snap else None
        return ok, {
            "status": "ok" if ok else "stale",
            "last_good_tick_age_seconds": age,
            "nvml": driver.value,
            "blind": driver is not DriverState.OK,
            # Blind to owners does not fail the probe: a restart would not bring the kubelet.
            "owner_directory": None
            if allocation is None
            else {"source": allocation.source, "up": allocation.up, "reason": allocation.reason},
        }

    def snapshot() -> dict[str, Any] | None:
        snap = agent.snapshot()
        return codec.snapshot_to_json(snap) if snap else None

    with serving(
        cfg.listen_host, cfg.listen_port, registry, health, snapshot, on_listening, cfg.metrics_port
    ) as port:
        _log.info(
            "agent listening",
            host=cfg.listen_host,
            port=port,
            metrics_port=cfg.metrics_port,
            node=cfg.node_name,
        )
        agent.start()
        loop.start()
        stop.wait()
        if not loop.join(cfg.shutdown_deadline_seconds):
            _log.warning(
                "a tick overran the shutdown deadline", deadline=cfg.shutdown_deadline_seconds
            )
        if not agent.join_events(cfg.xid_wait_seconds + 1):
            _log.warning("the Xid event thread overran its wait", wait=cfg.xid_wait_seconds)
    agent.close()
    _log.info("agent stopped")


def replay_trace(trace_dir: Path, rules: NodeLeakSettings, node: str = "replay") -> list[Finding]:
    """Run the agent over a whole recorded trace as fast as it goes, one tick per recorded
    instant; return every finding in its final state, in order of opening."""
    trace = Trace.load(trace_dir)
    clock = ManualClock(datetime.fromtimestamp(trace.start, UTC))
    settings = Settings.model_validate(
        {
            "agent": {
                "node_name": node,
                "gpu_backend": "replay",
                "replay_trace_dir": trace_dir,
                "replay_loop": False,
                # One tick per recorded instant: every tick reads the counters tier too.
                "interval_seconds": 1e-3,
                "counters_interval_seconds": 1e-3,
            },
            "detectors": {"node": rules.model_dump()},
        }
    )
    agent = build_agent(settings, clock, CollectorRegistry())
    final: dict[tuple[str, datetime], Finding] = {}
    for t in trace.tick_times():
        clock.set(datetime.fromtimestamp(t, UTC))
        for finding in agent.tick():
            final[(finding.key, finding.opened_at)] = finding
    return sorted(final.values(), key=lambda f: (f.opened_at, f.key))
