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
