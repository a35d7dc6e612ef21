"""Hands a report that was just written to the configured channels, and records what each
channel did in the store: the files in reports.output_dir are its home (written again
first, atomically and identically), then each chat or mailbox gets it, in full or as a
short summary with a link when it does not fit."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from observer.clock import Clock
from observer.delivery.base import Channel, DeliveryResult, RenderedReport, ReportKind, RetryPolicy
from observer.delivery.dingtalk import DingTalkChannel
from observer.delivery.directory import DirectoryChannel
from observer.delivery.dispatch import deliver_all
from observer.delivery.email import EmailChannel
from observer.delivery.feishu import FeishuChannel
from observer.delivery.slack import SlackChannel
from observer.delivery.wecom import WeComChannel
from observer.metrics import ReportMetrics
from observer.records import DELIVERY_FAILED, StoredDelivery
from observer.settings import Settings
from observer.settings.reports import DeliverySettings
from observer.storage.store import Store

# The headline figures a short summary shows, as the JSON report names them.
SUMMARY_KEYS = (
    "tasks_total",
    "tasks_failed",
    "queue_wait_seconds_avg",
    "gpu_utilization_avg",
    "alerts_total",
    "manual_interventions_total",
    "findings_opened",
    "findings_still_open",
    "blind_seconds",
    "recommendation",
)


def configured_channels(cfg: DeliverySettings) -> tuple[str, ...]:
    """The names of the channels `channels` builds: where reports go besides the directory."""
    settings = (
        ("slack", cfg.slack_url),
        ("feishu", cfg.feishu_url),
        ("dingtalk", cfg.dingtalk_url),
        ("wecom", cfg.wecom_url),
        ("email", cfg.email),
    )
    return tuple(name for name, setting in settings if setting)


def channels(cfg: DeliverySettings, clock: Clock, stop: threading.Event) -> list[Channel]:
    retry = RetryPolicy(clock, stop, cfg.backoff_seconds)
    timeout = cfg.timeout_seconds
    found: list[Channel] = []
    if cfg.slack_url:
        found.append(SlackChannel(cfg.slack_url.get_secret_value(), retry, timeout_seconds=timeout))
    if cfg.feishu_url:
        secret = cfg.feishu_secret.get_secret_value() if cfg.feishu_secret else None
        found.append(
            FeishuChannel(
                cfg.feishu_url.get_secret_value(), retry, secret=secret, timeout_seconds=timeout
            )
        )
    if cfg.dingtalk_url:
        secret = cfg.dingtalk_secret.get_secret_value() if cfg.dingtalk_secret else None
        found.append(
            DingTalkChannel(
                cfg.dingtalk_url.get_secret_value(), retry, secret=secret, timeout_seconds=timeout
            )
        )
    if cfg.wecom_url:
        found.append(WeComChannel(cfg.wecom_url.get_secret_value(), retry, timeout_seconds=timeout))
    if cfg.email:
        mail = cfg.email
        found.append(
            EmailChannel(
                mail.host,
                mail.port,
                mail.sender,
                mail.recipients,
                retry,
                security=mail.security,
                username=mail.username,
                password=mail.password.get_secret_value() if mail.password else None,
            )
        )
    return found


def deliver_written(
    paths: Sequence[Path],
    settings: Settings,
    clock: Clock,
    stop: threading.Event,
    store: Store,
    metrics: ReportMetrics | None = None,
) -> list[DeliveryResult]:
    """Deliver the report whose files (md, html, json, as publish writes them) are `paths`,
    and record each channel's result in the store."""
    report = _for_delivery(paths, settings)
    cfg = settings.reports.delivery
    results = deliver_all(
        report, DirectoryChannel(settings.reports.output_dir, clock), channels(cfg, clock, stop)
    )
    store.add_deliveries(_records(report.file_stem, results, clock.now()))
    if metrics is not None:
        for result in results:
            metrics.report_deliveries_total.labels(result.channel, _outcome(result)).inc()
    return results


def _outcome(result: DeliveryResult) -> str:
    """What a channel took ("full", "summary", "attachment"), or DELIVERY_FAILED."""
    return result.form if result.ok and result.form else DELIVERY_FAILED


def _records(report: str, results: Sequence[DeliveryResult], now: datetime) -> list[StoredDelivery]:
    """Each channel's result as stored; a failed one is recorded when it gave up (`now`)."""
    return [
        StoredDelivery(
            at=result.delivered_at or now,
            report=report,
            channel=result.channel,
            outcome=_outcome(result),
            attempts=result.attempts,
            detail=result.detail,
        )
        for result in results
    ]


def _for_delivery(paths: Sequence[Path], settings: Settings) -> RenderedReport:
    markdown, html, json_text = (p.read_text(encoding="utf-8") for p in paths)
    data: dict[str, Any] = json.loads(json_text)
    kind: ReportKind = "verdict" if data["report"] == "verdict" else "daily"
    label = paths[0].stem.split("-", 1)[1]
    base = settings.reports.delivery.public_base_url
    link = f"{base.rstrip('/')}/{paths[1].name}" if base else None
    lines = [f"**{data['title']}**", ""]
    lines += [f"- {key}: {data[key]}" for key in SUMMARY_KEYS if data.get(key) is not None]
    if link:
        lines += ["", link]
    return RenderedReport(
        kind=kind,
        title=str(data["title"]),
        label=label,
        language=str(data["language"]),
        markdown=markdown,
        html=html,
        json_text=json_text,
        summary_markdown="\n".join(lines),
        link=link,
    )
