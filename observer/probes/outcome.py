"""How a probe ended, judged against what it expected: an expected failure that fails the
expected way is a pass. Pure: the platform's view of the job in, an outcome out."""

from __future__ import annotations

from observer.domain import Expectation, JobPhase, JobStatus, Outcome, ProbeRun
from observer.errors import NO_GPU_EXIT_CODE

# The Kubernetes backend's reasons for a job its queue holds: Kueue has reserved no quota for
# its Workload ("QuotaReserved=False: Pending"), Volcano's queue has not enqueued its PodGroup
# ("PodGroup Pending: NotEnoughResources"). Both are the queue's quota at work.
KUEUE_QUOTA_HOLD = "QuotaReserved=False"
VOLCANO_QUEUE_HOLD = "PodGroup Pending"
QUEUE_QUOTA_HOLDS = (KUEUE_QUOTA_HOLD, VOLCANO_QUEUE_HOLD)
# The platforms' words for "held back by a quota or limit" (Kueue, ResourceQuota, Slurm QOS
# and association limits, the simulator).
QUOTA_REASON_MARKS = (
    *QUEUE_QUOTA_HOLDS,
    "QuotaExceeded",
    "exceeded quota",
    "Inadmissible",
    "QOSMax",
    "QOSGrp",
    "AssocMax",
    "AssocGrp",
)
START_FAILURE_REASONS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "StartError",
        "ContainerCannotRun",
        "CreateContainerError",
    }
)
COMMAND_NOT_RUNNABLE_EXIT_CODES = frozenset({126, 127})
OOM_MARKS = ("OOMKilled", "OUT_OF_MEMORY", "OutOfMemory")
OOM_EXIT_CODE = 137
# The probes meant to fail: their job failing the expected way is their pass.
EXPECTED_FAILURES = frozenset({Expectation.FAIL, Expectation.FAIL_TO_START, Expectation.OOM})


# The reasons the observer records itself: the message beside one is the observer's reasoning,
# not the platform's words (a refusal the platform gave keeps the platform's reason).
PROBE_NOT_RUNNABLE = "ProbeNotRunnable"
SUBMISSION_FAILED = "SubmissionFailed"
SUBMISSION_ERROR = "SubmissionError"
SUBMISSION_NOT_CONFIRMED = "SubmissionNotConfirmed"
JOB_FORGOTTEN = "JobForgotten"
CONTROLLER_SHUTDOWN = "ControllerShutdown"
ISOLATION_BREACH = "IsolationBreach"
# A run's attempt the platform queued again without naming how it ended (its accounting
# unreachable, or a count alone): the observer's word for it.
REQUEUED = "REQUEUED"
OBSERVER_REASONS = frozenset(
    {
        PROBE_NOT_RUNNABLE,
        SUBMISSION_FAILED,
        SUBMISSION_ERROR,
        SUBMISSION_NOT_CONFIRMED,
        JOB_FORGOTTEN,
        CONTROLLER_SHUTDOWN,
        ISOLATION_BREACH,
    }
)

# Cancellations that are the observer's own choice, not the platform's doing: listed apart and
# kept out of the failure evidence. A run the observer gave up on (TIMED_OUT) is not one of
# them: the platform did not run it within the deadline.
OBSERVER_CANCELLATIONS = frozenset({CONTROLLER_SHUTDOWN})


def cancelled_by_observer(run: ProbeRun) -> bool:
    return run.outcome is Outcome.CANCELLED and run.reason in OBSERVER_CANCELLATIONS


# A ResourceQuota refuses a Job's pods at admission: the Job's reason is FailedCreate, and only
# the API server's message names the quota ('pods "..." is forbidden: exceeded quota: ...').
RESOURCE_QUOTA_REFUSAL = "exceeded quota"


def is_quota_reason(reason: str | None) -> bool:
    return reason is not None and any(mark in reason for mark in QUOTA_REASON_MARKS)


def is_quota_hold(reason: str | None, message: str | None) -> bool:
    """Whether a pending job is held by a quota: its reason says so, or its message does."""
    return is_quota_reason(reason) or (message is not None and RESOURCE_QUOTA_REFUSAL in message)


# The API server's words when admission refuses a pod for good: the Job stays FailedCreate with
# them in its event, and however long it waits the same pod is refused the same way. "exceeded
# quota" is not among them: usage falls as other pods end.
ADMISSION_REFUSALS = (
    # ResourceQuota covering cpu or memory, the pod not stating them
    # (plugin/resourcequota: 'failed quota: <quota>: must specify limits.cpu for: probe; ...')
    "failed quota:",
    # LimitRange (plugin/pkg/admission/limitranger: 'maximum cpu usage per Container is 2, but
    # limit is 4', 'minimum memory usage per Pod is ...', '... limit to request ratio per ...')
    " usage per Container is ",
    " usage per Pod is ",
    " limit to request ratio per ",
    # Pod Security admission ('violates PodSecurity "restricted:latest": ...')
    "violates PodSecurity",
    # a validating or mutating webhook ('admission webhook "<name>" denied the request: ...')
    "admission webhook ",
)


def is_admission_refusal(message: str | None) -> bool:
    """Whether the platform's words say admission refused the job's pods for good."""
    return message is not None and any(mark in message for mark in ADMISSION_REFUSALS)


def judge(expectation: Expectation, status: JobStatus) -> Outcome | None:
    """The outcome the job's current state settles, or None while it is not settled yet."""
    phase, reason = status.phase, status.reason or ""
    if phase is JobPhase.CANCELLED:
        return Outcome.CANCELLED
    if phase is JobPhase.PENDING and is_admission_refusal(status.message):
        return Outcome.REJECTED  # never admitted, whatever it was meant to show
    if expectation is Expectation.SUCCEED:
        if phase is JobPhase.FAILED and status.exit_code == NO_GPU_EXIT_CODE:
            return Outcome.NO_GPU
        return {JobPhase.SUCCEEDED: Outcome.PASSED, JobPhase.FAILED: Outcome.FAILED}.get(phase)
    if expectation is Expectation.BLOCKED:
        if phase is JobPhase.PENDING:
            return Outcome.PASSED if is_quota_hold(reason, status.message) else None
        return Outcome.FAILED  # it ran: the quota was not enforced
    if phase is JobPhase.SUCCEEDED:
        return Outcome.FAILED
    if expectation is Expectation.FAIL_TO_START:
        if phase is JobPhase.PENDING:
            return Outcome.PASSED if reason in START_FAILURE_REASONS else None
        if phase is JobPhase.FAILED:
            ok = (
                reason in START_FAILURE_REASONS
                or status.exit_code in COMMAND_NOT_RUNNABLE_EXIT_CODES
            )
            return Outcome.PASSED if ok else Outcome.FAILED
        return None
    if phase is not JobPhase.FAILED:
        return None
    if expectation is Expectation.OOM:
        oom = any(mark in reason for mark in OOM_MARKS) or status.exit_code == OOM_EXIT_CODE
        return Outcome.PASSED if oom else Outcome.FAILED
    return Outcome.PASSED if status.exit_code not in (0, None) else Outcome.FAILED
