"""A written report handed to the configured channels: the files stay the report's home,
each chat gets it, and every delivery is counted."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.clock import SystemClock
from observer.metrics import ReportMetrics
from observer.reports.deliver import channels, configured_channels, deliver_written
from observer.settings import Settings
from observer.storage.store import Store


class WeCom:
    """A WeCom group robot: takes markdown messages, answers errcode 0."""

    def __init__(self) -> None:
        self.received: list[dict[str, object]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.received.append(json.loads(body))
                reply = json.dumps({"errcode": 0, "errmsg": "ok"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/cgi-bin/webhook/send?key=0123456789abcdef"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def wecom() -> Iterator[WeCom]:
    robot = WeCom()
    yield robot
    robot.close()


def _written(directory: Path) -> list[Path]:
    directory.mkdir(parents=True)
    data = {
        "report": "daily",
        "title": "每日运行摘要 — 2026-12-01",
        "language": "zh-CN",
        "tasks_total": 74,
        "tasks_failed": 2,
        "alerts_total": 1,
    }
    texts = {
        "md": "# 每日运行摘要 — 2026-12-01\n\n任务 74\n",
        "html": "<html><body>74</body></html>",
        "json": json.dumps(data, ensure_ascii=False),
    }
    paths = []
    for suffix, text in texts.items():
        path = directory / f"daily-2026-12-01.{suffix}"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def test_a_written_summary_reaches_the_chat_and_stays_at_home(
    tmp_path: Path, wecom: WeCom, store: Store
):
    out = tmp_path / "reports"
    paths = _written(out)
    settings = Settings.model_validate(
        {
            "reports": {
                "output_dir": out,
                "language": "zh-CN",
                "delivery": {
                    "wecom_url": wecom.url,
                    "public_base_url": "https://soak.example/reports",
                },
            }
        }
    )
    metrics = ReportMetrics(CollectorRegistry())
    results = deliver_written(paths, settings, SystemClock(), threading.Event(), store, metrics)

    assert [(r.channel, r.ok) for r in results] == [("directory", True), ("wecom", True)]
    [message] = wecom.received
    assert message["msgtype"] == "markdown"
    content = message["markdown"]["content"]  # type: ignore[index]
    assert "每日运行摘要" in content
    assert all(p.read_text(encoding="utf-8") for p in paths)
    assert "0123456789abcdef" not in json.dumps([r.detail for r in results])
    assert metrics.report_deliveries_total.labels("wecom", "full")._value.get() == 1
    assert metrics.report_deliveries_total.labels("directory", "full")._value.get() == 1
    recorded = store.deliveries(report="daily-2026-12-01")
    assert [(d.channel, d.outcome, d.attempts) for d in recorded] == [
        ("directory", "full", 1),
        ("wecom", "full", 1),
    ]


def test_with_no_channel_set_the_files_are_the_only_delivery(tmp_path: Path, store: Store):
    out = tmp_path / "reports"
    paths = _written(out)
    settings = Settings.model_validate({"reports": {"output_dir": out}})
    results = deliver_written(paths, settings, SystemClock(), threading.Event(), store)
    assert [(r.channel, r.ok) for r in results] == [("directory", True)]
    assert json.loads(paths[2].read_text(encoding="utf-8"))["tasks_total"] == 74
    assert [d.channel for d in store.deliveries()] == ["directory"]


def test_a_failed_delivery_is_recorded_masked_and_the_report_stays_at_home(
    tmp_path: Path, store: Store
):
    out = tmp_path / "reports"
    paths = _written(out)
    # Nothing listens on port 1: the robot cannot be reached, and there is no retry.
    url = "http://127.0.0.1:1/cgi-bin/webhook/send?key=0123456789abcdef"
    settings = Settings.model_validate(
        {"reports": {"output_dir": out, "delivery": {"wecom_url": url, "backoff_seconds": []}}}
    )
    results = deliver_written(paths, settings, SystemClock(), threading.Event(), store)

    assert [(r.channel, r.ok) for r in results] == [("directory", True), ("wecom", False)]
    assert all(p.read_text(encoding="utf-8") for p in paths)
    [home, wecom] = store.deliveries(report="daily-2026-12-01")
    assert (home.outcome, wecom.outcome, wecom.attempts) == ("full", "failed", 1)
    assert wecom.detail
    assert "0123456789abcdef" not in wecom.detail


def test_the_configured_channels_named_are_those_delivered_to():
    cfg = Settings.model_validate(
        {
            "reports": {
                "delivery": {
                    "slack_url": "https://hooks.slack.example/services/T0/B0/abcdefghijklmnop",
                    "feishu_url": "https://open.feishu.example/open-apis/bot/v2/hook/0123456789ab",
                    "dingtalk_url": "https://oapi.dingtalk.example/robot/send?access_token=0123",
                    "wecom_url": "https://qyapi.weixin.example/cgi-bin/webhook/send?key=0123",
                    "email": {
                        "host": "smtp.example",
                        "sender": "soak@example",
                        "recipients": ["a@b"],
                    },
                }
            }
        }
    ).reports.delivery
    built = channels(cfg, SystemClock(), threading.Event())
    assert configured_channels(cfg) == tuple(c.name for c in built)
    assert len(built) == 5
    assert configured_channels(cfg.model_copy(update={"slack_url": None, "email": None})) == (
        "feishu",
        "dingtalk",
        "wecom",
    )
