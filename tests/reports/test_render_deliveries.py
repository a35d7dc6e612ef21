"""The daily summary says how the earlier reports were delivered: each failed delivery with
the channel's answer, else that all went through, and that no channel is configured when
the directory is the only one; in Markdown, HTML and JSON, in English and Chinese."""

from __future__ import annotations

import json
from dataclasses import replace

from observer.records import StoredDelivery
from observer.reports.compute.daily import DailyInputs, DailyReport, build_daily
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.render.daily import render_daily
from tests.reports.builders import DAY, at, context

DELIVERED = [
    StoredDelivery(at(8), "daily-2026-11-30", "directory", "full", 1, "wrote it"),
    StoredDelivery(at(8), "daily-2026-11-30", "feishu", "summary", 1, "summary and link"),
]
FAILED = StoredDelivery(
    at(8, 1), "daily-2026-11-30", "dingtalk", "failed", 4, "errcode 310000: sign not match"
)


def _report(deliveries: list[StoredDelivery], ctx: ReportContext) -> DailyReport:
    data = PeriodData(DAY, deliveries=deliveries)
    return build_daily(
        DailyInputs(
            context=ctx,
            day=DAY.start.date(),
            data=data,
            previous=None,
            soak=data,
            intervention_match_seconds=0,
            layer_blind_max_share=0.1,
        )
    )


def test_a_failed_delivery_is_listed_in_every_format_and_language():
    ctx = replace(context(), delivery_channels=("feishu", "dingtalk"))
    report = _report([*DELIVERED, FAILED], ctx)
    english, chinese = render_daily(report, "en"), render_daily(report, "zh-CN")

    assert "## Report deliveries" in english.markdown
    assert "1 of 3 deliveries of earlier reports in this period failed" in english.markdown
    assert "| dingtalk | 4 | errcode 310000: sign not match |" in english.markdown
    assert '<h2 id="deliveries">Report deliveries</h2>' in english.html
    assert "<td>dingtalk</td>" in english.html
    assert "## 报告投递" in chinese.markdown
    assert "有 1 次失败" in chinese.markdown
    assert '<h2 id="deliveries">报告投递</h2>' in chinese.html
    for rendered in (english, chinese):
        data = json.loads(rendered.json)
        assert data["report_deliveries_failed"] == 1
        [failure] = data["report_deliveries"]["failures"]
        assert (failure["report"], failure["channel"]) == ("daily-2026-11-30", "dingtalk")
        assert data["soak_to_date"]["report_deliveries"] == {
            "channels": ["feishu", "dingtalk"],
            "failed": 1,
            "total": 3,
        }


def test_all_delivered_and_no_channel_configured_are_said():
    delivered = render_daily(
        _report(DELIVERED, replace(context(), delivery_channels=("feishu",))), "en"
    )
    assert "All delivered: 2 deliveries of earlier reports in this period." in delivered.markdown
    assert "No delivery channel is configured" not in delivered.markdown

    home_only = render_daily(_report(DELIVERED[:1], context()), "zh-CN")
    assert "全部投递成功" in home_only.markdown
    assert "未配置投递渠道（reports.delivery）" in home_only.markdown
    assert json.loads(home_only.json)["report_deliveries"]["channels"] == []

    nothing = render_daily(_report([], context()), "en")
    assert "No report was delivered in this period." in nothing.markdown
