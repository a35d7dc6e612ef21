"""The isolation probe on each real Slurm release: alice (account research) tries to read the jobs
of account prod, whose user is bob, with squeue, scontrol and sacct. Without PrivateData every
user sees every job, which the probe must report as breaches; with PrivateData=jobs in both
slurmctld and slurmdbd, every try comes back empty or refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from observer.backends.slurm.backend import SlurmBackend
from observer.backends.slurm.isolation import ISOLATION_TARGET_NAME
from observer.clock import SystemClock
from observer.domain import AccessAttempt
from observer.errors import ProbeError
from tests.backends.slurm_harness import SlurmHarness

USERS = {"research": "alice", "prod": "bob"}


@pytest.fixture
def backend(slurm: SlurmHarness) -> Iterator[SlurmBackend]:
    settings = slurm.settings.model_copy(update={"tenant_users": USERS})
    yield SlurmBackend(settings, SystemClock())


def _by_action(attempts: list[AccessAttempt]) -> dict[str, AccessAttempt]:
    return {a.action: a for a in attempts}


def _targets_left(slurm: SlurmHarness) -> list[str]:
    names = slurm.cli("squeue", "--noheader", "--all", "--states=all", "--format=%j|%T")
    return [
        line
        for line in names.splitlines()
        if line.startswith(ISOLATION_TARGET_NAME + "|") and not line.endswith("|CANCELLED")
    ]


def test_without_private_data_every_read_of_another_accounts_jobs_is_a_breach(
    slurm: SlurmHarness, backend: SlurmBackend
):
    attempts = backend.probe_isolation("research", "prod")

    tried = _by_action(attempts)
    assert list(tried) == [
        "list jobs with squeue",
        "show job with scontrol",
        "list jobs with sacct",
    ]
    assert all(a.allowed for a in attempts), attempts
    # with no job of prod's own to read, the probe placed a held one as bob, then cancelled it
    target = tried["show job with scontrol"].target
    account, job_id = target.split("/")
    assert account == "prod" and job_id.isdigit()
    assert tried["list jobs with squeue"].target == "prod"
    assert job_id in tried["list jobs with squeue"].detail
    assert tried["list jobs with sacct"].detail == f"sacct as alice listed job {job_id} of prod"
    owner = slurm.cli("sacct", "-X", "-P", "-n", "-j", job_id, "-o", "User,Account,State")
    assert owner.strip().split("|")[:2] == ["bob", "prod"]
    assert _targets_left(slurm) == []


def test_an_existing_job_of_the_other_account_is_the_one_tried(
    slurm: SlurmHarness, backend: SlurmBackend
):
    theirs = slurm.cli(
        "sbatch", "--parsable", "--account=prod", "--hold", "--output=/dev/null", "--chdir=/",
        "--wrap=sleep 60", as_user="bob",
    ).strip()  # fmt: skip

    attempts = backend.probe_isolation("research", "prod")

    assert _by_action(attempts)["show job with scontrol"].target == f"prod/{theirs}"
    # the tenant's own job is left as it was: only a job the probe placed is cancelled
    assert "PENDING" in slurm.cli("squeue", "--noheader", "-j", theirs, "--format=%T")


def test_under_private_data_jobs_every_read_is_denied_in_slurms_words(
    slurm: SlurmHarness, backend: SlurmBackend
):
    with slurm.private_data("jobs"):
        attempts = backend.probe_isolation("research", "prod")
        # the observer itself (root, SlurmUser) still sees every tenant's jobs
        assert backend.snapshot().nodes

    tried = _by_action(attempts)
    assert not any(a.allowed for a in attempts), attempts
    job_id = tried["show job with scontrol"].target.split("/")[1]
    assert (
        tried["show job with scontrol"].detail == "slurm_load_jobs error: Invalid job id specified"
    )
    assert tried["list jobs with squeue"].detail == (
        f"squeue --accounts=prod as alice listed no job (slurmctld holds job {job_id})"
    )
    assert "listed no job (slurmdbd holds it)" in tried["list jobs with sacct"].detail
    assert _targets_left(slurm) == []


def test_private_data_in_slurmctld_alone_still_leaks_through_sacct(
    slurm: SlurmHarness, backend: SlurmBackend
):
    # the common half-done set-up: PrivateData in slurm.conf, none in slurmdbd.conf
    with slurm.private_data("jobs", slurmdbd=False):
        attempts = backend.probe_isolation("research", "prod")

    allowed = [a.action for a in attempts if a.allowed]
    assert allowed == ["list jobs with sacct"]


def test_a_tenant_without_a_user_cannot_be_probed(slurm: SlurmHarness):
    with pytest.raises(ProbeError, match="no user of account research"):
        slurm.backend.probe_isolation("research", "prod")


def test_a_run_as_command_that_cannot_run_is_a_probe_error(slurm: SlurmHarness):
    if slurm.cluster.marker == "slurm24":
        pytest.skip(
            "24.11's programs run in a chroot, which only root enters: its run-as is chroot's "
            "--userspec inside the wrappers, not a prefix of the observer's that can fail"
        )
    settings = slurm.settings.model_copy(update={"tenant_users": {"research": "no-such-user-here"}})
    with pytest.raises(ProbeError, match="cannot run squeue as no-such-user-here"):
        SlurmBackend(settings, SystemClock()).probe_isolation("research", "prod")
    assert _targets_left(slurm) == []
