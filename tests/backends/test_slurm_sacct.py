"""The Slurm backend's listing of every finished job, read from `sacct` output in the shape
Slurm 22.05 prints it (`--parsable2 --noheader`, SLURM_TIME_FORMAT=%s; lines as the local
slurmdbd recorded them, times moved) through a stand-in sacct: no Slurm needed.

`sacct --json` is not read: 22.05 reports a job that exited 3 as {"status": "SUCCESS",
"return_code": 0} there (see observer/backends/slurm/parse.py)."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.backends.slurm.backend import SlurmBackend
from observer.backends.slurm.parse import parse_sacct
from observer.clock import ManualClock
from observer.domain import JobPhase
from observer.errors import BackendError
from observer.settings.controller import SlurmSettings

SINCE = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
UNTIL = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)


def _at(minute: int, second: int = 0) -> int:
    return int(datetime(2026, 11, 30, 2, minute, second, tzinfo=UTC).timestamp())


# JobIDRaw|Account|Partition|State|ExitCode|Submit|Start|End|Reason|NodeList|AllocTRES|
# ReqTRES|QOS|User|Comment
RECORDED = "\n".join(
    [
        f"101|research|gpu|COMPLETED|0:0|{_at(0)}|{_at(0, 1)}|{_at(1)}|None|n1|"
        "billing=1,cpu=1,gres/gpu=1,mem=1G,node=1|billing=1,cpu=1,gres/gpu=1,node=1|"
        "normal|alice|observer-run:run-101",
        f"102|prod|gpu|FAILED|3:0|{_at(0)}|{_at(0, 2)}|{_at(2)}|None|n2|"
        "billing=2,cpu=2,gres/gpu=2,node=1|billing=2,cpu=2,gres/gpu=2,node=1|normal|alice|",
        f"103|prod|gpu|TIMEOUT|0:15|{_at(0)}|{_at(0, 3)}|{_at(3)}|TimeLimit|n[1-2]|"
        "billing=8,cpu=8,gres/gpu=8,node=2|billing=8,cpu=8,gres/gpu=8,node=2|normal|alice|",
        f"104|batch|gpu|OUT_OF_MEMORY|0:125|{_at(0)}|{_at(0, 4)}|{_at(4)}|None|n3|"
        "cpu=1,gres/gpu=1,node=1|cpu=1,gres/gpu=1,node=1|normal|alice|",
        # held, then cancelled before it ever started: no start, no nodes, no allocation
        f"105|batch|gpu|CANCELLED by 0|0:0|{_at(0)}|None|{_at(5)}|JobHeldUser|None assigned|"
        "|billing=4,cpu=4,gres/gpu=4,mem=100M,node=1|normal|alice|",
        f"106|research|gpu|NODE_FAIL|0:0|{_at(0)}|{_at(0, 6)}|{_at(6)}|None|n2|"
        "cpu=1,gres/gpu=1,node=1|cpu=1,gres/gpu=1,node=1|normal|alice|",
        # ended at the very end of the period: sacct's -E includes it, the half-open period not
        f"107|research|gpu|COMPLETED|0:0|{_at(0)}|{_at(0, 7)}|{_at(15)}|None|n1|"
        "cpu=1,gres/gpu=1,node=1|cpu=1,gres/gpu=1,node=1|normal|alice|",
    ]
)


def _stand_in_sacct(tmp_path: Path, output: str, exit_status: int = 0) -> SlurmBackend:
    """A `sacct` that prints `output` and keeps its arguments and TZ in args.txt."""
    commands = tmp_path / "bin"
    commands.mkdir()
    (tmp_path / "out.txt").write_text(output)
    sacct = commands / "sacct"
    sacct.write_text(
        "#!/bin/sh\n"
        f'echo "TZ=$TZ $*" > {tmp_path}/args.txt\n'
        f"cat {tmp_path}/out.txt\n"
        f"[ {exit_status} -eq 0 ] || echo 'sacct: error: slurmdbd: Connection refused' >&2\n"
        f"exit {exit_status}\n"
    )
    sacct.chmod(sacct.stat().st_mode | stat.S_IXUSR)
    settings = SlurmSettings(commands_dir=commands, output_dir=tmp_path / "jobs")
    return SlurmBackend(settings, ManualClock(UNTIL))


def test_every_final_state_reads_as_its_phase_with_slurms_reason_and_exit_code():
    jobs = parse_sacct(RECORDED)

    summary = {
        job_id: (s.tenant, s.phase, s.reason, s.exit_code, s.gpus) for job_id, s in jobs.items()
    }
    assert summary == {
        "101": ("research", JobPhase.SUCCEEDED, None, 0, 1),
        "102": ("prod", JobPhase.FAILED, "NonZeroExitCode", 3, 2),
        "103": ("prod", JobPhase.FAILED, "TimeLimit", 143, 8),
        "104": ("batch", JobPhase.FAILED, "OutOfMemory", 253, 1),
        "105": ("batch", JobPhase.CANCELLED, "JobHeldUser", None, 4),
        "106": ("research", JobPhase.FAILED, "NodeDown", 0, 1),
        "107": ("research", JobPhase.SUCCEEDED, None, 0, 1),
    }
    assert jobs["101"].run_id == "run-101"
    assert jobs["102"].run_id is None
    assert jobs["103"].nodes == ("n1", "n2")
    assert jobs["105"].started_at is None  # cancelled while pending: it never started
    assert jobs["102"].submitted_at == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    assert jobs["102"].finished_at == datetime(2026, 11, 30, 2, 2, tzinfo=UTC)


def test_a_state_this_reader_does_not_know_is_a_backend_error():
    line = RECORDED.splitlines()[0].replace("COMPLETED", "SOMETHING_NEW")

    with pytest.raises(BackendError, match="SOMETHING_NEW"):
        parse_sacct(line)


def test_finished_jobs_asks_sacct_for_every_users_ended_jobs_in_utc(tmp_path: Path):
    backend = _stand_in_sacct(tmp_path, RECORDED)

    listing = backend.finished_jobs(SINCE, UNTIL)

    assert [s.job_id for s in listing.jobs] == ["101", "102", "103", "104", "105", "106"]
    assert listing.complete
    args = (tmp_path / "args.txt").read_text().split()
    assert args[0] == "TZ=UTC"
    assert {
        "--allusers",
        "--allocations",
        "--starttime=2026-11-30T02:00:00",
        "--endtime=2026-11-30T02:15:00",
        "--state=BF,CA,CD,DL,F,NF,OOM,PR,RV,TO",
    } <= set(args)


def test_finished_jobs_when_slurmdbd_cannot_be_read_is_a_backend_error(tmp_path: Path):
    backend = _stand_in_sacct(tmp_path, "", exit_status=1)

    with pytest.raises(BackendError, match="Connection refused"):
        backend.finished_jobs(SINCE, UNTIL)
