"""A probe's outcome against its expectation: an expected failure that fails the expected
way is a pass."""

import pytest

from observer.domain import Expectation, JobPhase, JobStatus, Outcome
from observer.probes.outcome import judge

E, P = Expectation, JobPhase


def _status(
    phase: JobPhase,
    exit_code: int | None = None,
    reason: str | None = None,
    message: str | None = None,
) -> JobStatus:
    return JobStatus(
        "j1", "r1", "t", None, phase, 1, exit_code=exit_code, reason=reason, message=message
    )


# The Job controller's event when a ResourceQuota refuses the Job's pod: the quota is named in
# the API server's message only.
QUOTA_REFUSAL = (
    'Error creating: pods "observer-quota-1-x" is forbidden: exceeded quota: research-quota, '
    "requested: requests.nvidia.com/gpu=3, used: requests.nvidia.com/gpu=0, "
    "limited: requests.nvidia.com/gpu=2"
)


@pytest.mark.parametrize(
    ("expectation", "status", "outcome"),
    [
        (E.SUCCEED, _status(P.SUCCEEDED, 0), Outcome.PASSED),
        (E.SUCCEED, _status(P.FAILED, 1, "NonZeroExitCode"), Outcome.FAILED),
        (E.SUCCEED, _status(P.RUNNING), None),
        (E.SUCCEED, _status(P.PENDING, reason="Resources"), None),
        (E.SUCCEED, _status(P.CANCELLED), Outcome.CANCELLED),
        # `observer probe gpu-burn` found no GPU on its node: not the probe's failure
        (E.SUCCEED, _status(P.FAILED, 69, "NonZeroExitCode"), Outcome.NO_GPU),
        (E.SUCCEED, _status(P.FAILED, 69, "Error"), Outcome.NO_GPU),
        (E.FAIL, _status(P.FAILED, 69, "NonZeroExitCode"), Outcome.PASSED),
        (E.FAIL, _status(P.FAILED, 3, "NonZeroExitCode"), Outcome.PASSED),
        (E.FAIL, _status(P.SUCCEEDED, 0), Outcome.FAILED),  # the platform hid the failure
        (E.FAIL, _status(P.FAILED, None, "NodeFail"), Outcome.FAILED),
        (E.FAIL_TO_START, _status(P.FAILED, 127, "NonZeroExitCode"), Outcome.PASSED),
        (E.FAIL_TO_START, _status(P.FAILED, 128, "StartError"), Outcome.PASSED),
        (E.FAIL_TO_START, _status(P.PENDING, reason="ImagePullBackOff"), Outcome.PASSED),
        (E.FAIL_TO_START, _status(P.PENDING, reason="Resources"), None),
        (E.FAIL_TO_START, _status(P.FAILED, 1, "Error"), Outcome.FAILED),
        (E.FAIL_TO_START, _status(P.SUCCEEDED, 0), Outcome.FAILED),
        (E.OOM, _status(P.FAILED, 137, "OOMKilled"), Outcome.PASSED),
        (E.OOM, _status(P.FAILED, 0, "OUT_OF_MEMORY"), Outcome.PASSED),
        (E.OOM, _status(P.FAILED, 1, "NonZeroExitCode"), Outcome.FAILED),
        (E.OOM, _status(P.SUCCEEDED, 0), Outcome.FAILED),
        (E.BLOCKED, _status(P.PENDING, reason="QOSMaxGRESPerJob"), Outcome.PASSED),
        (E.BLOCKED, _status(P.PENDING, reason="QuotaExceeded"), Outcome.PASSED),
        (E.BLOCKED, _status(P.PENDING, reason="Resources"), None),
        (
            E.BLOCKED,
            _status(P.PENDING, reason="FailedCreate", message=QUOTA_REFUSAL),
            Outcome.PASSED,
        ),
        (E.BLOCKED, _status(P.PENDING, reason="FailedCreate", message="no such node"), None),
        (E.BLOCKED, _status(P.RUNNING), Outcome.FAILED),  # the quota was not enforced
    ],
)
def test_judgement(expectation: Expectation, status: JobStatus, outcome: Outcome | None):
    assert judge(expectation, status) is outcome


# The Job controller's event when admission refuses the Job's pod for good, one per kind, in
# the API server's words (each plugin's message, after 'pods "<name>" is forbidden: ').
POD = 'Error creating: pods "observer-short-1-x" is forbidden: '
ADMISSION_REFUSALS = {
    "compute quota": POD + "failed quota: research-compute: must specify limits.cpu for: "
    "probe; requests.memory for: probe",
    "limit range": POD + "maximum cpu usage per Container is 2, but limit is 4",
    "limit range ratio": POD + "cpu max limit to request ratio per Container is 4, but "
    "provided ratio is 10.000000",
    "pod security": POD + 'violates PodSecurity "restricted:latest": runAsNonRoot != true '
    '(pod or container "probe" must set securityContext.runAsNonRoot=true)',
    "webhook": 'Error creating: admission webhook "validate.kyverno.svc-fail" denied the '
    "request: resource Pod/research/observer-short-1-x was blocked",
}


@pytest.mark.parametrize("kind", sorted(ADMISSION_REFUSALS))
@pytest.mark.parametrize("expectation", list(Expectation))
def test_a_pod_admission_refuses_for_good_is_rejected_not_waited_for(
    kind: str, expectation: Expectation
) -> None:
    refused = _status(P.PENDING, reason="FailedCreate", message=ADMISSION_REFUSALS[kind])

    assert judge(expectation, refused) is Outcome.REJECTED


def test_a_quota_exceeded_for_now_is_waited_for() -> None:
    held = _status(P.PENDING, reason="FailedCreate", message=QUOTA_REFUSAL)

    assert judge(Expectation.SUCCEED, held) is None
