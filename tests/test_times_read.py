"""Every time the store's commands print reads in the platform's timezone: `observer findings`
and `observer runs` (the zone named once at the top for a person, ISO 8601 with the offset as
JSON) and the reports `observer report` writes, the instants detectors keep in their evidence
(UTC, as text) included, whatever zone the store holds them in. Run through the command line
against a real store, in a zone without daylight time and in one on the day its clocks go
back."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from observer.domain import Finding, FindingKind, Severity
from observer.storage.store import Store
from tests.reports.builders import run
from tests.support.cli import run_cli
from tests.support.databases import migrated_sqlite

# 01:30 in Chicago twice on 2026-11-01: in daylight time (-05:00), then in standard time.
FIRST_CHICAGO_0130 = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
CLOCKS_BACK = (FIRST_CHICAGO_0130, FIRST_CHICAGO_0130 + timedelta(hours=1))
ZONES = [
    # zone, two stored instants of one day, the offsets they read with
    ("Asia/Shanghai", (datetime(2026, 11, 1, 1, 50, tzinfo=UTC),) * 2, ("+08:00", "+08:00")),
    ("America/Chicago", CLOCKS_BACK, ("-05:00", "-06:00")),
]


def stuck_job(opened: datetime, ending_since: datetime) -> Finding:
    """A job stuck ending since `ending_since`, as the detector stores it: that instant in its
    evidence as UTC text."""
    return Finding(
        detector="job_not_released",
        kind=FindingKind.CONDITION,
        subject={"job_id": "j1", "node": "n1"},
        severity=Severity.CRITICAL,
        summary="j1 of research still holds 1 GPUs on n1",
        opened_at=opened,
        closed_at=opened + timedelta(minutes=5),
        evidence={"ending_since": ending_since.isoformat(), "usage": [[opened.isoformat(), 3]]},
    )


def platform_in(tmp_path: Path, zone: str, *findings: Finding, language: str = "en") -> None:
    """A store holding `findings` and a config naming it, the platform in `zone`."""
    url = migrated_sqlite(tmp_path / "soak.db")
    with Store(url) as store:
        store.save_findings(list(findings))
        store.save_runs([run(submitted=f.opened_at) for f in findings])
    (tmp_path / "c.yaml").write_text(
        f"storage: {{url: '{url}'}}\ncontroller: {{timezone: {zone}}}\n"
        f"reports: {{output_dir: '{tmp_path / 'out'}', language: {language},"
        f" soak_started_at: '2026-10-30T00:00:00+00:00'}}\n"
    )


def offset(text: str) -> str:
    return text[-6:]


@pytest.mark.parametrize(("zone", "stored", "offsets"), ZONES)
def test_findings_as_json_give_the_evidences_instants_in_the_platforms_zone(
    tmp_path: Path, zone: str, stored: tuple[datetime, datetime], offsets: tuple[str, str]
) -> None:
    platform_in(tmp_path, zone, stuck_job(stored[1], stored[0]))

    result = run_cli("findings", "--json", "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 0, result.stderr
    evidence = json.loads(result.stdout)["evidence"]
    said = [evidence["ending_since"], evidence["usage"][0][0]]
    assert [datetime.fromisoformat(s) for s in said] == list(stored)
    assert [offset(s) for s in said] == list(offsets)


@pytest.mark.parametrize(
    ("language", "named"),
    [("en", "Platform timezone: Central Time (UTC-5/UTC-6)"), ("zh-CN", "平台时区：")],
)
def test_findings_name_the_zone_once_at_the_top_and_each_time_with_its_offset(
    tmp_path: Path, language: str, named: str
) -> None:
    stuck = [stuck_job(at, at) for at in CLOCKS_BACK]
    platform_in(tmp_path, "America/Chicago", *stuck, language=language)

    result = run_cli("findings", "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 0, result.stderr
    first, *lines = result.stdout.splitlines()
    assert first.startswith(named) and result.stdout.count(named) == 1
    assert [line.split()[:3] for line in lines] == [
        ["2026-11-01", "01:30:00", "-05:00"],
        ["2026-11-01", "01:30:00", "-06:00"],
    ]


def test_the_runs_of_the_day_the_clocks_go_back_say_which_hour_each_is(tmp_path: Path) -> None:
    platform_in(tmp_path, "America/Chicago", *(stuck_job(at, at) for at in CLOCKS_BACK))

    text = run_cli("runs", "--date", "2026-11-01", "--config", "c.yaml", cwd=tmp_path).stdout
    as_json = run_cli("runs", "--date", "2026-11-01", "--json", "--config", "c.yaml", cwd=tmp_path)

    assert text.splitlines()[0] == "Platform timezone: Central Time (UTC-5/UTC-6)"
    assert "2026-11-01 01:30 CDT" in text and "2026-11-01 01:30 CST" in text
    submitted = [json.loads(line)["submitted_at"] for line in as_json.stdout.splitlines()]
    assert [datetime.fromisoformat(s) for s in submitted] == list(CLOCKS_BACK)
    assert [offset(s) for s in submitted] == ["-05:00", "-06:00"]


@pytest.mark.parametrize(("zone", "stored", "offsets"), ZONES)
def test_the_daily_reports_evidence_gives_its_instants_in_the_platforms_zone(
    tmp_path: Path, zone: str, stored: tuple[datetime, datetime], offsets: tuple[str, str]
) -> None:
    platform_in(tmp_path, zone, stuck_job(stored[1], stored[0]))

    result = run_cli("report", "daily", "--date", "2026-11-01", "--config", "c.yaml", cwd=tmp_path)

    assert result.exit_code == 0, result.stderr
    paths = {Path(p).suffix: Path(p) for p in result.stdout.split()}
    [item] = json.loads(paths[".json"].read_text())["findings"]["items"]
    said = item["evidence"]["ending_since"]
    assert datetime.fromisoformat(said) == stored[0] and offset(said) == offsets[0]
    for page in (paths[".md"].read_text(), paths[".html"].read_text()):
        shown = re.findall(r"2026-\d\d-\d\dT[\d:]+[+-]\d\d:\d\d", page)
        assert shown and {offset(s) for s in shown} <= set(offsets), shown
        assert {datetime.fromisoformat(s) for s in shown} == {*stored}
    assert ZoneInfo(zone).key == json.loads(paths[".json"].read_text())["timezone"]
