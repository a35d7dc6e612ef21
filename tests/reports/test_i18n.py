"""Both languages say everything, and write numbers, durations and times their own way."""

from __future__ import annotations

import re
import string
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import observer.reports
from observer.reports.build.notes import Note
from observer.reports.render.catalog import CATALOG
from observer.reports.render.i18n import Words

SHANGHAI = ZoneInfo("Asia/Shanghai")


def test_both_languages_have_every_message_with_the_same_parameters():
    assert CATALOG["en"].keys() == CATALOG["zh-CN"].keys()
    for key, english in CATALOG["en"].items():
        names = {f for _, f, _, _ in string.Formatter().parse(english) if f}
        chinese = {f for _, f, _, _ in string.Formatter().parse(CATALOG["zh-CN"][key]) if f}
        assert names == chinese, key


def test_every_message_key_the_builders_use_is_in_the_catalog():
    source = "\n".join(
        p.read_text(encoding="utf-8") for p in Path(observer.reports.__file__).parent.rglob("*.py")
    )
    literal = set(re.findall(r'Note\(\s*"([a-z_.]+)"', source))
    literal |= set(re.findall(r'w\("([a-z_.]+)"', source))
    assert literal, "the pattern must find the keys"
    assert literal <= CATALOG["en"].keys()
    for prefix in ("class.", "scope.", "reverify.", "crit."):
        assert any(k.startswith(prefix) for k in CATALOG["en"])


@pytest.mark.parametrize(
    ("language", "seconds", "text"),
    [
        ("en", 4.0, "4 s"),
        ("en", 6.25, "6.2 s"),
        ("en", 65, "1 min 5 s"),
        ("en", 2 * 3600 + 20 * 60 + 7, "2 h 20 min"),
        ("en", 3 * 86400 + 3600, "3 d 1 h"),
        ("zh-CN", 65, "1 分钟 5 秒"),
        ("zh-CN", 2 * 3600 + 20 * 60, "2 小时 20 分钟"),
        ("en", None, "not observed"),
        ("zh-CN", None, "未观测"),
    ],
)
def test_durations(language, seconds, text):
    assert Words(language, SHANGHAI).duration(seconds) == text


def test_days_times_numbers_and_notes():
    en, zh = Words("en", SHANGHAI), Words("zh-CN", SHANGHAI)
    assert en.day(date(2026, 12, 4)) == "Fri 2026-12-04"
    assert zh.day(date(2026, 12, 4)) == "2026年12月4日（星期五）"
    instant = datetime(2026, 12, 4, 2, 5, tzinfo=UTC)
    assert en.instant(instant) == "2026-12-04 10:05"  # in the platform's timezone
    assert zh.instant(instant) == "2026年12月4日 10:05"
    assert en.integer(12345) == "12,345" and en.percent(12.345) == "12.3%"
    assert en.share(0.5) == "50.0%" and zh.share(None) == "未观测"
    note = Note("scope.blind", {"share": 0.1234, "limit_share": 0.05})
    assert en.note(note).startswith("The observer was blind 12.3% of the soak (limit 5.0%)")
    assert zh.note(Note("scope.not_observed", {"criterion": "tenant_isolation"})) == (
        "稳定性观察未能证明，因此不作承诺：租户隔离。"
    )
    unaudited = Note(
        "ev.unaudited",
        {"at": instant.isoformat(), "action": "drain", "subject": "node=n1", "reason": "maint"},
    )
    assert en.note(unaudited) == "Not recorded: drain on node=n1 at 2026-12-04 10:05 (maint)."
