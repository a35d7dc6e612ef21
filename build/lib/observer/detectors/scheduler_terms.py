"""The schedulers' words that both fairness and unexplained_wait read: the pending reasons that
say the tenant's own quota holds a job, and the node states of a node in service and of one
that takes new jobs."""

from __future__ import annotations

from observer.domain import SchedulerNode

# Reasons that claim the tenant's quota is spent: the simulator's, Slurm's account GrpTRES limit
# on GPUs.
QUOTA_REASONS = frozenset({"QuotaExceeded", "AssocGrpGRES"})
# Node states (Slurm's sinfo words, Kubernetes' Ready) of a node in service, and of one that
# plainly takes new jobs; anything else (drained, down, not responding, cordoned) is neither.
_IN_SERVICE_STATES = frozenset({"idle", "mixed", "allocated", "completing", "ready"})
_TAKES_JOBS_STATES = frozenset({"idle", "mixed", "ready"})


def in_service(node: SchedulerNode) -> bool:
    return _in_states(node, _IN_SERVICE_STATES)


def takes_jobs(node: SchedulerNode) -> bool:
    return _in_states(node, _TAKES_JOBS_STATES)


def _in_states(node: SchedulerNode, allowed: frozenset[str]) -> bool:
    return {part.strip().lower() for part in node.state.split(",")} <= allowed
