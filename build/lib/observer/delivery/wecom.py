"""WeCom (WeChat Work) group robots: the report as a markdown message."""

from __future__ import annotations

from observer.delivery.base import RenderedReport, RetryPolicy
from observer.delivery.webhook import Reply, Webhook, json_body, judge_coded

WECOM_MAX_CONTENT_BYTES = 4096


class WeComChannel(Webhook):
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
        return self._url, json_body({"msgtype": "markdown", "markdown": {"content": text}})

    def _judge(self, response: Reply) -> tuple[bool, bool, str]:
        return judge_coded(response, "WeCom", "errcode", "errmsg", self.RATE_LIMITED_CODES)
