"""Pure parsers: the owner of a process from its /proc/<pid>/cgroup and environ contents.

Layouts covered: Kubernetes pods under cgroup v1 and v2 with the cgroupfs driver
(`/kubepods/burstable/pod<uid>/<container>`) and the systemd driver
(`kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope`); Slurm jobs
under proctrack/cgroup, v1 (`/slurm/uid_N/job_N/step_S/task_N`) and v2
(`/system.slice/<node>_slurmstepd.scope/job_N/step_S/user/task_N`), the step S as listpids names
it (`0`, `batch`, `extern`, `0+1`) in the owner's `container_id`, as a pod's container is.
Under proctrack/linuxproc the cgroup names no job: the environ's SLURM_JOB_ID may.
"""

from __future__ import annotations

import re

from observer.domain import NO_OWNER, Owner, OwnerKind

_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER = re.compile(r"(?:^|[/-])([0-9a-f]{64})(?:\.scope)?$")
_SLURM_JOB = re.compile(r"/job_(\d+)(?:/step_([^/]+))?(?:/|$)")
_SLURM_ENV = re.compile(rb"(?:^|\x00)SLURM_JOB_ID=(\d+)(?:\x00|$)")


def owner_from_cgroup(text: str) -> Owner:
    """The owner named by any line of a /proc/<pid>/cgroup file, or NO_OWNER."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        pod = _POD.search(path)
        if pod:
            container = _CONTAINER.search(path)
            return Owner(
                OwnerKind.POD,
                pod.group(1).replace("_", "-"),
                container.group(1) if container else "",
            )
        job = _SLURM_JOB.search(path)
        if job and "slurm" in path:
            return Owner(OwnerKind.SLURM_JOB, job.group(1), job.group(2) or "")
    return NO_OWNER


def owner_from_environ(data: bytes) -> Owner:
    """A Slurm job id from a NUL-separated environ block (a task launched outside the job's
    cgroup still carries SLURM_JOB_ID)."""
    job = _SLURM_ENV.search(data)
    return Owner(OwnerKind.SLURM_JOB, job.group(1).decode()) if job else NO_OWNER
