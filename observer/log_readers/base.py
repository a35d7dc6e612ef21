"""What the log-loss check asks of a log backend, in domain types.

A reader returns the lines of one log-canary run in the order the backend delivers them
(that order is what out-of-order is judged on). It may return lines of other runs or other
programs: the detector keeps only exact canary lines of the run. A backend that cannot be
read raises BackendError; an empty answer means the backend holds none of the run's lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class DeliveredLine:
    """One line as the backend holds it.

    `delivered_at`: when the pipeline's end received or indexed it (a collector's receive
    time, an ingest timestamp), if the backend records one. `backend_timestamp`: the time the
    backend files the line under (Loki's entry timestamp, the index's @timestamp); shippers
    usually set it when they read the line, so it bounds delivery time from below."""

    text: str
    source: str  # file name, stream labels, index: where a person finds the line
    delivered_at: datetime | None = None
    backend_timestamp: datetime | None = None


class LogReader(Protocol):
    def read(self, run_id: str, since: datetime, until: datetime) -> list[DeliveredLine]:
        """The run's lines held between `since` and `until` (inclusive), in delivery order;
        the backend query filters on `run_token(run_id)` where the backend can."""
        ...


def run_token(run_id: str) -> str:
    """The text every canary line of the run carries, for backend-side filtering."""
    return f"run={run_id}"


def split_timestamp(line: str) -> tuple[datetime | None, str]:
    """A leading RFC 3339 timestamp and the rest of the line, as collectors (rsyslog's
    date-rfc3339) and the Kubernetes log API (timestamps=true) write them; (None, line)
    when the line does not start with a timezone-aware timestamp."""
    head, sep, rest = line.partition(" ")
    if not sep:
        return None, line
    try:
        at = datetime.fromisoformat(head)
    except ValueError:
        return None, line
    if at.tzinfo is None:
        return None, line
    return at, rest
