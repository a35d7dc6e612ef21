"""What every delivery channel shares: the report as rendered for delivery, the Channel
protocol, the result a channel answers instead of raising, and the retry policy.

Each channel fits the report to its platform's size limit (the whole report, else the short
summary with a link), retries transient failures on a finite backoff, reads the platform's
error code, and answers a DeliveryResult instead of raising. Webhook tokens, signing secrets
and passwords never reach a result or a log line."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from observer.clock import Clock

ReportKind = Literal["daily", "verdict"]
Form = Literal["full", "summary", "attachment"]
"""What a channel sent: the whole report, the short summary with a link, or the summary with
the report attached (e-mail)."""

DEFAULT_BACKOFF_SECONDS = (1.0, 5.0, 30.0)
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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
