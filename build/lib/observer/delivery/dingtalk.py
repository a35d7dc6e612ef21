"""DingTalk custom robots: the report as a markdown message, signed when a secret is set."""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import quote_plus, urlsplit

from observer.delivery.base import RenderedReport, RetryPolicy
from observer.delivery.webhook import BodyLimitedWebhook, Reply, json_body, judge_coded

DINGTALK_MAX_BODY_BYTES = 20_000


class DingTalkChannel(BodyLimitedWebhook):
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
        body = json_body({"msgtype": "markdown", "markdown": {"title": report.title, "text": text}})
        if self._secret is None:
            return self._url, body
        timestamp = self._timestamp_seconds() * 1000
        digest = hmac.new(
            self._secret.encode(), f"{timestamp}\n{self._secret}".encode(), hashlib.sha256
        ).digest()
        sign = quote_plus(base64.b64encode(digest).decode("ascii"))
        separator = "&" if urlsplit(self._url).query else "?"
        return f"{self._url}{separator}timestamp={timestamp}&sign={sign}", body

    def _judge(self, response: Reply) -> tuple[bool, bool, str]:
        return judge_coded(response, "DingTalk", "errcode", "errmsg", self.RATE_LIMITED_CODES)
