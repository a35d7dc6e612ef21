"""Report delivery, against local stand-ins for Slack, Feishu, DingTalk and WeCom that check
signatures, payload shapes and size limits as those platforms do, and an SMTP server
(aiosmtpd) with STARTTLS, login and a SIZE limit."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import EmailMessage, MIMEPart
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import pytest
import structlog
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from observer.clock import ManualClock
from observer.delivery.base import Channel, DeliveryResult, RenderedReport, RetryPolicy
from observer.delivery.dingtalk import DingTalkChannel
from observer.delivery.directory import DirectoryChannel
from observer.delivery.dispatch import deliver_all
from observer.delivery.email import EmailChannel
from observer.delivery.feishu import FeishuChannel
from observer.delivery.slack import SlackChannel
from observer.delivery.wecom import WeComChannel
from tests.support.net import free_port

SLACK_TOKEN = "slack-token-0123456789abcdef"
FEISHU_HOOK = "feishu-hook-1c2d3e4f-5a6b-7c8d"
FEISHU_SECRET = "feishu-signing-secret-XyZ"
DINGTALK_TOKEN = "dingtalk-access-token-9f8e7d6c5b4a"
DINGTALK_SECRET = "SECdingtalk-signing-secret-123"
WECOM_KEY = "wecom-key-693a91f6-7e1d-4bc4"
SMTP_USER = "observer"
SMTP_PASSWORD = "smtp-password-s3cret"
SECRETS = (
    SLACK_TOKEN,
    FEISHU_HOOK,
    FEISHU_SECRET,
    DINGTALK_TOKEN,
    DINGTALK_SECRET,
    WECOM_KEY,
    SMTP_PASSWORD,
)

LINK = "https://reports.example.com/daily-2024-05-01.html"
MARKDOWN = """# GPU soak daily summary 2024-05-01

- Tasks: 1,204 (failed 12)
- Average queue wait: 41 s
- GPU utilisation: 63 %
- Alerts: 3, manual interventions: 1

| tenant | GPUs | wait |
|---|---|---|
| research | 56 | 30 s |
"""
SUMMARY = f"""# GPU soak daily summary 2024-05-01

Tasks 1,204, failed 12, 2 findings. [Full report]({LINK})"""
ZH_TITLE = "GPU 浸泡测试日报 2024-05-01"
ZH_MARKDOWN = f"""# {ZH_TITLE}

- 任务数：1204，失败 12 个（原因：显存不足）
- 平均排队等待：41 秒
- 发现：租户「研究部」夜间窗口持续排队不公平
"""
ZH_SUMMARY = f"# {ZH_TITLE}\n\n任务 1204 个，失败 12 个，发现 2 项。[完整报告]({LINK})"


def make_report(
    markdown: str = MARKDOWN,
    *,
    title: str = "GPU soak daily summary 2024-05-01",
    summary: str = SUMMARY,
    html: str = "<!DOCTYPE html><html><body><h1>GPU soak daily summary</h1></body></html>",
    language: str = "en",
) -> RenderedReport:
    return RenderedReport(
        kind="daily",
        title=title,
        label="2024-05-01",
        language=language,
        markdown=markdown,
        html=html,
        json_text=json.dumps({"title": title, "tasks": 1204}, ensure_ascii=False),
        summary_markdown=summary,
        link=LINK,
    )


def chinese_report(markdown: str = ZH_MARKDOWN, summary: str = ZH_SUMMARY) -> RenderedReport:
    return make_report(
        markdown,
        title=ZH_TITLE,
        summary=summary,
        html=f'<!DOCTYPE html><html lang="zh-CN"><body><h1>{ZH_TITLE}</h1></body></html>',
        language="zh-CN",
    )


def oversized(markdown: str) -> str:
    """Longer than any chat takes whole: over Slack's 49 sections of 3000 characters."""
    lines = [f"- finding {i}: GPU memory left behind on node gpu-{i:04d}" for i in range(4000)]
    return markdown + "\n".join(lines)


# --- the platforms' stand-ins -----------------------------------------------------------


@dataclass
class Reply:
    status: int
    body: object  # JSON value, or text for a str
    headers: dict[str, str] = field(default_factory=dict)


class FakePlatform:
    """A webhook endpoint: gives its scripted replies first, then checks each request as the
    platform does. `accepted` holds the payloads it took, `body_sizes` every body's bytes."""

    route = ""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests = 0
        self.accepted: list[dict[str, Any]] = []
        self.body_sizes: list[int] = []

    def handle(self, path: str, query: dict[str, str], body: bytes) -> Reply:
        self.requests += 1
        self.body_sizes.append(len(body))
        if self.script:
            return self.script.pop(0)
        payload = json.loads(body.decode("utf-8"))
        rejection = self.check(path, query, payload, body)
        if rejection is not None:
            return rejection
        self.accepted.append(payload)
        return self.success()

    def check(self, path: str, query: dict[str, str], payload: Any, body: bytes) -> Reply | None:
        raise NotImplementedError

    def success(self) -> Reply:
        raise NotImplementedError

    def text(self, payload: dict[str, Any]) -> str:
        """The message text a reader sees."""
        raise NotImplementedError


class FakeSlack(FakePlatform):
    route = "slack"
    path = f"/slack/services/T0001/B0001/{SLACK_TOKEN}"

    def check(self, path: str, query: dict[str, str], payload: Any, body: bytes) -> Reply | None:
        if path != self.path:
            return Reply(403, "invalid_token")
        blocks = payload.get("blocks")
        if not isinstance(payload.get("text"), str) or not isinstance(blocks, list):
            return Reply(400, "invalid_payload")
        if not 0 < len(blocks) <= 50:
            return Reply(400, "invalid_blocks")
        for block in blocks:
            limit = 150 if block["type"] == "header" else 3000
            if not 0 < len(block["text"]["text"]) <= limit:
                return Reply(400, "invalid_blocks")
        return None

    def success(self) -> Reply:
        return Reply(200, "ok")

    def text(self, payload: dict[str, Any]) -> str:
        return "\n".join(
            block["text"]["text"] for block in payload["blocks"] if block["type"] == "section"
        )


class FakeFeishu(FakePlatform):
    route = "feishu"
    path = f"/feishu/open-apis/bot/v2/hook/{FEISHU_HOOK}"
    max_body_bytes = 20_000

    def check(self, path: str, query: dict[str, str], payload: Any, body: bytes) -> Reply | None:
        if path != self.path:
            return Reply(
                200, {"code": 19001, "msg": "param invalid: incoming webhook access token invalid"}
            )
        timestamp = int(payload.get("timestamp", "0"))
        key = f"{timestamp}\n{FEISHU_SECRET}".encode()
        expected = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
        if abs(time.time() - timestamp) > 3600 or payload.get("sign") != expected:
            return Reply(
                200,
                {
                    "code": 19021,
                    "data": {},
                    "msg": "sign match fail or timestamp is not within one hour from current time",
                },
            )
        if len(body) > self.max_body_bytes:
            return Reply(200, {"code": 19036, "data": {}, "msg": "message size exceeds limit"})
        card = payload.get("card", {})
        if payload.get("msg_type") != "interactive" or card["elements"][0]["tag"] != "markdown":
            return Reply(200, {"code": 9499, "msg": "Bad Request"})
        return None

    def success(self) -> Reply:
        return Reply(
            200,
            {"StatusCode": 0, "StatusMessage": "success", "code": 0, "data": {}, "msg": "success"},
        )

    def text(self, payload: dict[str, Any]) -> str:
        return str(payload["card"]["elements"][0]["content"])


class FakeDingTalk(FakePlatform):
    route = "dingtalk"
    path = "/dingtalk/robot/send"
    max_body_bytes = 20_000

    def check(self, path: str, query: dict[str, str], payload: Any, body: bytes) -> Reply | None:
        if path != self.path or query.get("access_token") != DINGTALK_TOKEN:
            return Reply(200, {"errcode": 300001, "errmsg": "token is not exist"})
        timestamp = int(query.get("timestamp", "0"))
        if abs(time.time() * 1000 - timestamp) > 3600 * 1000:
            return Reply(200, {"errcode": 310000, "errmsg": "invalid timestamp"})
        digest = hmac.new(
            DINGTALK_SECRET.encode(), f"{timestamp}\n{DINGTALK_SECRET}".encode(), hashlib.sha256
        ).digest()
        # parse_qs has URL-decoded `sign` once, as DingTalk does.
        if query.get("sign") != base64.b64encode(digest).decode():
            return Reply(200, {"errcode": 310000, "errmsg": "sign not match"})
        if len(body) > self.max_body_bytes:
            return Reply(200, {"errcode": 460101, "errmsg": "message too long"})
        markdown = payload.get("markdown", {})
        if (
            payload.get("msgtype") != "markdown"
            or not markdown.get("title")
            or not markdown.get("text")
        ):
            return Reply(200, {"errcode": 40035, "errmsg": "missing parameter"})
        return None

    def success(self) -> Reply:
        return Reply(200, {"errcode": 0, "errmsg": "ok"})

    def text(self, payload: dict[str, Any]) -> str:
        return str(payload["markdown"]["text"])


class FakeWeCom(FakePlatform):
    route = "wecom"
    path = "/wecom/cgi-bin/webhook/send"
    max_content_bytes = 4096

    def check(self, path: str, query: dict[str, str], payload: Any, body: bytes) -> Reply | None:
        if path != self.path or query.get("key") != WECOM_KEY:
            return Reply(200, {"errcode": 93000, "errmsg": "invalid webhook url"})
        if payload.get("msgtype") != "markdown":
            return Reply(200, {"errcode": 40008, "errmsg": "invalid message type"})
        if len(payload["markdown"]["content"].encode("utf-8")) > self.max_content_bytes:
            return Reply(
                200, {"errcode": 40058, "errmsg": "markdown.content exceed max length 4096"}
            )
        return None

    def success(self) -> Reply:
        return Reply(200, {"errcode": 0, "errmsg": "ok"})

    def text(self, payload: dict[str, Any]) -> str:
        return str(payload["markdown"]["content"])


class Platforms:
    """One local HTTP server routing /slack, /feishu, /dingtalk and /wecom to the stand-ins."""

    def __init__(self) -> None:
        self.fakes: dict[str, FakePlatform] = {
            fake.route: fake for fake in (FakeSlack(), FakeFeishu(), FakeDingTalk(), FakeWeCom())
        }
        fakes = self.fakes

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                url = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if not self.headers.get("Content-Type", "").startswith("application/json"):
                    reply = Reply(415, "expected JSON")
                else:
                    fake = fakes[url.path.split("/")[1]]
                    query = {key: values[0] for key, values in parse_qs(url.query).items()}
                    reply = fake.handle(url.path, query, body)
                if isinstance(reply.body, str):
                    data, kind = reply.body.encode(), "text/plain; charset=utf-8"
                else:
                    data, kind = json.dumps(reply.body).encode(), "application/json"
                self.send_response(reply.status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def platforms() -> Iterator[Platforms]:
    server = Platforms()
    yield server
    server.close()


@pytest.fixture
def clock() -> ManualClock:
    # Wall time, as the platforms reject signatures more than an hour off theirs.
    return ManualClock(datetime.now(UTC))


@pytest.fixture
def retry(clock: ManualClock) -> RetryPolicy:
    return RetryPolicy(clock, threading.Event())


ChatChannel = SlackChannel | FeishuChannel | DingTalkChannel | WeComChannel


def slack(platforms: Platforms, retry: RetryPolicy, token: str = SLACK_TOKEN) -> SlackChannel:
    return SlackChannel(platforms.url(f"/slack/services/T0001/B0001/{token}"), retry)


def feishu(platforms: Platforms, retry: RetryPolicy, secret: str = FEISHU_SECRET) -> FeishuChannel:
    return FeishuChannel(platforms.url(FakeFeishu.path), retry, secret=secret)


def dingtalk(
    platforms: Platforms, retry: RetryPolicy, secret: str = DINGTALK_SECRET
) -> DingTalkChannel:
    url = platforms.url(f"/dingtalk/robot/send?access_token={DINGTALK_TOKEN}")
    return DingTalkChannel(url, retry, secret=secret)


def wecom(platforms: Platforms, retry: RetryPolicy, key: str = WECOM_KEY) -> WeComChannel:
    return WeComChannel(platforms.url(f"/wecom/cgi-bin/webhook/send?key={key}"), retry)


CHATS: dict[str, Callable[[Platforms, RetryPolicy], ChatChannel]] = {
    "slack": slack,
    "feishu": feishu,
    "dingtalk": dingtalk,
    "wecom": wecom,
}


def received(platforms: Platforms, route: str) -> str:
    fake = platforms.fakes[route]
    assert len(fake.accepted) == 1
    return fake.text(fake.accepted[0])


def assert_within_limits(platforms: Platforms, route: str) -> None:
    """What each platform limits, measured on what it received."""
    fake = platforms.fakes[route]
    if route == "slack":
        [payload] = fake.accepted
        assert len(payload["blocks"]) <= 50
        assert all(len(block["text"]["text"]) <= 3000 for block in payload["blocks"])
    elif route == "wecom":
        assert len(fake.text(fake.accepted[0]).encode("utf-8")) <= 4096
    else:
        assert max(fake.body_sizes) <= 20_000


# --- chat channels ------------------------------------------------------------------------


@pytest.mark.parametrize("route", CHATS)
def test_each_chat_channel_delivers_a_normal_report_whole(
    route: str, platforms: Platforms, retry: RetryPolicy, clock: ManualClock
) -> None:
    result = CHATS[route](platforms, retry).deliver(make_report())

    assert result == DeliveryResult(
        route, True, 1, "delivered the whole report", clock.now(), "full"
    )
    assert "Average queue wait: 41 s" in received(platforms, route)


@pytest.mark.parametrize("route", CHATS)
def test_an_oversized_report_falls_back_to_the_summary_and_link(
    route: str, platforms: Platforms, retry: RetryPolicy
) -> None:
    result = CHATS[route](platforms, retry).deliver(make_report(oversized(MARKDOWN)))

    assert result.ok
    assert result.form == "summary"
    text = received(platforms, route)
    assert "Tasks 1,204, failed 12, 2 findings" in text
    assert LINK in text
    assert_within_limits(platforms, route)


def test_slack_splits_a_long_report_into_sections_and_speaks_mrkdwn(
    platforms: Platforms, retry: RetryPolicy
) -> None:
    lines = [f"- **node gpu-{i:03d}**: 8 GPUs, 0 leaks & 0 lost lines" for i in range(200)]
    markdown = "## Nodes\n\n" + "\n".join(lines) + "\n\nSee [the runbook](https://wiki/x)."

    result = slack(platforms, retry).deliver(make_report(markdown))

    assert result.form == "full"
    sections = [
        block["text"]["text"]
        for block in platforms.fakes["slack"].accepted[0]["blocks"]
        if block["type"] == "section"
    ]
    assert len(sections) > 1
    assert all(len(section) <= 3000 for section in sections)
    text = "\n".join(sections)
    assert text.startswith("*Nodes*")
    assert "- *node gpu-199*: 8 GPUs, 0 leaks &amp; 0 lost lines" in text
    assert "<https://wiki/x|the runbook>" in text


def test_slack_shows_a_table_as_a_code_block(platforms: Platforms, retry: RetryPolicy) -> None:
    slack(platforms, retry).deliver(make_report())

    text = received(platforms, "slack")
    assert "```\n| tenant | GPUs | wait |\n|---|---|---|\n| research | 56 | 30 s |\n```" in text


def test_a_summary_too_long_for_the_limit_is_cut_keeping_the_link(
    platforms: Platforms, retry: RetryPolicy
) -> None:
    long_summary = ZH_SUMMARY + "\n" + "租户研究部排队时间过长。" * 400
    report = chinese_report(oversized(ZH_MARKDOWN), long_summary)

    result = wecom(platforms, retry).deliver(report)

    assert result.ok
    assert result.form == "summary"
    content = received(platforms, "wecom")
    assert len(content.encode("utf-8")) <= 4096
    assert content.startswith(f"# {ZH_TITLE}")
    assert content.endswith(f"…\n\n{LINK}")


def test_a_limit_too_small_for_even_the_link_sends_nothing(
    platforms: Platforms, retry: RetryPolicy
) -> None:
    channel = WeComChannel(
        platforms.url(f"/wecom/cgi-bin/webhook/send?key={WECOM_KEY}"), retry, max_content_bytes=10
    )

    result = channel.deliver(make_report())

    assert (result.ok, result.attempts, result.form) == (False, 0, None)
    assert platforms.fakes["wecom"].requests == 0


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda p, r: slack(p, r, token="slack-token-wrong-0000000000"),
            "Slack HTTP 403: invalid_token",
        ),
        (
            lambda p, r: feishu(p, r, secret="not-the-secret"),
            "Feishu code 19021: sign match fail",
        ),
        (
            lambda p, r: dingtalk(p, r, secret="SECnot-the-secret"),
            "DingTalk errcode 310000: sign not match",
        ),
        (
            lambda p, r: wecom(p, r, key="wecom-key-wrong-00000000000"),
            "WeCom errcode 93000: invalid webhook url",
        ),
    ],
    ids=["slack", "feishu", "dingtalk", "wecom"],
)
def test_a_wrong_secret_is_rejected_and_not_retried(
    make: Callable[[Platforms, RetryPolicy], ChatChannel],
    expected: str,
    platforms: Platforms,
    retry: RetryPolicy,
) -> None:
    result = make(platforms, retry).deliver(make_report())

    assert not result.ok
    assert result.attempts == 1
    assert result.delivered_at is None
    assert expected in result.detail
    assert sum(fake.requests for fake in platforms.fakes.values()) == 1


def test_dingtalk_rejects_a_signature_older_than_an_hour(
    platforms: Platforms, retry: RetryPolicy, clock: ManualClock
) -> None:
    stale = RetryPolicy(ManualClock(clock.now() - timedelta(hours=2)), retry.stop)

    result = dingtalk(platforms, stale).deliver(make_report())

    assert (result.ok, result.attempts) == (False, 1)
    assert "DingTalk errcode 310000: invalid timestamp" in result.detail


@pytest.mark.parametrize(
    ("route", "error"),
    [
        ("feishu", {"code": 19024, "data": {}, "msg": "Key Words Not Found"}),
        ("dingtalk", {"errcode": 310000, "errmsg": "keywords not in content"}),
        ("wecom", {"errcode": 93017, "errmsg": "the robot is disabled"}),
    ],
)
def test_an_error_code_in_a_200_reply_is_a_failure(
    route: str, error: dict[str, Any], platforms: Platforms, retry: RetryPolicy
) -> None:
    platforms.fakes[route].script.append(Reply(200, error))

    result = CHATS[route](platforms, retry).deliver(make_report())

    assert (result.ok, result.attempts) == (False, 1)
    assert str(error.get("msg", error.get("errmsg"))) in result.detail


@pytest.mark.parametrize("route", CHATS)
def test_a_server_error_then_success_is_delivered_on_the_second_attempt(
    route: str, platforms: Platforms, retry: RetryPolicy, clock: ManualClock
) -> None:
    platforms.fakes[route].script.append(Reply(500, "upstream failed"))
    started = clock.now()

    result = CHATS[route](platforms, retry).deliver(make_report())

    assert (result.ok, result.attempts) == (True, 2)
    assert clock.now() - started == timedelta(seconds=1)  # the first backoff step
    assert len(platforms.fakes[route].accepted) == 1


@pytest.mark.parametrize(
    ("route", "limited"),
    [
        ("slack", Reply(429, "rate_limited")),
        ("feishu", Reply(200, {"code": 11232, "data": {}, "msg": "frequency limited"})),
        (
            "dingtalk",
            Reply(200, {"errcode": 130101, "errmsg": "send too fast, exceed 20 times per minute"}),
        ),
        ("wecom", Reply(200, {"errcode": 45009, "errmsg": "api freq out of limit"})),
    ],
)
def test_a_rate_limit_is_waited_out(
    route: str, limited: Reply, platforms: Platforms, retry: RetryPolicy
) -> None:
    platforms.fakes[route].script.append(limited)

    result = CHATS[route](platforms, retry).deliver(make_report())

    assert (result.ok, result.attempts) == (True, 2)


def test_slack_retry_after_is_honoured_up_to_the_longest_step(
    platforms: Platforms, retry: RetryPolicy, clock: ManualClock
) -> None:
    platforms.fakes["slack"].script += [
        Reply(429, "rate_limited", {"Retry-After": "12"}),
        Reply(429, "rate_limited", {"Retry-After": "3600"}),
    ]
    started = clock.now()

    result = slack(platforms, retry).deliver(make_report())

    assert (result.ok, result.attempts) == (True, 3)
    assert clock.now() - started == timedelta(seconds=12 + 30)


def test_retries_stop_after_the_last_backoff_step(
    platforms: Platforms, retry: RetryPolicy, clock: ManualClock
) -> None:
    platforms.fakes["feishu"].script += [Reply(503, "unavailable")] * 10
    started = clock.now()

    result = feishu(platforms, retry).deliver(make_report())

    assert (result.ok, result.attempts) == (False, 4)
    assert result.detail == "HTTP 503: unavailable (gave up after 4 attempts)"
    assert clock.now() - started == timedelta(seconds=1 + 5 + 30)


def test_a_stop_request_ends_the_retries(platforms: Platforms, retry: RetryPolicy) -> None:
    platforms.fakes["wecom"].script.append(Reply(502, "bad gateway"))
    retry.stop.set()

    result = wecom(platforms, retry).deliver(make_report())

    assert (result.ok, result.attempts) == (False, 1)
    assert result.detail.endswith("(stopped before retrying)")


def test_an_unreachable_platform_is_retried_then_failed(retry: RetryPolicy) -> None:
    channel = SlackChannel(f"http://127.0.0.1:{free_port()}/services/T/B/{SLACK_TOKEN}", retry)

    result = channel.deliver(make_report())

    assert (result.ok, result.attempts) == (False, 4)
    assert result.detail.startswith("ConnectError")


# --- the directory and deliver_all -------------------------------------------------------


def test_the_directory_channel_writes_markdown_html_and_json(
    tmp_path: Path, clock: ManualClock
) -> None:
    report = chinese_report()
    directory = tmp_path / "reports"

    result = DirectoryChannel(directory, clock).deliver(report)

    assert (result.ok, result.form, result.delivered_at) == (True, "full", clock.now())
    assert sorted(path.name for path in directory.iterdir()) == [
        "daily-2024-05-01.html",
        "daily-2024-05-01.json",
        "daily-2024-05-01.md",
    ]
    assert (directory / "daily-2024-05-01.md").read_text(encoding="utf-8") == ZH_MARKDOWN
    assert (directory / "daily-2024-05-01.html").read_text(encoding="utf-8") == report.html
    assert json.loads((directory / "daily-2024-05-01.json").read_text(encoding="utf-8")) == {
        "title": ZH_TITLE,
        "tasks": 1204,
    }


def test_the_directory_channel_replaces_an_earlier_version(
    tmp_path: Path, clock: ManualClock
) -> None:
    channel = DirectoryChannel(tmp_path, clock)
    channel.deliver(make_report("first"))

    channel.deliver(make_report("second"))

    assert (tmp_path / "daily-2024-05-01.md").read_text(encoding="utf-8") == "second"
    assert len(list(tmp_path.iterdir())) == 3


def test_the_directory_channel_reports_a_failed_write(tmp_path: Path, clock: ManualClock) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")

    result = DirectoryChannel(blocked, clock).deliver(make_report())

    assert (result.ok, result.delivered_at) == (False, None)
    assert result.detail.startswith("cannot write daily-2024-05-01")


def test_a_label_that_is_not_a_plain_file_name_is_refused() -> None:
    with pytest.raises(ValueError, match="not a plain file-name part"):
        replace(make_report(), label="../etc")


class Broken:
    name = "broken"

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        raise RuntimeError(f"boom at https://hooks.example.com/{SLACK_TOKEN}")


@dataclass
class Witness:
    """A channel that records whether the report's home held it when its turn came."""

    home: Path
    name: str = "witness"
    saw_files: bool = False

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        self.saw_files = (self.home / f"{report.file_stem}.md").exists()
        return DeliveryResult(self.name, True, 1, "seen", None, "full")


def test_the_home_directory_is_written_first_and_kept_when_every_other_channel_fails(
    tmp_path: Path, platforms: Platforms, retry: RetryPolicy, clock: ManualClock
) -> None:
    platforms.fakes["feishu"].script += [Reply(500, "down")] * 10
    witness = Witness(tmp_path)
    others: list[Channel] = [
        witness,
        slack(platforms, retry, token="slack-token-wrong-0000000000"),
        feishu(platforms, retry),
        dingtalk(platforms, retry, secret="SECwrong"),
        wecom(platforms, retry, key="wecom-key-wrong-00000000000"),
        mail_channel(free_port(), retry, security="none"),
        Broken(),
    ]

    results = deliver_all(make_report(), DirectoryChannel(tmp_path, clock), others)

    assert [result.channel for result in results] == [
        "directory",
        "witness",
        "slack",
        "feishu",
        "dingtalk",
        "wecom",
        "email",
        "broken",
    ]
    assert results[0].ok
    assert witness.saw_files
    assert not any(result.ok for result in results[2:])
    assert results[-1].detail == "unexpected error: RuntimeError"
    assert (tmp_path / "daily-2024-05-01.md").read_text(encoding="utf-8") == MARKDOWN


# --- e-mail -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl makes the test SMTP server's certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class MailSink:
    """Takes mail after STARTTLS and login; scripted replies to DATA come first."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.envelopes: list[Envelope] = []

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.script:
            return self.script.pop(0)
        self.envelopes.append(envelope)
        return "250 OK"

    def message(self) -> EmailMessage:
        assert len(self.envelopes) == 1
        content = self.envelopes[0].content
        assert isinstance(content, bytes)
        parsed = message_from_bytes(content, policy=default_policy)
        assert isinstance(parsed, EmailMessage)
        return parsed


def text_of(part: MIMEPart | None) -> str:
    """A text part's content with the wire's CRLF line ends back to LF, less the final line
    end that the e-mail package adds to text without one."""
    assert part is not None
    content = part.get_content()
    assert isinstance(content, str)
    return content.replace("\r\n", "\n").removesuffix("\n")


def authenticate(
    server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: Any
) -> AuthResult:
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login == SMTP_USER.encode()
        and auth_data.password == SMTP_PASSWORD.encode()
    )
    # handled=False: aiosmtpd answers the refusal (535) itself.
    return AuthResult(success=ok, handled=False)


@dataclass
class MailServer:
    sink: MailSink
    port: int
    client_tls: ssl.SSLContext


@pytest.fixture
def mail_server_factory(
    tls_files: tuple[Path, Path],
) -> Iterator[Callable[..., MailServer]]:
    cert, key = tls_files
    controllers: list[Controller] = []

    def start(size_limit_bytes: int = 33_554_432, implicit_tls: bool = False) -> MailServer:
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.load_cert_chain(cert, key)
        sink = MailSink()
        port = free_port()
        # aiosmtpd offers AUTH only after its own STARTTLS, not on a TLS listener, unless
        # told that TLS is not required.
        tls: dict[str, Any] = (
            {"ssl_context": server_tls, "auth_require_tls": False}
            if implicit_tls
            else {"tls_context": server_tls, "require_starttls": True, "auth_required": True}
        )
        controller = Controller(
            sink,
            hostname="127.0.0.1",
            port=port,
            authenticator=authenticate,
            data_size_limit=size_limit_bytes,
            **tls,
        )
        controller.start()
        controllers.append(controller)
        return MailServer(sink, port, ssl.create_default_context(cafile=str(cert)))

    yield start
    for controller in controllers:
        controller.stop()


@pytest.fixture
def mail_server(mail_server_factory: Callable[..., MailServer]) -> MailServer:
    return mail_server_factory(33_554_432)


def mail_channel(
    port: int,
    retry: RetryPolicy,
    *,
    tls: ssl.SSLContext | None = None,
    password: str = SMTP_PASSWORD,
    security: Literal["starttls", "tls", "none"] = "starttls",
    inline_max_bytes: int = 100_000,
) -> EmailChannel:
    return EmailChannel(
        "127.0.0.1",
        port,
        "observer@example.com",
        ["sre@example.com", "platform@example.com"],
        retry,
        security=security,
        username=SMTP_USER,
        password=password,
        ssl_context=tls,
        inline_max_bytes=inline_max_bytes,
        timeout_seconds=5.0,
    )


def test_email_sends_markdown_and_html_as_alternatives_with_the_json_attached(
    mail_server: MailServer, retry: RetryPolicy, clock: ManualClock
) -> None:
    report = make_report()

    result = mail_channel(mail_server.port, retry, tls=mail_server.client_tls).deliver(report)

    assert result == DeliveryResult(
        "email", True, 1, "delivered the whole report", clock.now(), "full"
    )
    envelope = mail_server.sink.envelopes[0]
    assert envelope.mail_from == "observer@example.com"
    assert envelope.rcpt_tos == ["sre@example.com", "platform@example.com"]
    message = mail_server.sink.message()
    assert message["Subject"] == report.title
    assert message.get_content_type() == "multipart/mixed"
    assert text_of(message.get_body(("plain",))) == report.markdown.removesuffix("\n")
    assert text_of(message.get_body(("html",))) == report.html
    [attachment] = message.iter_attachments()
    assert attachment.get_filename() == "daily-2024-05-01.json"
    assert json.loads(attachment.get_content()) == {"title": report.title, "tasks": 1204}


def test_email_attaches_a_report_too_big_to_show_inline(
    mail_server: MailServer, retry: RetryPolicy
) -> None:
    big_html = "<html><body>" + "<p>row</p>" * 2000 + "</body></html>"
    report = make_report(html=big_html)
    channel = mail_channel(
        mail_server.port, retry, tls=mail_server.client_tls, inline_max_bytes=10_000
    )

    result = channel.deliver(report)

    assert (result.ok, result.form) == (True, "attachment")
    message = mail_server.sink.message()
    assert text_of(message.get_body(("plain",))) == SUMMARY
    attachments = {str(part.get_filename()): part for part in message.iter_attachments()}
    assert sorted(attachments) == ["daily-2024-05-01.html", "daily-2024-05-01.json"]
    assert attachments["daily-2024-05-01.html"].get_content() == big_html


def test_email_sends_only_the_summary_when_the_server_takes_less(
    mail_server_factory: Callable[..., MailServer], retry: RetryPolicy
) -> None:
    server = mail_server_factory(20_000)
    report = make_report(oversized(MARKDOWN), html="<p>" + "x" * 200_000 + "</p>")

    result = mail_channel(server.port, retry, tls=server.client_tls).deliver(report)

    assert (result.ok, result.form) == (True, "summary")
    content = server.sink.envelopes[0].content
    assert isinstance(content, bytes) and len(content) <= 20_000
    message = server.sink.message()
    assert f'<a href="{LINK}">' in text_of(message.get_body(("html",)))
    assert list(message.iter_attachments()) == []


def test_email_over_tls_from_the_start(
    mail_server_factory: Callable[..., MailServer], retry: RetryPolicy
) -> None:
    server = mail_server_factory(implicit_tls=True)
    channel = mail_channel(server.port, retry, tls=server.client_tls, security="tls")

    result = channel.deliver(make_report())

    assert (result.ok, result.form) == (True, "full"), result.detail
    assert len(server.sink.envelopes) == 1


def test_email_with_a_wrong_password_fails_without_retry(
    mail_server: MailServer, retry: RetryPolicy
) -> None:
    channel = mail_channel(
        mail_server.port, retry, tls=mail_server.client_tls, password="wrong-password"
    )

    result = channel.deliver(make_report())

    assert (result.ok, result.attempts) == (False, 1)
    assert result.detail.startswith("SMTP 535")
    assert mail_server.sink.envelopes == []


def test_email_retries_a_temporary_refusal(mail_server: MailServer, retry: RetryPolicy) -> None:
    mail_server.sink.script.append("451 4.3.0 Try again later")

    result = mail_channel(mail_server.port, retry, tls=mail_server.client_tls).deliver(
        make_report()
    )

    assert (result.ok, result.attempts) == (True, 2)
    assert len(mail_server.sink.envelopes) == 1


def test_email_does_not_retry_a_permanent_refusal(
    mail_server: MailServer, retry: RetryPolicy
) -> None:
    mail_server.sink.script.append("554 5.7.1 Message rejected as spam")

    result = mail_channel(mail_server.port, retry, tls=mail_server.client_tls).deliver(
        make_report()
    )

    assert (result.ok, result.attempts) == (False, 1)
    assert result.detail == "SMTP 554: 5.7.1 Message rejected as spam"


def test_email_refuses_to_send_an_unverified_server_certificate(
    mail_server: MailServer, retry: RetryPolicy
) -> None:
    result = mail_channel(mail_server.port, retry).deliver(make_report())

    assert (result.ok, result.attempts) == (False, 1)
    assert result.detail.startswith("TLS failed")


# --- Chinese and secrets ------------------------------------------------------------------


@pytest.mark.parametrize("route", CHATS)
def test_chinese_text_reaches_every_chat_intact(
    route: str, platforms: Platforms, retry: RetryPolicy
) -> None:
    result = CHATS[route](platforms, retry).deliver(chinese_report())

    assert (result.ok, result.form) == (True, "full")
    text = received(platforms, route)
    assert "任务数：1204，失败 12 个（原因：显存不足）" in text
    assert "租户「研究部」夜间窗口持续排队不公平" in text


def test_chinese_text_reaches_email_intact(mail_server: MailServer, retry: RetryPolicy) -> None:
    report = chinese_report()

    mail_channel(mail_server.port, retry, tls=mail_server.client_tls).deliver(report)

    message = mail_server.sink.message()
    assert message["Subject"] == ZH_TITLE
    assert text_of(message.get_body(("plain",))) == ZH_MARKDOWN.removesuffix("\n")


@pytest.mark.parametrize(
    ("route", "limit"), [("wecom", 4096), ("feishu", 20_000), ("dingtalk", 20_000)]
)
def test_limits_count_utf8_bytes_not_characters(
    route: str, limit: int, platforms: Platforms, retry: RetryPolicy
) -> None:
    # Fewer characters than the limit, three times as many bytes.
    markdown = ZH_MARKDOWN + "显" * (limit // 2)
    report = chinese_report(markdown)

    result = CHATS[route](platforms, retry).deliver(report)

    assert (result.ok, result.form) == (True, "summary")
    assert "任务 1204 个，失败 12 个，发现 2 项。" in received(platforms, route)
    assert_within_limits(platforms, route)


def test_nothing_secret_reaches_a_result_or_a_log_line(
    tmp_path: Path,
    platforms: Platforms,
    mail_server: MailServer,
    retry: RetryPolicy,
    clock: ManualClock,
) -> None:
    # A platform quoting the token back, as some error messages do.
    platforms.fakes["feishu"].script.append(
        Reply(200, {"code": 19001, "msg": f"invalid token {FEISHU_HOOK} for {FEISHU_SECRET}"})
    )
    platforms.fakes["wecom"].script += [Reply(500, f"no such key {WECOM_KEY}")] * 4
    others: list[Channel] = [
        slack(platforms, retry, token="slack-token-wrong-0000000000"),
        SlackChannel(f"http://127.0.0.1:{free_port()}/services/T/B/{SLACK_TOKEN}", retry),
        feishu(platforms, retry),
        dingtalk(platforms, retry, secret="SECwrong"),
        DingTalkChannel(
            f"http://127.0.0.1:{free_port()}/robot/send?access_token={DINGTALK_TOKEN}",
            retry,
            secret=DINGTALK_SECRET,
        ),
        wecom(platforms, retry),
        mail_channel(mail_server.port, retry, tls=mail_server.client_tls, password="wrong"),
        mail_channel(mail_server.port, retry, tls=mail_server.client_tls),
        Broken(),
    ]

    with structlog.testing.capture_logs() as logs:
        results = deliver_all(make_report(), DirectoryChannel(tmp_path, clock), others)

    assert "invalid token *** for ***" in results[3].detail
    assert "no such key ***" in results[6].detail
    exposed = repr(results) + repr(logs)
    assert [secret for secret in SECRETS if secret in exposed] == []
