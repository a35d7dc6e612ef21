"""slurmctld's own count of the requests it served (`sdiag`), to tell what a reader cost it."""

from __future__ import annotations

import re

_COUNT = re.compile(r"^\s+(REQUEST_\w+)\s+\(\s*\d+\)\s+count:(\d+)", re.MULTILINE)


def requests(sdiag: str) -> dict[str, int]:
    """The count of each request type a client sends, from what sdiag printed, but sdiag's own
    (REQUEST_STATS_INFO); slurmd's messages to slurmctld are MESSAGE_*."""
    by_type = sdiag.split("by message type", 1)[1].split("\n\n", 1)[0]
    return {kind: int(n) for kind, n in _COUNT.findall(by_type) if kind != "REQUEST_STATS_INFO"}


def counted_since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The requests served between two counts, by type."""
    return {kind: n - before.get(kind, 0) for kind, n in after.items() if n != before.get(kind, 0)}
