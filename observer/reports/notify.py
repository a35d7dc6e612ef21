"""Report delivery: the directory that is every report's home, then chat webhooks (Slack,
Feishu/Lark, DingTalk, WeCom) and e-mail over SMTP. The only module that talks to them.

Each channel fits the report to its platform's size limit (the whole report, else the short
summary with a link), retries transient failures on a finite backoff, reads the platform's
error code, and answers a DeliveryResult instead of raising. Webhook tokens, signing secrets
and passwords never reach a result or a log line.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import os
import re
import smtplib
import ssl
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import format_datetime, make_msgid
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl, quote_plus, urlsplit

import httpx

from observer.clock import Clock
from observer.logs import get_logger

ReportKind = Literal["daily", "verdict"]
Form = Literal["full", "summary", "attachment"]
"""What a channel sent: the whole report, the short summary with a link, or the summary with
the report attached (e-mail)."""

DEFAULT_BACKOFF_SECONDS = (1.0, 5.0, 30.0)
SLACK_SECTION_MAX_CHARS = 3000
SLACK_MAX_BLOCKS = 50
SLACK_HEADER_MAX_CHARS = 150
FEISHU_MAX_BODY_BYTES = 20_000
DINGTALK_MAX_BODY_BYTES = 20_000
WECOM_MAX_CONTENT_BYTES = 4096
# Gmail clips an HTML body beyond 102 KB behind a "view entire message" link.
EMAIL_INLINE_MAX_BYTES = 100_000
EMAIL_MAX_MESSAGE_BYTES = 10_000_000

# Webhook URLs carry their credential as a path segment or query value (Slack's last segment,
# Feishu's hook id, DingTalk's access_token, WeCom's key); none is shorter than this, while
# the words around them ("services", "send") are.
_MIN_TOKEN_CHARS = 16
_SNIPPET_CHARS = 300
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}
_DELIVERED: dict[Form, str] = {
    "full": "delivered the whole report",
    "summary": "delivered the summary and link: the whole report exceeds the size limit",
    "attachment": "delivered the summary with the report attached: the report is too big to "
    "show inline",
}

_log = get_logger("observer.reports.notify")


def report_file_stem(kind: ReportKind, label: str) -> str:
    """'<kind>-<label>', the report's file name without extension (e.g. 'daily-2024-05-01');
    the directory channel writes under it and a report's `link` should name it. The label is
    a date or a period ('2024-05-01_2024-05-14'): letters, digits, '.', '_', '-'."""
    if not _LABEL.fullmatch(label):
        raise ValueError(f"report label {label!r} is not a plain file-name part")
    return f"{kind}-{label}"


@dataclass(frozen=True)
class RenderedReport:
    """A report rendered for delivery, in one language."""

    kind: ReportKind
    title: str
    label: str
    """The date or period it covers, as used in file names (see `report_file_stem`)."""
    language: str
    """BCP 47 tag, 'en' or 'zh-CN'."""
    markdown: str
    html: str
    """A standalone document."""
    json_text: str
    summary_markdown: str
    """Headline figures, the findings count and the link, starting with the title: chats
    that cannot take the whole report show this, and some (WeCom) have no title field."""
    link: str | None = None
    """Where the full report can be read, e.g. a configured base URL + the file name."""

    def __post_init__(self) -> None:
        report_file_stem(self.kind, self.label)

    @property
    def file_stem(self) -> str:
        return report_file_stem(self.kind, self.label)


@dataclass(frozen=True)
class DeliveryResult:
    channel: str
    ok: bool
    attempts: int
    """Sends tried; 0 when the report could not be fitted to the channel at all."""
    detail: str
    """What was delivered, or why not in the platform's own words; never a secret."""
    delivered_at: datetime | None
    form: Form | None
    """What was sent (or last tried); None when nothing was."""


class Channel(Protocol):
    name: str

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        """Deliver, retrying what may pass later; never raises for a failed delivery."""
        ...


@dataclass(frozen=True)
class RetryPolicy:
    """After a failure that may pass later (transport error, HTTP 5xx or 429, a platform's
    rate-limit code, an SMTP 4xx) wait the next step of `backoff_seconds` and try again;
    when the steps run out or `stop` is set, the delivery fails. Delivery talks to real
    services: give it the system clock even in the demo, as signatures carry wall time."""

    clock: Clock
    stop: threading.Event
    backoff_seconds: tuple[float, ...] = DEFAULT_BACKOFF_SECONDS


def deliver_all(
    report: RenderedReport, home: DirectoryChannel, others: Sequence[Channel]
) -> list[DeliveryResult]:
    """Write the report to its home directory first, then deliver it to every other channel,
    in order. Never raises for a channel's failure: every channel gets its turn and the
    results say what happened. The others run even when the home failed, as each copy
    elsewhere is one more place the report survives."""
    results = [_deliver_safely(channel, report) for channel in (home, *others)]
    for result in results:
        if result.ok:
            _log.info(
                "report delivered",
                report=report.file_stem,
                channel=result.channel,
                form=result.form,
                attempts=result.attempts,
            )
        else:
            _log.warning(
                "report delivery failed",
                report=report.file_stem,
                channel=result.channel,
                form=result.form,
                attempts=result.attempts,
                detail=result.detail,
            )
    return results


def _deliver_safely(channel: Channel, report: RenderedReport) -> DeliveryResult:
    try:
        return channel.deliver(report)
    except Exception as exc:
        # A bug in one channel must not cost the others their turn; the message is left out
        # because it may quote a URL or a secret.
        return DeliveryResult(
            channel.name, False, 0, f"unexpected error: {type(exc).__name__}", None, None
        )


class DirectoryChannel:
    """The report's home: <directory>/<kind>-<label>.{md,html,json}, each written atomically
    (a reader sees the old file or the new one, never half of one)."""

    def __init__(self, directory: Path, clock: Clock, name: str = "directory") -> None:
        self.name = name
        self._directory = directory
        self._clock = clock

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        stem = report.file_stem
        files = {".json": report.json_text, ".html": report.html, ".md": report.markdown}
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            for suffix, text in files.items():
                write_atomically(self._directory / f"{stem}{suffix}", text)
        except OSError as exc:
            return DeliveryResult(
                self.name,
                False,
                1,
                f"cannot write {stem} in {self._directory}: {exc.strerror or exc}",
                None,
                "full",
            )
        return DeliveryResult(
            self.name,
            True,
            1,
            f"wrote {stem}.md, .html and .json in {self._directory}",
            self._clock.now(),
            "full",
        )


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` whole: a reader sees the old file or the new one, never half."""
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file private; a report is for whoever serves the directory.
        temporary.chmod(0o644)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class _Attempt:
    ok: bool
    retry: bool
    """A failure that may pass on a later attempt."""
    detail: str
    form: Form
    wait_seconds: float = 0.0
    """The platform's own Retry-After, if it gave one."""


def _with_retries(policy: RetryPolicy, attempt: Callable[[], _Attempt]) -> tuple[_Attempt, int]:
    steps = iter(policy.backoff_seconds)
    longest = max(policy.backoff_seconds, default=0.0)
    attempts = 0
    while True:
        attempts += 1
        outcome = attempt()
        if outcome.ok or not outcome.retry:
            return outcome, attempts
        step = next(steps, None)
        if step is None:
            return replace(
                outcome, detail=f"{outcome.detail} (gave up after {attempts} attempts)"
            ), attempts
        # A platform's Retry-After is honoured up to the longest step, so the schedule stays
        # finite whatever the platform asks.
        if policy.clock.sleep(max(step, min(outcome.wait_seconds, longest)), policy.stop):
            return replace(outcome, detail=f"{outcome.detail} (stopped before retrying)"), attempts


class _Scrubber:
    """Replaces secrets with '***' in any text that leaves a channel."""

    def __init__(self, urls: Iterable[str], secrets: Iterable[str | None]) -> None:
        pieces = {secret for secret in secrets if secret}
        for url in urls:
            parts = urlsplit(url)
            pieces |= {
                piece
                for piece in (
                    url,
                    parts.password or "",
                    *parts.path.split("/"),
                    *(value for _, value in parse_qsl(parts.query)),
                )
                if len(piece) >= _MIN_TOKEN_CHARS
            }
        self._pieces = sorted(pieces, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for piece in self._pieces:
            text = text.replace(piece, "***")
        return text


def _result(
    name: str, outcome: _Attempt, attempts: int, clock: Clock, scrub: _Scrubber
) -> DeliveryResult:
    if outcome.ok:
        return DeliveryResult(
            name, True, attempts, _DELIVERED[outcome.form], clock.now(), outcome.form
        )
    return DeliveryResult(name, False, attempts, scrub(outcome.detail), None, outcome.form)


def _unfittable(name: str) -> DeliveryResult:
    return DeliveryResult(
        name, False, 0, "even a shortened summary exceeds the size limit", None, None
    )


def _fit(report: RenderedReport, fits: Callable[[str], bool]) -> tuple[str, Form] | None:
    """The whole Markdown if it fits, else the summary, else the summary cut short with the
    link kept whole; None if not even that fits. `fits` measures what the platform limits
    (UTF-8 bytes or characters), so Chinese text is judged by its real size."""
    if fits(report.markdown):
        return report.markdown, "full"
    if fits(report.summary_markdown):
        return report.summary_markdown, "summary"
    tail = f"…\n\n{report.link}" if report.link else "…"
    if not fits(tail):
        return None
    summary = report.summary_markdown
    # Cutting characters, never bytes, keeps every multi-byte character whole.
    low, high = 0, len(summary)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(summary[:middle] + tail):
            low = middle
        else:
            high = middle - 1
    return summary[:low] + tail, "summary"


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"


def _retry_after_seconds(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "0")))
    except ValueError:  # an HTTP date: fall back to our own schedule
        return 0.0


def _json_body(payload: dict[str, Any]) -> bytes:
    # Unescaped UTF-8: Chinese costs 3 bytes a character, not 6 as a \\u escape.
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _judge_coded(
    response: httpx.Response,
    platform: str,
    code_key: str,
    message_key: str,
    rate_limited: frozenset[int],
) -> tuple[bool, bool, str]:
    """Read a reply that carries an error code in its JSON body, whatever the HTTP status."""
    try:
        reply = response.json()
    except ValueError:
        return False, False, f"{platform} HTTP {response.status_code}: {_snippet(response.text)}"
    code = reply.get(code_key) if isinstance(reply, dict) else None
    if code == 0 and response.is_success:
        return True, False, ""
    message = reply.get(message_key, "") if isinstance(reply, dict) else ""
    return (
        False,
        code in rate_limited,
        f"{platform} {code_key} {code}: {_snippet(str(message))} (HTTP {response.status_code})",
    )


class _Webhook(ABC):
    """What the chat webhooks share: fit the report, sign and post it, read the reply, retry."""

    def __init__(
        self,
        name: str,
        url: str,
        retry: RetryPolicy,
        timeout_seconds: float,
        secret: str | None = None,
    ) -> None:
        self.name = name
        self._url = url
        self._retry = retry
        self._timeout_seconds = timeout_seconds
        self._secret = secret
        self._scrub = _Scrubber([url], [secret])

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        fitted = _fit(report, lambda text: self._fits(report, text))
        if fitted is None:
            return _unfittable(self.name)
        text, form = fitted
        with httpx.Client(timeout=self._timeout_seconds) as client:
            outcome, attempts = _with_retries(
                self._retry, lambda: self._post(client, report, text, form)
            )
        return _result(self.name, outcome, attempts, self._retry.clock, self._scrub)

    def _post(
        self, client: httpx.Client, report: RenderedReport, text: str, form: Form
    ) -> _Attempt:
        # Built per attempt: a signature carries the time it was made.
        url, body = self._request(report, text)
        try:
            response = client.post(url, content=body, headers=_JSON_HEADERS)
        except httpx.TransportError as exc:
            return _Attempt(False, True, f"{type(exc).__name__}: {exc}", form)
        except (httpx.RequestError, httpx.InvalidURL) as exc:
            return _Attempt(False, False, f"{type(exc).__name__}: {exc}", form)
        if response.status_code == 429 or response.status_code >= 500:
            return _Attempt(
                False,
                True,
                f"HTTP {response.status_code}: {_snippet(response.text)}",
                form,
                _retry_after_seconds(response),
            )
        ok, retry, detail = self._judge(response)
        return _Attempt(ok, retry, detail, form)

    @abstractmethod
    def _request(self, report: RenderedReport, text: str) -> tuple[str, bytes]:
        """The URL and JSON body that post `text` (the report or its summary)."""

    @abstractmethod
    def _fits(self, report: RenderedReport, text: str) -> bool:
        """Whether posting `text` stays within the platform's limits."""

    @abstractmethod
    def _judge(self, response: httpx.Response) -> tuple[bool, bool, str]:
        """(ok, worth retrying, detail) from a reply that is neither 5xx nor 429."""

    def _timestamp_seconds(self) -> int:
        return int(self._retry.clock.now().timestamp())


class SlackChannel(_Webhook):
    """Slack incoming webhook, Block Kit: a header and the report as mrkdwn sections of at
    most 3000 characters each, 50 blocks at most. Slack answers a plain 'ok', or an HTTP
    error with a short code ('invalid_payload', 'no_service', 'invalid_token')."""

    def __init__(
        self,
        url: str,
        retry: RetryPolicy,
        *,
        timeout_seconds: float = 10.0,
        name: str = "slack",
    ) -> None:
        super().__init__(name, url, retry, timeout_seconds)

    def _sections(self, text: str) -> list[str]:
        return _chunks(_to_mrkdwn(text), SLACK_SECTION_MAX_CHARS)

    def _fits(self, report: RenderedReport, text: str) -> bool:
        return len(self._sections(text)) < SLACK_MAX_BLOCKS  # one block is the header

    def _request(self, report: RenderedReport, text: str) -> tuple[str, bytes]:
        title = report.title
        if len(title) > SLACK_HEADER_MAX_CHARS:
            title = title[: SLACK_HEADER_MAX_CHARS - 1] + "…"
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": title, "emoji": True}}
        ]
        blocks += [
            {"type": "section", "text": {"type": "mrkdwn", "text": section}}
            for section in self._sections(text)
        ]
        # The top-level text is what notifications and screen readers show.
        return self._url, _json_body({"text": report.title, "blocks": blocks})

    def _judge(self, response: httpx.Response) -> tuple[bool, bool, str]:
        if response.is_success and response.text.strip() == "ok":
            return True, False, ""
        return False, False, f"Slack HTTP {response.status_code}: {_snippet(response.text)}"


_MD_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_MD_BOLD = re.compile(r"\*\*(.+?)\*\*")
_MD_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)
_MD_QUOTE = re.compile(r"^&gt;", re.MULTILINE)


def _to_mrkdwn(markdown: str) -> str:
    """Markdown as Slack's mrkdwn: escaped &, <, >; <url|text> links; *bold*; headings as
    bold lines; tables, which Slack cannot draw, in code blocks so their columns line up."""
    text = markdown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_QUOTE.sub(">", text)
    text = _MD_LINK.sub(r"<\2|\1>", text)
    text = _MD_BOLD.sub(r"*\1*", text)
    text = _MD_HEADING.sub(lambda match: f"*{match.group(1).strip('*')}*", text)
    lines: list[str] = []
    in_table = False
    for line in text.split("\n"):
        is_row = line.lstrip().startswith("|")
        if is_row != in_table:
            lines.append("```")
            in_table = is_row
        lines.append(line)
    if in_table:
        lines.append("```")
    return "\n".join(lines)


def _chunks(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at line ends where possible."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        for piece in [line[i : i + limit] for i in range(0, len(line), limit)] or [""]:
            if current and size + 1 + len(piece) > limit:
                chunks.append("\n".join(current))
                current, size = [], 0
            size += len(piece) + (1 if current else 0)
            current.append(piece)
    chunks.append("\n".join(current))
    return [chunk for chunk in chunks if chunk.strip()]


class _BodyLimitedWebhook(_Webhook):
    """A webhook whose platform refuses request bodies over a byte limit."""

    _max_body_bytes: int

    def _fits(self, report: RenderedReport, text: str) -> bool:
        return len(self._request(report, text)[1]) <= self._max_body_bytes


class FeishuChannel(_BodyLimitedWebhook):
    """Feishu/Lark custom bot: an interactive card with a Markdown element. With a signing
    secret, the body carries `timestamp` (seconds) and `sign` = base64 of HMAC-SHA256 keyed
    with "{timestamp}\\n{secret}" over an empty message. The reply's `code` must be 0."""

    # 9499 "too many request", 11232 frequency limited.
    RATE_LIMITED_CODES = frozenset({9499, 11232})

    def __init__(
        self,
        url: str,
        retry: RetryPolicy,
        *,
        secret: str | None = None,
        max_body_bytes: int = FEISHU_MAX_BODY_BYTES,
        timeout_seconds: float = 10.0,
        name: str = "feishu",
    ) -> None:
        super().__init__(name, url, retry, timeout_seconds, secret)
        self._max_body_bytes = max_body_bytes

    def _request(self, report: RenderedReport, text: str) -> tuple[str, bytes]:
        payload: dict[str, Any] = {
            "msg_type": "interactive",
            "card": {
                "config": {"wide_screen_mode": True},
                "header": {
                    "title": {"tag": "plain_text", "content": report.title},
                    "template": "blue",
                },
                "elements": [{"tag": "markdown", "content": text}],
            },
        }
        if self._secret is not None:
            timestamp = self._timestamp_seconds()
            key = f"{timestamp}\n{self._secret}".encode()
            digest = hmac.new(key, b"", hashlib.sha256).digest()
            payload["timestamp"] = str(timestamp)
            payload["sign"] = base64.b64encode(digest).decode("ascii")
        return self._url, _json_body(payload)

    def _judge(self, response: httpx.Response) -> tuple[bool, bool, str]:
        return _judge_coded(response, "Feishu", "code", "msg", self.RATE_LIMITED_CODES)


class DingTalkChannel(_BodyLimitedWebhook):
    """DingTalk custom robot: a markdown message (title + text). With a signing secret, the
    URL gains `timestamp` (milliseconds) and `sign` = URL-encoded base64 of HMAC-SHA256 keyed
    with the secret over "{timestamp}\\n{secret}". The reply's `errcode` must be 0."""

    # 130101 "send too fast, exceed 20 times per minute", 410100 flow control.
    RATE_LIMITED_CODES = frozenset({130101, 410100})

    def __init__(
        self,
        url: str,
        retry: RetryPolicy,
        *,
        secret: str | None = None,
        max_body_bytes: int = DINGTALK_MAX_BODY_BYTES,
        timeout_seconds: float = 10.0,
        name: str = "dingtalk",
    ) -> None:
        super().__init__(name, url, retry, timeout_seconds, secret)
        self._max_body_bytes = max_body_bytes

    def _request(self, report: RenderedReport, text: str) -> tuple[str, bytes]:
        body = _json_body(
            {"msgtype": "markdown", "markdown": {"title": report.title, "text": text}}
        )
        if self._secret is None:
            return self._url, body
        timestamp = self._timestamp_seconds() * 1000
        digest = hmac.new(
            self._secret.encode(), f"{timestamp}\n{self._secret}".encode(), hashlib.sha256
        ).digest()
        sign = quote_plus(base64.b64encode(digest).decode("ascii"))
        separator = "&" if urlsplit(self._url).query else "?"
        return f"{self._url}{separator}timestamp={timestamp}&sign={sign}", body

    def _judge(self, response: httpx.Response) -> tuple[bool, bool, str]:
        return _judge_coded(response, "DingTalk", "errcode", "errmsg", self.RATE_LIMITED_CODES)


class WeComChannel(_Webhook):
    """WeCom (WeChat Work) group robot, unsigned: a markdown message whose content is at most
    4096 UTF-8 bytes. The reply's `errcode` must be 0."""

    # 45009 "api freq out of limit", -1 "system busy".
    RATE_LIMITED_CODES = frozenset({45009, -1})

    def __init__(
        self,
        url: str,
        retry: RetryPolicy,
        *,
        max_content_bytes: int = WECOM_MAX_CONTENT_BYTES,
        timeout_seconds: float = 10.0,
        name: str = "wecom",
    ) -> None:
        super().__init__(name, url, retry, timeout_seconds)
        self._max_content_bytes = max_content_bytes

    def _fits(self, report: RenderedReport, text: str) -> bool:
        return len(text.encode("utf-8")) <= self._max_content_bytes

    def _request(self, report: RenderedReport, text: str) -> tuple[str, bytes]:
        return self._url, _json_body({"msgtype": "markdown", "markdown": {"content": text}})

    def _judge(self, response: httpx.Response) -> tuple[bool, bool, str]:
        return _judge_coded(response, "WeCom", "errcode", "errmsg", self.RATE_LIMITED_CODES)


class EmailChannel:
    """E-mail over SMTP: multipart/alternative with the Markdown as text/plain and the HTML
    as text/html, the JSON attached. An HTML body over `inline_max_bytes` is sent as the
    summary with the report attached instead; a message over `max_message_bytes` (or the
    server's advertised SIZE) as the summary and link alone. `security`: 'starttls' upgrades
    a plain connection, 'tls' is TLS from the start (port 465), 'none' is for local relays."""

    def __init__(
        self,
        host: str,
        port: int,
        sender: str,
        recipients: Sequence[str],
        retry: RetryPolicy,
        *,
        security: Literal["starttls", "tls", "none"] = "starttls",
        username: str | None = None,
        password: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        inline_max_bytes: int = EMAIL_INLINE_MAX_BYTES,
        max_message_bytes: int = EMAIL_MAX_MESSAGE_BYTES,
        timeout_seconds: float = 30.0,
        name: str = "email",
    ) -> None:
        if not recipients:
            raise ValueError("an e-mail channel needs at least one recipient")
        self.name = name
        self._host = host
        self._port = port
        self._sender = sender
        self._recipients = list(recipients)
        self._retry = retry
        self._security = security
        self._username = username
        self._password = password
        self._ssl_context = ssl_context or ssl.create_default_context()
        self._inline_max_bytes = inline_max_bytes
        self._max_message_bytes = max_message_bytes
        self._timeout_seconds = timeout_seconds
        self._scrub = _Scrubber([], [password])

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        # One Message-ID for every attempt, so a copy resent after a lost reply is a duplicate
        # that mail systems can recognise.
        message_id = make_msgid(domain=self._sender.rpartition("@")[2] or "localhost")
        composed = self._compose(report, message_id, self._max_message_bytes)
        if composed is None:
            return _unfittable(self.name)
        outcome, attempts = _with_retries(
            self._retry, lambda: self._send(report, message_id, *composed)
        )
        return _result(self.name, outcome, attempts, self._retry.clock, self._scrub)

    def _send(
        self, report: RenderedReport, message_id: str, form: Form, message: EmailMessage
    ) -> _Attempt:
        try:
            with self._connect() as smtp:
                if self._security == "starttls":
                    smtp.starttls(context=self._ssl_context)
                if self._username is not None:
                    smtp.login(self._username, self._password or "")
                # After STARTTLS the server's extensions are asked for again.
                smtp.ehlo_or_helo_if_needed()
                server_limit = int(smtp.esmtp_features.get("size", "0") or "0")
                if server_limit and len(message.as_bytes(policy=SMTP_POLICY)) > server_limit:
                    composed = self._compose(report, message_id, server_limit)
                    if composed is None:
                        return _Attempt(
                            False,
                            False,
                            f"the server takes messages of at most {server_limit} bytes, "
                            "less than even the summary",
                            "summary",
                        )
                    form, message = composed
                refused = smtp.send_message(
                    message, from_addr=self._sender, to_addrs=self._recipients
                )
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            return _Attempt(
                False,
                all(400 <= code < 500 for code in codes),
                f"every recipient refused: {_refusals(exc.recipients)}",
                form,
            )
        except smtplib.SMTPResponseException as exc:
            reply = exc.smtp_error
            text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
            return _Attempt(
                False, 400 <= exc.smtp_code < 500, f"SMTP {exc.smtp_code}: {_snippet(text)}", form
            )
        except smtplib.SMTPNotSupportedError as exc:
            return _Attempt(False, False, f"the server does not support it: {exc}", form)
        except ssl.SSLError as exc:
            return _Attempt(False, False, f"TLS failed: {exc}", form)
        except OSError as exc:  # connection refused or lost, timeouts; SMTPException too
            return _Attempt(False, True, f"{type(exc).__name__}: {exc}", form)
        if refused:
            return _Attempt(
                False,
                False,
                f"delivered to {len(self._recipients) - len(refused)} of "
                f"{len(self._recipients)} recipients; refused: {_refusals(refused)}",
                form,
            )
        return _Attempt(True, False, "", form)

    def _connect(self) -> smtplib.SMTP:
        if self._security == "tls":
            return smtplib.SMTP_SSL(
                self._host, self._port, timeout=self._timeout_seconds, context=self._ssl_context
            )
        return smtplib.SMTP(self._host, self._port, timeout=self._timeout_seconds)

    def _compose(
        self, report: RenderedReport, message_id: str, limit_bytes: int
    ) -> tuple[Form, EmailMessage] | None:
        forms: list[Form] = ["attachment", "summary"]
        if len(report.html.encode("utf-8")) <= self._inline_max_bytes:
            forms.insert(0, "full")
        for form in forms:
            message = self._message(report, message_id, form)
            if len(message.as_bytes(policy=SMTP_POLICY)) <= limit_bytes:
                return form, message
        return None

    def _message(self, report: RenderedReport, message_id: str, form: Form) -> EmailMessage:
        message = EmailMessage()
        message["Subject"] = report.title
        message["From"] = self._sender
        message["To"] = ", ".join(self._recipients)
        message["Date"] = format_datetime(self._retry.clock.now())
        message["Message-ID"] = message_id
        if form == "full":
            message.set_content(report.markdown, charset="utf-8")
            message.add_alternative(report.html, subtype="html", charset="utf-8")
        else:
            message.set_content(report.summary_markdown, charset="utf-8")
            message.add_alternative(_summary_html(report), subtype="html", charset="utf-8")
        if form == "attachment":
            message.add_attachment(
                report.html.encode("utf-8"),
                maintype="text",
                subtype="html",
                filename=f"{report.file_stem}.html",
            )
        if form != "summary":
            message.add_attachment(
                report.json_text.encode("utf-8"),
                maintype="application",
                subtype="json",
                filename=f"{report.file_stem}.json",
            )
        return message


def _summary_html(report: RenderedReport) -> str:
    link = (
        f'<p><a href="{html.escape(report.link)}">{html.escape(report.link)}</a></p>'
        if report.link
        else ""
    )
    return (
        f'<!DOCTYPE html><html lang="{html.escape(report.language)}"><head><meta charset="utf-8">'
        f"<title>{html.escape(report.title)}</title></head><body>"
        f'<pre style="white-space: pre-wrap; font-family: inherit">'
        f"{html.escape(report.summary_markdown)}</pre>{link}</body></html>"
    )


def _refusals(refused: dict[str, tuple[int, bytes]]) -> str:
    return "; ".join(
        f"{address} ({code} {_snippet(reply.decode('utf-8', 'replace'))})"
        for address, (code, reply) in refused.items()
    )
