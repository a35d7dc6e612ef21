"""The demo's console says its faults' times as the scenario file declares them, in the
platform's timezone, whatever the zone of the host it runs on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.timeout(300)

# Shanghai's platform, on hosts east and west of it: the scenario's local times are neither.
SCENARIO: dict[str, Any] = {
    "name": "the host's zone",
    "start": "2026-11-23",
    "settings": {"controller": {"timezone": "Asia/Shanghai"}},
    "platform": {"nodes": 1, "gpus_per_node": 1, "pools": ["h200-a"]},
    "load": {"busy_factor": 0, "quiet_factor": 0},
    "faults": [
        {"kind": "prometheus_stall", "at": "2026-11-23 01:50", "until": "2026-11-23 02:20"},
        {"kind": "log_loss", "at": "2026-11-23 23:00", "until": "2026-11-24 00:00"},
    ],
}
# "  found   prometheus_stall Mon 01:50-02:20", "  NOT INJECTED  log_loss (seconds 10.0) ..."
FAULT_LINE = re.compile(
    r"^  \S.*? (?P<kind>[a-z_]+)(?: \(.*\))? (?P<when>\w{3} \d\d:\d\d-\d\d:\d\d)$"
)


@pytest.mark.parametrize("host_zone", ["UTC", "America/Chicago"])
def test_the_consoles_fault_times_are_the_scenario_files(tmp_path: Path, host_zone: str):
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["demo", "--scenario", str(scenario), "--out", str(out), "--port", "0"]
    demo = subprocess.run(
        [sys.executable, "-m", "observer.cli", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "TZ": host_zone},
        timeout=280,
        check=False,
    )
    said = {
        m["kind"]: m["when"] for line in demo.stdout.splitlines() if (m := FAULT_LINE.match(line))
    }
    declared = {}
    for fault in SCENARIO["faults"]:
        at = datetime.fromisoformat(fault["at"])
        until = datetime.fromisoformat(fault["until"])
        declared[fault["kind"]] = f"{at:%a %H:%M}-{until:%H:%M}"
    assert said == declared, demo.stdout + demo.stderr
