"""Who changed a quota during the soak, as slurmdbd recorded it: `sacctmgr list transactions`
read into QuotaChanges. The recorded output (tests/backends/slurm_output/transactions.txt and
the listings naming its ids) is what the local Slurm 22.05 printed for the set-up of
slurm-up.sh and then these commands, each run as root:

    sacctmgr -i modify account research set GrpTRES=gres/gpu=11
    sacctmgr -i modify account research set GrpTRES=gres/gpu=-1
    sacctmgr -i modify user alice account=research set MaxTRES=gres/gpu=3,cpu=12
    sacctmgr -i modify user alice account=research set MaxTRES=gres/gpu=-1,cpu=-1
    sacctmgr -i modify qos low set GrpTRES=gres/gpu=6 MaxJobsPerUser=5
    sacctmgr -i modify qos low set GrpTRES=gres/gpu=-1 MaxJobsPerUser=-1
    sacctmgr -i modify account prod set GrpJobs=7 MaxSubmitJobs=9 QOS+=high
    sacctmgr -i modify account prod set GrpJobs=-1 MaxSubmitJobs=-1
    sacctmgr -i modify account prod set Description=prod
    sacctmgr -i modify account research set GrpTRES=cpu=40
    sacctmgr -i modify account research set GrpTRES=gres/gpu=12
    sacctmgr -i modify account where name=research,prod set GrpTRES=cpu=-1,gres/gpu=-1
    sacctmgr -i modify qos where name=low,high set GrpJobs=50
    sacctmgr -i modify qos where name=low,high set GrpJobs=-1
    sacctmgr -i modify user bob set QOS-=high
    sacctmgr -i modify user bob set QOS+=high
    sacctmgr -i modify user bob set QOS=normal,high
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from observer.backends.slurm.transactions import quota_changes
from tests.backends.slurm_harness import SlurmHarness

RECORDED = Path(__file__).parent / "slurm_output"


def _recorded() -> list[tuple[str, dict[str, str], str]]:
    changes = quota_changes(
        *(
            (RECORDED / name).read_text()
            for name in ("transactions.txt", "associations.txt", "qos.txt", "tres.txt")
        )
    )
    assert {c.actor for c in changes} == {"root"}
    assert [c.at for c in changes] == sorted(c.at for c in changes)
    return [(c.at.strftime("%H:%M:%S"), dict(c.subject), c.change) for c in changes]


def test_every_limit_change_reads_with_its_subject_and_sacctmgrs_words():
    changes = _recorded()

    # slurm-up.sh's own limits on the QOS, after the accounts were added
    assert changes[:2] == [
        ("05:21:30", {"qos": "high"}, "MaxTRESPerUser=gres/gpu=8"),
        ("05:21:30", {"qos": "low"}, "MaxTRES=gres/gpu=2"),
    ]
    research, alice = {"tenant": "research"}, {"tenant": "research", "user": "alice"}
    prod, bob = {"tenant": "prod"}, {"tenant": "prod", "user": "bob"}
    assert [(subject, change) for _, subject, change in changes[2:]] == [
        (research, "GrpTRES=gres/gpu=11"),
        (research, "GrpTRES=-1"),
        (alice, "MaxTRES=cpu=12,gres/gpu=3"),
        (alice, "MaxTRES=-1"),
        ({"qos": "low"}, "MaxJobsPerUser=5 GrpTRES=gres/gpu=6"),
        ({"qos": "low"}, "MaxJobsPerUser=-1 GrpTRES=-1"),
        (prod, "GrpJobs=7 MaxSubmitJobs=9 QOS+=high"),
        (prod, "GrpJobs=-1 MaxSubmitJobs=-1"),
        # the description is no limit; TRES are stored whole, cpu kept beside the GPUs
        (research, "GrpTRES=cpu=40"),
        (research, "GrpTRES=cpu=40,gres/gpu=12"),
        (research, "GrpTRES=-1"),  # prod had no GrpTRES: slurmdbd changed research's alone
        ({"qos": "high"}, "GrpJobs=50"),
        ({"qos": "low"}, "GrpJobs=50"),
        ({"qos": "high"}, "GrpJobs=-1"),
        ({"qos": "low"}, "GrpJobs=-1"),
        (bob, "QOS-=high"),
        (bob, "QOS+=high"),
        (bob, "QOS=normal,high"),
    ]


def test_transactions_with_no_limit_change_read_as_none():
    assert (
        quota_changes(
            "1796191551|Modify Accounts|root|(name='prod')|description='prod'\n"
            "1796188887|Add Users|root|alice|admin_level=1\n",
            "",
            "",
            "",
        )
        == []
    )


def test_an_account_quota_lowered_with_sacctmgr_reads_back_with_root_and_its_time(
    slurm: SlurmHarness,
):
    since = datetime.now(UTC).replace(microsecond=0)
    time.sleep(1)  # slurmdbd stamps to the second: the change is after `since`
    try:
        slurm.cli("sacctmgr", "-i", "modify", "account", "research", "set", "GrpTRES=gres/gpu=4")
        changed = datetime.now(UTC)
    finally:
        slurm.cli("sacctmgr", "-i", "modify", "account", "research", "set", "GrpTRES=gres/gpu=-1")
    until = datetime.now(UTC) + timedelta(seconds=2)

    changes = slurm.backend.quota_changes(since, until)

    lowered, restored = changes
    assert (lowered.actor, dict(lowered.subject), lowered.change) == (
        "root",
        {"tenant": "research"},
        "GrpTRES=gres/gpu=4",
    )
    assert since <= lowered.at <= changed
    assert restored.change == "GrpTRES=-1"
    # a period that ends before the change does not see it
    assert slurm.backend.quota_changes(since, lowered.at) == []
