"""Probe runs: what a probe expects, how it ended, and every attempt the platform made at it.
Pure value types, re-exported by `observer.domain`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class Expectation(StrEnum):
    """How a probe is expected to end; meeting the expectation is a pass."""

    SUCCEED = "succeed"
    FAIL = "fail"  # a non-zero exit, as the platform must report it
    FAIL_TO_START = (
        "fail_to_start"  # bad image or command: must fail or stay pending, with a reason
    )
    OOM = "oom"
    BLOCKED = "blocked"  # beyond quota: refused or held with a recorded reason
    DENIED = "denied"  # isolation: every access to another tenant's work must be refused


@dataclass(frozen=True, slots=True)
class AccessAttempt:
    """One try, with one tenant's credentials, at another tenant's work (isolation probe)."""

    action: str  # e.g. "list jobs", "read pod logs", "read secrets", "squeue other account"
    target: str  # the other tenant (namespace, account) and object tried
    allowed: bool  # True: the platform let it through, which is a must-fix result
    detail: str  # the platform's answer, as the user would see it


class RunState(StrEnum):
    SUBMITTED = "submitted"  # asked, the platform's answer not yet seen
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


class Outcome(StrEnum):
    PASSED = "passed"  # ended the way its expectation says
    FAILED = "failed"  # ended another way
    REJECTED = "rejected"  # the platform refused the submission
    TIMED_OUT = "timed_out"  # the controller gave up waiting and cancelled it
    CANCELLED = "cancelled"  # cancelled by the controller's shutdown or by someone else
    LOST = "lost"  # the platform forgot the job before it was seen to end
    # the probe's program found no usable GPU on its node (errors.NO_GPU_EXIT_CODE): not the
    # probe's failure; a platform finding (gpu_unusable) when the scheduler gave it GPUs
    NO_GPU = "no_gpu"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One start of a job that the platform ended and queued again (Slurm's NODE_FAIL,
    PREEMPTED or requeue; a Kubernetes Job's pod replaced), in the platform's words."""

    eligible_at: datetime | None  # when it could start: the submission, or its requeue
    started_at: datetime | None
    ended_at: datetime | None
    nodes: tuple[str, ...]
    state: str  # the platform's word for how it ended: NODE_FAIL, PREEMPTED, REQUEUED...
    reason: str | None = None

    @property
    def wait_seconds(self) -> float | None:
        return wait_seconds(self.eligible_at, self.started_at)


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """One probe submission and everything recorded about it."""

    run_id: str
    probe: str
    tenant: str
    queue: str | None
    window: str | None
    expectation: Expectation
    gpus: int
    nodes: int
    state: RunState
    job_id: str | None = None
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    outcome: Outcome | None = None
    exit_code: int | None = None
    reason: str | None = None  # the platform's reason (pending, failure, refusal)
    message: str | None = None  # the platform's explanation text, as a person sees it
    pending_reasons: Mapping[str, float] = field(default_factory=dict)  # reason -> seconds seen
    node_names: tuple[str, ...] = ()  # where the platform ran it, once it started
    # What the node agents name as the owner of its GPU processes (JobStatus.owner_ids), as
    # the platform last gave them: the failure causes tell its GPUs by them.
    owner_ids: tuple[str, ...] = ()
    # A quota-reclaim probe's over-quota run: its wait to start counts from that run's end.
    reclaims_run_id: str | None = None
    # Whom the platform ran it as, where it says (Slurm's user name); None: it named none.
    user: str | None = None
    # The observer's own estimate at submission of how long it would wait (controller/
    # estimates.py: the GPUs pending ahead over the GPUs started in the last hour); None:
    # it had none (no snapshot yet, or GPUs ahead and none started).
    expected_wait_seconds: float | None = None

    # The attempts the platform ended and queued again, oldest first; the run's own start,
    # end and nodes are its latest attempt's, which could start from `eligible_at` (None:
    # from its submission). `submitted_at` stays the first submission.
    attempts: tuple[Attempt, ...] = ()
    eligible_at: datetime | None = None

    @property
    def queue_wait_seconds(self) -> float | None:
        """The time it waited to start, each attempt from its own eligible time (never
        negative); None before any attempt started."""
        waits = [a.wait_seconds for a in self.attempts]
        waits.append(wait_seconds(self.eligible_at or self.submitted_at, self.started_at))
        known = [w for w in waits if w is not None]
        return sum(known) if known else None

    @property
    def first_started_at(self) -> datetime | None:
        """When its first attempt started: the start its estimate at submission is about."""
        starts = [a.started_at for a in self.attempts if a.started_at is not None]
        return starts[0] if starts else self.started_at

    @property
    def expected_wait_error_seconds(self) -> float | None:
        """Its first start minus the start the observer expected at its submission (late:
        positive); None without an estimate or a start."""
        started = self.first_started_at
        if self.expected_wait_seconds is None or started is None or self.submitted_at is None:
            return None
        return (started - self.submitted_at).total_seconds() - self.expected_wait_seconds

    @property
    def main_wait_reason(self) -> str | None:
        """The pending reason it was seen waiting for longest, in the platform's words; None
        when it was never seen pending."""
        if not self.pending_reasons:
            return None
        return max(self.pending_reasons.items(), key=lambda kv: (kv[1], kv[0]))[0]

    @property
    def run_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


def wait_seconds(eligible_at: datetime | None, started_at: datetime | None) -> float | None:
    """From when a job could start to its start; a platform clock a little behind the
    observer's reads as no wait, never a negative one."""
    if eligible_at is None or started_at is None:
        return None
    return max(0.0, (started_at - eligible_at).total_seconds())
