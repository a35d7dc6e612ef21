"""The job's own output as the platform keeps it: the Kubernetes pod-log API, or a Slurm
job's output file, read through the scheduler backend's `logs(job_id)`. It shows what the
node-level log path (container runtime, kubelet rotation) lost before any shipper."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from observer.errors import BackendError
from observer.log_readers.base import DeliveredLine, run_token, split_timestamp


class PodLogReader:
    def __init__(
        self,
        fetch: Callable[[str], str],
        job_for_run: Callable[[str], str | None],
        *,
        leading_timestamp: bool = False,
    ) -> None:
        """`fetch`: SchedulerBackend.logs (raises BackendError). `job_for_run`: the platform
        job id of a run, None if none is known. `leading_timestamp`: each line starts with
        the runtime's receive time (the pod-log API's timestamps=true), taken as
        `delivered_at`."""
        self._fetch = fetch
        self._job_for_run = job_for_run
        self._leading_timestamp = leading_timestamp

    def read(self, run_id: str, since: datetime, until: datetime) -> list[DeliveredLine]:
        """All of the job's output holds this run only, so `since` and `until` do not narrow
        it; the platform's own retention decides what is left."""
        job_id = self._job_for_run(run_id)
        if job_id is None:
            raise BackendError(f"no job is known for run {run_id}: its output cannot be read")
        token = run_token(run_id)
        source = f"job/{job_id}"
        lines = []
        for raw in self._fetch(job_id).splitlines():
            delivered_at, text = split_timestamp(raw) if self._leading_timestamp else (None, raw)
            if token in text:
                lines.append(DeliveredLine(text, source, delivered_at=delivered_at))
        return lines
