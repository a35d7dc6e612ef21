"""A report handed to every channel in turn: its home directory first, then the others;
one channel's failure, or bug, never costs another its turn."""

from __future__ import annotations

from collections.abc import Sequence

from observer.delivery.base import Channel, DeliveryResult, RenderedReport
from observer.delivery.directory import DirectoryChannel
from observer.logging_setup import get_logger

_log = get_logger("observer.delivery")


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
