"""Slack incoming webhooks: the report as Block Kit mrkdwn sections."""

from __future__ import annotations

import re
from typing import Any

from observer.delivery.base import RenderedReport, RetryPolicy
from observer.delivery.fit import chunks
from observer.delivery.scrub import snippet
from observer.delivery.webhook import Reply, Webhook, json_body

SLACK_SECTION_MAX_CHARS = 3000
SLACK_MAX_BLOCKS = 50
SLACK_HEADER_MAX_CHARS = 150


class SlackChannel(Webhook):
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
        return chunks(_to_mrkdwn(text), SLACK_SECTION_MAX_CHARS)

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
        return self._url, json_body({"text": report.title, "blocks": blocks})

    def _judge(self, response: Reply) -> tuple[bool, bool, str]:
        if response.is_success and response.text.strip() == "ok":
            return True, False, ""
        return False, False, f"Slack HTTP {response.status_code}: {snippet(response.text)}"


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
