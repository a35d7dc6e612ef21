"""What a channel may say about a delivery: secrets (webhook tokens, signing secrets,
passwords) masked, a platform's reply cut short."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

# Webhook URLs carry their credential as a path segment or query value (Slack's last segment,
# Feishu's hook id, DingTalk's access_token, WeCom's key); none is shorter than this, while
# the words around them ("services", "send") are.
_MIN_TOKEN_CHARS = 16
_SNIPPET_CHARS = 300


class Scrubber:
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


def snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[:_SNIPPET_CHARS] + "…"
