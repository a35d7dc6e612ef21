"""`observer agent replay` on the real H200 trace: the node-local leak evidence it must find."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from observer.agent.main import replay_trace
from observer.settings.detectors import NodeLeakSettings
from tests.support.cli import run_cli

TRACE_START = 1796002574.687  # see tests/fixtures/nvml/h200-trace/phases.json
PID_458_JOB_END = 1796002614.3740516
PID_458_FIRST_LISTED = 1796002618.0505643
PID_458_LAST_LISTED_BEFORE = 1796002626.5  # memory back to baseline at ~+51.9 s
PID_418_IDLE_FROM = 1796002597.85  # utilisation drops to 0 at ~+23.16 s
PID_418_EXIT = 1796002608.2746465


def _t(finding_time: datetime | None) -> float:
    assert finding_time is not None
    return finding_time.timestamp()


def test_small_grace_finds_exactly_the_orphaned_memory_and_the_idle_stretch(h200_trace: Path):
    findings = replay_trace(h200_trace, NodeLeakSettings(grace_seconds=2, idle_seconds=8))

    assert [(f.detector, f.subject["pid"]) for f in findings] == [
        ("allocated_idle", "418"),
        ("unreleased_memory", "458"),
    ]
    idle, unreleased = findings

    # pid 458 is opened on first sight: its job had ended 3.7 s earlier, beyond the 2 s grace.
    assert _t(unreleased.opened_at) == pytest.approx(PID_458_FIRST_LISTED, abs=1e-5)
    assert PID_458_LAST_LISTED_BEFORE < _t(unreleased.closed_at) < PID_458_LAST_LISTED_BEFORE + 0.5
    assert unreleased.evidence["owner"] == "job/orphaning-launcher"
    assert unreleased.evidence["owner_ended_at"].startswith(
        datetime.fromtimestamp(PID_458_JOB_END, UTC).isoformat()[:22]
    )
    assert unreleased.evidence["used_memory_bytes"] > 20 * 2**30
    assert unreleased.subject["gpu_uuid"] == "GPU-c114cebc-2c7e-dd2b-ea65-fc1a95e8cebc"
    assert unreleased.severity.value == "critical"

    # pid 418 held ~21 GiB at 0 % from ~+23.2 s until it exited at ~+33.6 s.
    assert PID_418_IDLE_FROM + 8 <= _t(idle.opened_at) < PID_418_IDLE_FROM + 8.5
    assert PID_418_EXIT <= _t(idle.closed_at) < PID_418_EXIT + 0.5
    assert idle.evidence["owner"] == "job/busy-then-hold"
    assert idle.evidence["utilization_gpu_percent"] == 0


def test_processes_freed_within_a_tick_raise_nothing_even_with_no_grace(h200_trace: Path):
    # pid 418 exits normally and pid 483 is SIGKILLed; the driver frees both at once.
    findings = replay_trace(h200_trace, NodeLeakSettings(grace_seconds=0.5, idle_seconds=8))
    assert {f.subject["pid"] for f in findings} == {"418", "458"}


def test_default_rules_are_patient_with_a_short_trace(h200_trace: Path):
    # 60 s of grace and 10 min of idleness: an 8 s orphan and a 10 s idle stretch pass.
    assert replay_trace(h200_trace, NodeLeakSettings()) == []


def test_cli_prints_one_json_object_per_finding(h200_trace: Path):
    done = run_cli(
        "agent", "replay", str(h200_trace), "--grace-seconds", "2", "--idle-seconds", "8"
    )
    assert done.exit_code == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["detector"] for line in lines] == ["allocated_idle", "unreleased_memory"]
    for line in lines:
        assert {"detector", "subject", "opened_at", "closed_at", "severity", "evidence"} <= set(
            line
        )
        assert line["subject"]["gpu_uuid"].startswith("GPU-")
        assert line["closed_at"] is not None
    assert lines[1]["subject"]["pid"] == "458"
