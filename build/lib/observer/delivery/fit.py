"""Fitting a report to a platform's size limit: the whole report, else the short summary with
its link, cut short if need be; and text cut into pieces of a limited size."""

from __future__ import annotations

from collections.abc import Callable

from observer.delivery.base import DeliveryResult, Form, RenderedReport


def fit(report: RenderedReport, fits: Callable[[str], bool]) -> tuple[str, Form] | None:
    """The whole Markdown if it fits, else the summary, else the summary cut short with the
    link kept whole; None if not even that fits. `fits` measures what the platform limits
    (UTF-8 bytes or characters), so Chinese text is judged by its real size."""
    if fits(report.markdown):
        return report.markdown, "full"
    if fits(report.summary_markdown):
        return report.summary_markdown, "summary"
    tail = f"…\n\n{report.link}" if report.link else "…"
    if not fits(tail):
        return None
    summary = report.summary_markdown
    # Cutting characters, never bytes, keeps every multi-byte character whole.
    low, high = 0, len(summary)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(summary[:middle] + tail):
            low = middle
        else:
            high = middle - 1
    return summary[:low] + tail, "summary"


def unfittable(name: str) -> DeliveryResult:
    return DeliveryResult(
        name, False, 0, "even a shortened summary exceeds the size limit", None, None
    )


def chunks(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at line ends where possible."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        for piece in [line[i : i + limit] for i in range(0, len(line), limit)] or [""]:
            if current and size + 1 + len(piece) > limit:
                chunks.append("\n".join(current))
                current, size = [], 0
            size += len(piece) + (1 if current else 0)
            current.append(piece)
    chunks.append("\n".join(current))
    return [chunk for chunk in chunks if chunk.strip()]
