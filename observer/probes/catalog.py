"""The probes a soak must exercise, each declaring its resources and how it is expected to
end. Sizes scale with the platform's node size (`gpus_per_node`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from observer.domain import Behaviour, Expectation, Workload

DEFAULT_DEADLINE_SECONDS = 4 * 3600.0
QUOTA_PROBE = "quota"
GPU_COMM_PROBE = "gpu-comm"
RECLAIM_PROBE = "quota-reclaim"

# A copy between two GPUs of a node over their direct path, in GB/s one way, by model name as
# CUDA's device name contains it: what a healthy pair of that model reaches with
# cuMemcpyPeerAsync (NVLink 4 on H100/H200 SXM: 450 GB/s a direction on paper; 350 is what
# a healthy pair measures comfortably above; A100 SXM's NVLink 3: 300 on paper; the PCIe
# and NVL cards' peer copies go over PCIe Gen4/Gen5). The gpu-comm probe's default, which
# controller.probes.gpu-comm.expected_gbps replaces; a model not listed is measured, not
# judged.
GPU_COMM_EXPECTED_GBPS: Mapping[str, float] = {
    "H100 PCIe": 40.0,
    "H100 NVL": 40.0,
    "H200 NVL": 40.0,
    "H100": 350.0,
    "H200": 350.0,
    "A100-PCIE": 20.0,
    "A100": 230.0,
}


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    name: str
    description: str
    workload: Workload
    expectation: Expectation
    copies: int = 1  # submitted at the same moment, per tenant (a burst)
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS  # from submission; then cancelled


def builtin_catalog(gpus_per_node: int) -> dict[str, ProbeSpec]:
    minute = 60.0
    specs = [
        ProbeSpec(
            "short",
            "one GPU for a minute",
            Workload(1, duration_seconds=minute),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "long",
            "one GPU for half an hour",
            Workload(1, duration_seconds=30 * minute),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "multi-gpu",
            "every GPU of one node",
            Workload(gpus_per_node, duration_seconds=2 * minute),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "multi-node",
            "every GPU of two nodes",
            Workload(gpus_per_node, nodes=2, duration_seconds=2 * minute),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "fail-exit",
            "exits with code 3: the platform must report it failed",
            Workload(1, duration_seconds=10, exit_code=3),
            Expectation.FAIL,
        ),
        ProbeSpec(
            "fail-command",
            "a command that does not exist",
            Workload(1, duration_seconds=10, behaviour=Behaviour.BAD_COMMAND),
            Expectation.FAIL_TO_START,
        ),
        ProbeSpec(
            "fail-image",
            "an image that cannot be pulled",
            Workload(1, duration_seconds=10, behaviour=Behaviour.BAD_IMAGE),
            Expectation.FAIL_TO_START,
            deadline_seconds=10 * minute,
        ),
        ProbeSpec(
            "fail-oom",
            "allocates past its memory limit",
            Workload(1, duration_seconds=minute, behaviour=Behaviour.OOM),
            Expectation.OOM,
        ),
        ProbeSpec(
            "burst",
            "four short jobs per tenant at the same moment",
            Workload(1, duration_seconds=2 * minute),
            Expectation.SUCCEED,
            copies=4,
        ),
        ProbeSpec(
            "log-canary",
            "2,000 sequenced lines, 20 a second, for the log-loss check",
            Workload(
                1,
                duration_seconds=2 * minute,
                behaviour=Behaviour.LOG_CANARY,
                log_lines=2000,
                log_interval_seconds=0.05,
            ),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "log-burst",
            "12,000 sequenced lines of 1 KiB as fast as they can be written: 12 MiB, past "
            "kubelet's 10 MiB containerLogMaxSize and logrotate's size thresholds",
            Workload(
                1,
                duration_seconds=2 * minute,
                behaviour=Behaviour.LOG_CANARY,
                log_lines=12_000,
                log_line_bytes=1024,
            ),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "gpu-busy",
            "a known busy interval, for the monitoring-lag check",
            Workload(1, duration_seconds=5 * minute, behaviour=Behaviour.GPU_BUSY),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            GPU_COMM_PROBE,
            "every GPU of one node copies to every other: each pair's rate against its link's",
            Workload(
                gpus_per_node,
                duration_seconds=minute,
                behaviour=Behaviour.GPU_COMM,
                expected_gbps=tuple(GPU_COMM_EXPECTED_GBPS.items()),
            ),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "fairness",
            "identical jobs from every tenant at the same moment",
            Workload(1, duration_seconds=2 * minute),
            Expectation.SUCCEED,
        ),
        ProbeSpec(
            "isolation",
            "with each tenant's own credentials, read every other tenant's jobs, pods, logs "
            "and secrets (other accounts' jobs on Slurm): every read must be refused",
            Workload(0, duration_seconds=0),  # no job, no GPUs: reads only
            Expectation.DENIED,
        ),
    ]
    return {spec.name: spec for spec in specs}


def quota_probe(quota_gpus: int, gpus_per_node: int) -> ProbeSpec:
    """Asks one GPU beyond the tenant's quota: it must be refused or held with a reason."""
    gpus = quota_gpus + 1
    nodes = -(-gpus // gpus_per_node)
    return ProbeSpec(
        QUOTA_PROBE,
        f"asks {gpus} GPUs against a quota of {quota_gpus}",
        Workload(-(-gpus // nodes), nodes=nodes, duration_seconds=60.0),
        Expectation.BLOCKED,
        deadline_seconds=10 * 60.0,
    )


# One GPU within the quota, submitted as soon as a quota probe was refused or held and
# cancelled: once the tenant's own usage leaves room, the quota must let it start within
# controller.quota_reclaim_seconds. It waits as long as any probe, since the tenant's own
# work may fill its quota for hours.
QUOTA_RECLAIM = ProbeSpec(
    RECLAIM_PROBE,
    "one GPU within the quota, once the over-quota job is gone: the quota must free",
    Workload(1, duration_seconds=30.0),
    Expectation.SUCCEED,
)


def platform_catalog(gpus_per_node: int, quotas: Collection[int]) -> dict[str, ProbeSpec]:
    """The built-in probes, and the quota probe sized to the smallest quota and its reclaim
    probe when a tenant has one: every probe a plan can name."""
    catalog = builtin_catalog(gpus_per_node)
    if quotas:
        catalog[QUOTA_PROBE] = quota_probe(min(quotas), gpus_per_node)
        catalog[RECLAIM_PROBE] = QUOTA_RECLAIM
    return catalog


def with_overrides(
    catalog: dict[str, ProbeSpec], overrides: Mapping[str, Mapping[str, Any]]
) -> dict[str, ProbeSpec]:
    """The catalog with per-probe changes applied: workload fields (duration_seconds,
    gpus_per_node, nodes, log_lines, log_interval_seconds, log_line_bytes, gpu_memory_gib,
    gpu_utilization_percent, expected_gbps: a mapping that replaces the whole table) and
    copies, deadline_seconds."""
    unknown = sorted(overrides.keys() - catalog.keys())
    if unknown:
        raise KeyError(", ".join(unknown))
    result = dict(catalog)
    for name, changes in overrides.items():
        spec_fields = {k: v for k, v in changes.items() if k in ("copies", "deadline_seconds")}
        workload_fields = {k: v for k, v in changes.items() if k not in spec_fields}
        if "expected_gbps" in workload_fields:  # a Workload is frozen: pairs, not a dict
            workload_fields["expected_gbps"] = tuple(workload_fields["expected_gbps"].items())
        spec = result[name]
        result[name] = replace(
            spec, workload=replace(spec.workload, **workload_fields), **spec_fields
        )
    return result
