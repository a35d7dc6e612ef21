"""Both languages write numbers, durations and times their own way, as CLDR has them (Babel);
tests/reports/test_catalogues.py checks that they say everything."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import GpuUsage, Period, PeriodData, UtilizationHistogram
from observer.reports.compute.findings import describe
from observer.reports.compute.notes import Note
from observer.reports.render import i18n
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Words
from tests.reports.builders import DAY, context, run

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.mark.parametrize(
    ("language", "seconds", "text"),
    [
        ("en", 4.0, "4 s"),
        ("en", 6.25, "6.2 s"),
        ("en", 65, "1 min 5 s"),
        ("en", 2 * 3600 + 20 * 60 + 7, "2 h 20 min"),
        ("en", 3 * 86400 + 3600, "3 d 1 h"),
        ("en", 86400 + 5 * 60, "1 d 5 min"),
        ("en", 45 * 86400, "45 d"),
        ("zh-CN", 65, "1分钟5秒"),
        ("zh-CN", 18 * 60, "18分钟"),
        ("zh-CN", 6 * 3600 + 23 * 60 + 40, "6小时23分钟"),  # truncated, like a clock
        ("zh-CN", 2 * 86400 + 3600, "2天1小时"),
        ("en", None, "not observed"),
        ("zh-CN", None, "未观测"),
    ],
)
def test_durations(language, seconds, text):
    assert Words(language, SHANGHAI).duration(seconds) == text


def test_days_times_numbers_and_notes():
    en, zh = Words("en", SHANGHAI), Words("zh-CN", SHANGHAI)
    assert en.day(date(2026, 12, 4)) == "Fri 2026-12-04"
    assert zh.day(date(2026, 12, 4)) == "2026年12月4日星期五"
    instant = datetime(2026, 12, 4, 2, 5, tzinfo=UTC)
    assert en.instant(instant) == "2026-12-04 10:05"  # in the platform's timezone
    assert zh.instant(instant) == "2026年12月4日 10:05"
    assert en.integer(12345) == "12,345" and en.percent(12.345) == "12.3%"
    assert zh.integer(1234567) == "1,234,567" and zh.decimal(0.25, 2) == "0.25"
    assert en.decimal(1234.56) == "1,234.6" and zh.percent(5) == "5.0%"
    assert en.share(0.5) == "50.0%" and zh.share(None) == "未观测"
    note = Note("scope.blind", {"share": 0.1234, "limit_share": 0.05})
    assert en.note(note).startswith("The observer was blind 12.3% of the soak (limit 5.0%)")
    assert zh.note(Note("scope.not_observed", {"criterion": "tenant_isolation"})) == (
        "稳定性观察未能证明，因此不作承诺：租户隔离。"
    )
    unaudited = Note(
        "ev.unaudited.said",
        {
            "at": instant.isoformat(),
            "action": "drain",
            "subject": "node=n1",
            "reason_words": "maint",
        },
    )
    assert en.note(unaudited) == (
        "Not recorded: node drained on node=n1 at 2026-12-04 10:05 (“maint”)."
    )


GIB, MIB = 2**30, 2**20


@pytest.mark.parametrize(
    ("language", "size_bytes", "text"),
    [
        ("en", 3 * GIB // 2, "1.5 GiB"),
        ("zh-CN", 80 * GIB + GIB // 4, "80.2 GiB"),  # one decimal, rounded half to even
        ("en", 12 * 1024 * GIB, "12,288.0 GiB"),
        ("zh-CN", 12 * 1024 * GIB, "12,288.0 GiB"),
        ("en", 600 * MIB, "600 MiB"),
        ("zh-CN", 1023 * MIB, "1,023 MiB"),
        ("en", None, "not observed"),
        ("zh-CN", None, "未观测"),
    ],
)
def test_memory_sizes_in_the_binary_units_nvml_counts_in(language, size_bytes, text):
    assert Words(language, SHANGHAI).memory(size_bytes) == text


def test_a_findings_memory_and_a_holders_figures_are_written_by_the_reports_language():
    held = 20 * GIB + GIB // 2
    sentence = describe(
        "unreleased_memory",
        {"node": "n1"},
        {"pid": 418, "used_memory_bytes": held, "gpu_index": 3, "owner": "job/7"},
    )
    en, zh = Words("en", SHANGHAI), Words("zh-CN", SHANGHAI)
    assert (
        en.finding(sentence, "")
        == "pid 418 still holds 20.5 GiB on GPU 3 after its owner job/7 ended"
    )
    assert "20.5 GiB" in zh.finding(sentence, "")
    # On a MIG instance, the instance: the UUID the platform's tools show for it.
    mig = "MIG-2f4e7a10-5c1b-5d2e-9f3a-0b1c2d3e4f50"
    on_mig = describe(
        "unreleased_memory",
        {"node": "n1", "mig_uuid": mig},
        {"pid": 418, "used_memory_bytes": held, "gpu_index": 3, "mig_uuid": mig, "owner": "job/7"},
    )
    assert (
        en.finding(on_mig, "")
        == f"pid 418 still holds 20.5 GiB on GPU 3 {mig} after its owner job/7 ended"
    )
    assert f"GPU 3 {mig}" in zh.finding(on_mig, "")
    # A holder's users, each with the GPUs it held on average: names with their figures.
    by_user = {"alice": 2.25, "bob": 1234.5}
    holder = Note("ev.unfair_holder_user", {"holder": "research", "names": by_user})
    assert en.note(holder) == "research's GPUs by user: alice 2.2, bob 1,234.5."
    assert zh.note(holder) == "research 按用户占用的 GPU：alice 2.2、bob 1,234.5。"


def test_the_utilisation_deciles_are_counts_written_as_the_language_writes_counts():
    busy = 1500  # samples at 55 %: the sixth tenth
    usage = GpuUsage(overall=UtilizationHistogram.of([55] * busy), nodes=frozenset({"n1"}))
    report = build_daily(
        DailyInputs(
            context=context(),
            day=DAY.start.date(),
            data=PeriodData(DAY, gpu=usage),
            previous=PeriodData(Period(DAY.start - timedelta(days=1), DAY.start)),
            soak=PeriodData(DAY, gpu=usage),
            intervention_match_seconds=0,
            layer_blind_max_share=0.1,
        )
    )
    deciles = " ".join(["0"] * 5 + ["1,500"] + ["0"] * 4)
    assert f"| {deciles} |" in render_daily(report, "en").markdown
    assert f"| {deciles} |" in render_daily(report, "zh-CN").markdown


def test_a_rendered_report_keeps_none_of_its_texts_for_the_next():
    """A soak renders a summary a day for weeks, each with its own instants and figures: the
    texts made for one are let go once it is rendered, so the daemon holds none of them."""
    texts = (i18n._number, i18n._percent, i18n._duration, i18n._instant)
    for day in range(28):
        start = DAY.start + timedelta(days=day)
        period = Period(start, start + timedelta(days=1))
        runs = [
            run(submitted=start + timedelta(hours=h, minutes=day), wait_seconds=h + day)
            for h in range(24)
        ]
        report = build_daily(
            DailyInputs(
                context=context(),
                day=start.date(),
                data=PeriodData(period, runs=runs),
                previous=PeriodData(Period(start - timedelta(days=1), start)),
                soak=PeriodData(Period(DAY.start, period.end), runs=runs),
                intervention_match_seconds=0,
                layer_blind_max_share=0.1,
            )
        )
        for language in ("en", "zh-CN"):
            rendered = render_daily(report, language)
            assert start.date().isoformat() in rendered.json
            assert [made.cache_info().currsize for made in texts] == [0, 0, 0, 0]
