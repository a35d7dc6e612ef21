"""Feishu/Lark custom bots: the report as an interactive card, signed when a secret is set."""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from observer.delivery.base import RenderedReport, RetryPolicy
from observer.delivery.webhook import BodyLimitedWebhook, Reply, json_body, judge_coded

FEISHU_MAX_BODY_BYTES = 20_000


class FeishuChannel(BodyLimitedWebhook):
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
        return self._url, json_body(payload)

    def _judge(self, response: Reply) -> tuple[bool, bool, str]:
        return judge_coded(response, "Feishu", "code", "msg", self.RATE_LIMITED_CODES)
