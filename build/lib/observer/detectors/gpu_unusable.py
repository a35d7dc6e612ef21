"""A node the scheduler hands GPUs out on, where a probe's program found no usable GPU (no
libcuda.so.1, or the driver sees no device: the run's outcome is no_gpu). Without GPUs
allocated, "no GPU here" says nothing about the platform; with them, the node claims GPUs
it cannot run work on: a critical event per node and run."""

from __future__ import annotations

from observer.domain import Finding, FindingKind, Outcome, ProbeRun, Severity

DETECTOR = "gpu_unusable"


def evaluate(run: ProbeRun) -> list[Finding]:
    """The findings of one ended run: none unless it ended no_gpu holding GPUs."""
    if run.outcome is not Outcome.NO_GPU or run.gpus == 0 or run.finished_at is None:
        return []
    at = run.finished_at
    return [
        Finding(
            detector=DETECTOR,
            kind=FindingKind.EVENT,
            subject={"node": node, "run_id": run.run_id},
            severity=Severity.CRITICAL,
            summary=f"node {node} was allocated GPUs for probe {run.probe} ({run.job_id}) but "
            "its program found no usable GPU: no NVIDIA driver or no device visible",
            opened_at=at,
            closed_at=at,
            evidence={
                "job_id": run.job_id,
                "probe": run.probe,
                "tenant": run.tenant,
                "gpus": run.gpus,
                "exit_code": run.exit_code,
                "reason": run.reason,
                "message": run.message,
                "rule": "a probe given GPUs by the scheduler exits 'no GPU here' "
                "(observer probe gpu-burn, exit 69)",
            },
        )
        for node in (run.node_names or ("unknown",))
    ]
