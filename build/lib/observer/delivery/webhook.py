"""What the chat webhooks share: fit the report, sign and post it as JSON over HTTP, read the
platform's reply and error code, retry what may pass later. The only module of the channels
that talks HTTP: each platform's module judges a Reply."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import httpx

from observer.delivery.base import DeliveryResult, Form, RenderedReport, RetryPolicy
from observer.delivery.fit import fit, unfittable
from observer.delivery.retry import Attempt, delivery_result, with_retries
from observer.delivery.scrub import Scrubber, snippet

_JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}


@dataclass(frozen=True)
class Reply:
    """A platform's answer to a post that is neither 5xx nor 429."""

    status_code: int
    text: str
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code <= 299

    def json(self) -> Any:
        return json.loads(self.content)


def _retry_after_seconds(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "0")))
    except ValueError:  # an HTTP date: fall back to our own schedule
        return 0.0


def json_body(payload: dict[str, Any]) -> bytes:
    # Unescaped UTF-8: Chinese costs 3 bytes a character, not 6 as a \\u escape.
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def judge_coded(
    response: Reply,
    platform: str,
    code_key: str,
    message_key: str,
    rate_limited: frozenset[int],
) -> tuple[bool, bool, str]:
    """Read a reply that carries an error code in its JSON body, whatever the HTTP status."""
    try:
        reply = response.json()
    except ValueError:
        return False, False, f"{platform} HTTP {response.status_code}: {snippet(response.text)}"
    code = reply.get(code_key) if isinstance(reply, dict) else None
    if code == 0 and response.is_success:
        return True, False, ""
    message = reply.get(message_key, "") if isinstance(reply, dict) else ""
    return (
        False,
        code in rate_limited,
        f"{platform} {code_key} {code}: {snippet(str(message))} (HTTP {response.status_code})",
    )


class Webhook(ABC):
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
        self._scrub = Scrubber([url], [secret])

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        fitted = fit(report, lambda text: self._fits(report, text))
        if fitted is None:
            return unfittable(self.name)
        text, form = fitted
        with httpx.Client(timeout=self._timeout_seconds) as client:
            outcome, attempts = with_retries(
                self._retry, lambda: self._post(client, report, text, form)
            )
        return delivery_result(self.name, outcome, attempts, self._retry.clock, self._scrub)

    def _post(self, client: httpx.Client, report: RenderedReport, text: str, form: Form) -> Attempt:
        # Built per attempt: a signature carries the time it was made.
        url, body = self._request(report, text)
        try:
            response = client.post(url, content=body, headers=_JSON_HEADERS)
        except httpx.TransportError as exc:
            return Attempt(False, True, f"{type(exc).__name__}: {exc}", form)
        except (httpx.RequestError, httpx.InvalidURL) as exc:
            return Attempt(False, False, f"{type(exc).__name__}: {exc}", form)
        if response.status_code == 429 or response.status_code >= 500:
            return Attempt(
                False,
                True,
                f"HTTP {response.status_code}: {snippet(response.text)}",
                form,
                _retry_after_seconds(response),
            )
        ok, retry, detail = self._judge(
            Reply(response.status_code, response.text, response.content)
        )
        return Attempt(ok, retry, detail, form)

    @abstractmethod
    def _request(self, report: RenderedReport, text: str) -> tuple[str, bytes]:
        """The URL and JSON body that post `text` (the report or its summary)."""

    @abstractmethod
    def _fits(self, report: RenderedReport, text: str) -> bool:
        """Whether posting `text` stays within the platform's limits."""

    @abstractmethod
    def _judge(self, response: Reply) -> tuple[bool, bool, str]:
        """(ok, worth retrying, detail) from a reply that is neither 5xx nor 429."""

    def _timestamp_seconds(self) -> int:
        return int(self._retry.clock.now().timestamp())


class BodyLimitedWebhook(Webhook):
    """A webhook whose platform refuses request bodies over a byte limit."""

    _max_body_bytes: int

    def _fits(self, report: RenderedReport, text: str) -> bool:
        return len(self._request(report, text)[1]) <= self._max_body_bytes
