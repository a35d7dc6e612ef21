"""E-mail over SMTP: the report inline, as a summary with the report attached, or as the
summary and link alone, whichever fits; the only module that talks SMTP."""

from __future__ import annotations

import html
import smtplib
import ssl
from collections.abc import Sequence
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import format_datetime, make_msgid
from typing import Literal

from observer.delivery.base import DeliveryResult, Form, RenderedReport, RetryPolicy
from observer.delivery.fit import unfittable
from observer.delivery.retry import Attempt, delivery_result, with_retries
from observer.delivery.scrub import Scrubber, snippet

# Gmail clips an HTML body beyond 102 KB behind a "view entire message" link.
EMAIL_INLINE_MAX_BYTES = 100_000
EMAIL_MAX_MESSAGE_BYTES = 10_000_000


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
        self._scrub = Scrubber([], [password])

    def deliver(self, report: RenderedReport) -> DeliveryResult:
        # One Message-ID for every attempt, so a copy resent after a lost reply is a duplicate
        # that mail systems can recognise.
        message_id = make_msgid(domain=self._sender.rpartition("@")[2] or "localhost")
        composed = self._compose(report, message_id, self._max_message_bytes)
        if composed is None:
            return unfittable(self.name)
        outcome, attempts = with_retries(
            self._retry, lambda: self._send(report, message_id, *composed)
        )
        return delivery_result(self.name, outcome, attempts, self._retry.clock, self._scrub)

    def _send(
        self, report: RenderedReport, message_id: str, form: Form, message: EmailMessage
    ) -> Attempt:
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
                        return Attempt(
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
            return Attempt(
                False,
                all(400 <= code < 500 for code in codes),
                f"every recipient refused: {_refusals(exc.recipients)}",
                form,
            )
        except smtplib.SMTPResponseException as exc:
            reply = exc.smtp_error
            text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
            return Attempt(
                False, 400 <= exc.smtp_code < 500, f"SMTP {exc.smtp_code}: {snippet(text)}", form
            )
        except smtplib.SMTPNotSupportedError as exc:
            return Attempt(False, False, f"the server does not support it: {exc}", form)
        except ssl.SSLError as exc:
            return Attempt(False, False, f"TLS failed: {exc}", form)
        except OSError as exc:  # connection refused or lost, timeouts; SMTPException too
            return Attempt(False, True, f"{type(exc).__name__}: {exc}", form)
        if refused:
            return Attempt(
                False,
                False,
                f"delivered to {len(self._recipients) - len(refused)} of "
                f"{len(self._recipients)} recipients; refused: {_refusals(refused)}",
                form,
            )
        return Attempt(True, False, "", form)

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
        f"{address} ({code} {snippet(reply.decode('utf-8', 'replace'))})"
        for address, (code, reply) in refused.items()
    )
