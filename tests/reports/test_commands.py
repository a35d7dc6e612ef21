"""`observer report daily|verdict` and `observer intervention add`, the reports' store tables
on both databases, and which days the controller's daily build still owes."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from threading import Event
from zoneinfo import ZoneInfo

import pytest
import structlog

from observer.cli import main
from observer.domain import Outcome
from observer.errors import ReportError
from observer.records import InterventionSource, StoredAlert, StoredIntervention
from observer.reports.apart import build_apart
from observer.reports.publish import due_days, write_daily
from observer.settings import Settings
from observer.storage.store import Store
from tests.reports.builders import run
from tests.support.databases import migrated_sqlite

TZ = ZoneInfo("Asia/Shanghai")


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """The CLI points structlog at the test's captured stderr; later tests need it back."""
    yield
    structlog.reset_defaults()


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "observer.yaml"
    config.write_text(
        "controller:\n"
        "  timezone: Asia/Shanghai\n"
        "storage:\n"
        f"  sqlite_path: {tmp_path / 'observer.db'}\n"
        "reports:\n"
        f"  output_dir: {tmp_path / 'reports'}\n"
        "  language: zh-CN\n",
        encoding="utf-8",
    )
    migrated_sqlite(tmp_path / "observer.db")
    return config


def _local(day: date, hour: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=TZ)


def test_intervention_add_then_report_daily_and_verdict(tmp_path: Path, capsys):
    config = _config(tmp_path)
    yesterday = datetime.now(TZ).date() - timedelta(days=1)
    with Store(f"sqlite:///{tmp_path / 'observer.db'}") as store:
        store.save_runs(
            [
                run(submitted=_local(yesterday, 10), wait_seconds=12),
                run(submitted=_local(yesterday, 11), outcome=Outcome.FAILED, reason="OOMKilled"),
            ]
        )
    at = _local(yesterday, 11).isoformat()
    assert (
        main(
            [
                "intervention",
                "add",
                "--by",
                "alice",
                "--reason",
                "swap PSU",
                "--subject",
                "node=gpu-07",
                "--at",
                at,
                "--config",
                str(config),
            ]
        )
        == 0
    )
    assert "recorded:" in capsys.readouterr().out

    assert main(["report", "daily", "--config", str(config)]) == 0
    paths = capsys.readouterr().out.split()
    assert [Path(p).name for p in paths] == [
        f"daily-{yesterday.isoformat()}.{suffix}" for suffix in ("md", "html", "json")
    ]
    report = json.loads(Path(paths[2]).read_text(encoding="utf-8"))
    assert (report["tasks_total"], report["tasks_failed"]) == (2, 1)
    assert report["manual_interventions_total"] == 1
    [item] = report["manual_interventions"]["items"]
    assert (item["by"], item["subject"]) == ("alice", {"node": "gpu-07"})
    assert "每日运行摘要" in Path(paths[0]).read_text(encoding="utf-8")

    assert main(["report", "daily", "--date", yesterday.isoformat(), "--config", str(config)]) == 0
    assert capsys.readouterr().out.split() == paths

    assert main(["report", "verdict", "--config", str(config)]) == 0
    verdict = capsys.readouterr().out.split()
    assert Path(verdict[2]).name == f"verdict-{yesterday.isoformat()}.json"
    assert json.loads(Path(verdict[2]).read_text(encoding="utf-8"))["tasks_total"] == 2


def test_report_deliver_hands_the_report_to_the_channels_and_records_each(tmp_path: Path, capsys):
    config = _config(tmp_path)
    # Nothing listens on port 1: the WeCom robot cannot be reached, and there is no retry.
    config.write_text(
        config.read_text(encoding="utf-8") + "  delivery:\n"
        "    backoff_seconds: []\n"
        "    wecom_url: http://127.0.0.1:1/cgi-bin/webhook/send?key=0123456789abcdef\n",
        encoding="utf-8",
    )
    yesterday = datetime.now(TZ).date() - timedelta(days=1)
    with Store(f"sqlite:///{tmp_path / 'observer.db'}") as store:
        store.save_runs([run(submitted=_local(yesterday, 10))])

    assert main(["report", "daily", "--deliver", "--config", str(config)]) == 1
    out, err = capsys.readouterr()
    assert all(Path(p).exists() for p in out.split())  # the report is never lost
    # Besides the log lines, one line per failed channel.
    [reason] = [line for line in err.splitlines() if line.startswith("observer: ")]
    assert reason.startswith("observer: delivery to wecom failed: ")
    assert "0123456789abcdef" not in err

    name = f"daily-{yesterday.isoformat()}"
    assert main(["report", "deliveries", "--json", "--config", str(config)]) == 0
    recorded = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["report"], d["channel"], d["outcome"]) for d in recorded] == [
        (name, "directory", "full"),
        (name, "wecom", "failed"),
    ]
    assert "0123456789abcdef" not in recorded[1]["detail"]

    assert main(["report", "verdict", "--deliver", "--config", str(config)]) == 1
    capsys.readouterr()
    assert main(["report", "deliveries", "--report", name, "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(name in line for line in lines)
    assert "failed" in lines[1]


def test_report_deliver_with_only_the_directory_succeeds(tmp_path: Path, capsys):
    config = _config(tmp_path)
    yesterday = datetime.now(TZ).date() - timedelta(days=1)
    with Store(f"sqlite:///{tmp_path / 'observer.db'}") as store:
        store.save_runs([run(submitted=_local(yesterday, 10))])
    assert main(["report", "daily", "--deliver", "--config", str(config)]) == 0
    assert "observer: " not in capsys.readouterr().err


def test_a_day_not_over_or_before_the_soak_is_refused(tmp_path: Path, capsys):
    config = _config(tmp_path)
    assert main(["report", "daily", "--config", str(config)]) == 1
    assert "nothing stored yet" in capsys.readouterr().err
    with Store(f"sqlite:///{tmp_path / 'observer.db'}") as store:
        store.save_runs([run(submitted=datetime.now(UTC) - timedelta(days=3))])
    today = datetime.now(TZ).date().isoformat()
    assert main(["report", "daily", "--date", today, "--config", str(config)]) == 1
    assert "is not over yet in Asia/Shanghai" in capsys.readouterr().err
    assert main(["report", "daily", "--date", "2020-01-01", "--config", str(config)]) == 1
    assert "before the soak started" in capsys.readouterr().err


def test_the_day_so_far_is_built_marked_partial_and_filed_apart(tmp_path: Path, capsys):
    config = _config(tmp_path)
    now = datetime.now(TZ)
    start_of_today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    # A soak that began before today, with one run today so far (if today has begun long
    # enough for one; the report is built either way).
    submitted = max(start_of_today, now - timedelta(minutes=30))
    with Store(f"sqlite:///{tmp_path / 'observer.db'}") as store:
        store.save_runs(
            [
                run(submitted=now - timedelta(days=2)),
                run(submitted=submitted, wait_seconds=None, outcome=None),
            ]
        )

    assert main(["report", "daily", "--today", "--config", str(config)]) == 0

    paths = [Path(p) for p in capsys.readouterr().out.split()]
    today = now.date().isoformat()
    assert [p.name for p in paths] == [f"daily-{today}-so-far.{s}" for s in ("md", "html", "json")]
    report = json.loads(paths[2].read_text(encoding="utf-8"))
    assert (report["partial"], report["date"], report["tasks_total"]) == (True, today, 1)
    assert "（截至目前）" in report["title"]
    assert "部分数据" in paths[0].read_text(encoding="utf-8")
    # The day's own summary is still owed: its files are not the partial ones.
    assert not (tmp_path / "reports" / f"daily-{today}.json").exists()
    assert (tmp_path / "reports" / f"daily-{today}-so-far.csv").exists()


def test_a_soak_younger_than_a_day_has_a_provisional_verdict(tmp_path: Path, capsys):
    config = _config(tmp_path)
    started = datetime.now(UTC) - timedelta(minutes=44)
    with Store(f"sqlite:///{tmp_path / 'observer.db'}") as store:
        store.save_runs([run(submitted=started)])
    # On a soak begun today there is no whole day to judge (unless it began at midnight).
    if started.astimezone(TZ).date() == datetime.now(TZ).date():
        assert main(["report", "verdict", "--config", str(config)]) == 1
        assert "no whole day yet" in capsys.readouterr().err

    assert main(["report", "verdict", "--provisional", "--config", str(config)]) == 0

    paths = [Path(p) for p in capsys.readouterr().out.split()]
    assert all(p.stem.endswith("-provisional") for p in paths)
    verdict = json.loads(paths[2].read_text(encoding="utf-8"))
    assert (verdict["provisional"], verdict["title"]) == (True, "上线评估结论（临时）")
    assert re.search(r"（4[45]分钟）", paths[0].read_text(encoding="utf-8"))


def test_bad_arguments_are_refused(tmp_path: Path, capsys):
    config = _config(tmp_path)
    with pytest.raises(SystemExit):
        main(["report", "daily", "--date", "yesterday", "--config", str(config)])
    with pytest.raises(SystemExit):
        main(["intervention", "add", "--by", "a", "--reason", "r", "--subject", "gpu-07"])
    assert "KEY=VALUE" in capsys.readouterr().err


def test_the_daily_build_catches_up_every_missed_day_once(tmp_path: Path, store: Store):
    settings = Settings.model_validate(
        {"controller": {"timezone": "Asia/Shanghai"}, "reports": {"output_dir": str(tmp_path)}}
    )
    first = date(2026, 12, 1)
    store.save_runs([run(submitted=_local(first + timedelta(days=i), 10)) for i in range(3)])
    fourth = first + timedelta(days=3)
    assert due_days(store, settings, _local(fourth, 7)) == [first, first + timedelta(days=1)]
    assert due_days(store, settings, _local(fourth, 8)) == [
        first + timedelta(days=i) for i in range(3)
    ]
    built = build_apart(
        store,
        settings,
        due_days(store, settings, _local(fourth, 8)),
        _local(fourth, 8),
        Event(),
        60,
    )
    assert [(w.day, len(w.paths)) for w in built] == [
        (first + timedelta(days=i), 3) for i in range(3)
    ]
    assert due_days(store, settings, _local(fourth, 9)) == []
    with pytest.raises(ReportError):
        write_daily(store, settings, fourth, _local(fourth, 9))


def test_alerts_and_interventions_round_trip(store: Store):
    t = datetime(2026, 12, 1, 2, tzinfo=UTC)
    alert = StoredAlert("fp", "GPUDown", "critical", t, None, t, {"alertname": "GPUDown"}, "s")
    store.save_alerts([alert, alert])
    store.save_alerts(
        [
            StoredAlert(
                "fp",
                "GPUDown",
                "critical",
                t,
                t + timedelta(hours=1),
                t + timedelta(minutes=30),
                {"alertname": "GPUDown"},
                "s",
            )
        ]
    )
    [stored] = store.alerts(t, t + timedelta(seconds=1))
    assert stored.ends_at == t + timedelta(hours=1)
    assert stored.last_seen_at == t + timedelta(minutes=30)
    assert store.alerts(t + timedelta(seconds=1), t + timedelta(days=1)) == []

    recorded = StoredIntervention(t, "bob", "reboot", {"node": "n1"}, detail={"ticket": "OPS-1"})
    detected = StoredIntervention(
        t + timedelta(minutes=5),
        "",
        "x",
        {"node": "n1"},
        InterventionSource.DETECTED,
        {"action": "drain"},
    )
    store.add_intervention(detected)
    store.add_intervention(recorded)
    assert store.interventions(t, t + timedelta(hours=1)) == [recorded, detected]
