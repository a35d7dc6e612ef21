"""Grafana Loki through `GET /loki/api/v1/query_range`: the only module that knows Loki's API.

Pages forward in time: each next query starts at the last timestamp of the page before, and
the entries at that timestamp already read are skipped (logcli does the same), so entries
sharing a nanosecond are neither lost nor doubled between pages. Loki itself keeps one of
identical entries (same stream, timestamp and line), so a duplicate the pipeline delivers
with the same timestamp is invisible here; re-sent lines a shipper stamps anew are not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from observer.errors import BackendError
from observer.log_readers.base import DeliveredLine, run_token

QUERY_RANGE_PATH = "/loki/api/v1/query_range"

# (stream labels, timestamp ns, line): what identifies one entry to Loki
_Entry = tuple[str, int, str]


class LokiReader:
    def __init__(
        self,
        base_url: str,
        selector: str,
        *,
        page_limit: int = 5000,
        timeout_seconds: float = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """`selector`: the LogQL stream selector holding canary output, e.g.
        '{namespace=~"team-.*", container="probe"}'. `page_limit` at most Loki's
        max_entries_limit_per_query (5000 by default). `headers`: X-Scope-OrgID for a
        multi-tenant Loki, Authorization."""
        self._base_url = base_url
        self._selector = selector
        self._page_limit = page_limit
        self._timeout_seconds = timeout_seconds
        self._headers = dict(headers or {})

    def read(self, run_id: str, since: datetime, until: datetime) -> list[DeliveredLine]:
        # LogQL strings follow Go's quoting, which JSON string escaping satisfies
        query = f"{self._selector} |= {json.dumps(run_token(run_id))}"
        end_ns = _ns(until) + 1  # Loki's end is exclusive; `until` is inclusive
        start_ns = _ns(since)
        lines: list[DeliveredLine] = []
        at_start: set[_Entry] = set()  # entries at start_ns already taken
        with httpx.Client(
            base_url=self._base_url, timeout=self._timeout_seconds, headers=self._headers
        ) as client:
            while True:
                page = self._page(client, query, start_ns, end_ns)
                fresh = [e for e in page if e not in at_start]
                lines += [
                    DeliveredLine(line, labels, backend_timestamp=_from_ns(ts))
                    for labels, ts, line in fresh
                ]
                if len(page) < self._page_limit:
                    return lines
                if not fresh:
                    raise BackendError(
                        f"{self._page_limit} or more entries share one timestamp "
                        f"({start_ns} ns): raise the page limit"
                    )
                last_ns = page[-1][1]
                if last_ns != start_ns:
                    at_start = set()
                at_start |= {e for e in page if e[1] == last_ns}
                start_ns = last_ns

    def _page(self, client: httpx.Client, query: str, start_ns: int, end_ns: int) -> list[_Entry]:
        params: dict[str, str | int] = {
            "query": query,
            "start": start_ns,
            "end": end_ns,
            "limit": self._page_limit,
            "direction": "forward",
        }
        try:
            response = client.get(QUERY_RANGE_PATH, params=params)
        except httpx.HTTPError as exc:
            raise BackendError(f"Loki at {self._base_url} is unreachable: {exc}") from exc
        if response.status_code != 200:
            raise BackendError(
                f"Loki answered {response.status_code} to {query!r}: {response.text[:300]}"
            )
        try:
            return _entries(response.json())
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise BackendError(f"Loki's answer is not a streams result: {exc}") from exc


def _entries(body: Any) -> list[_Entry]:
    """A page's entries across streams in time order (each stream comes sorted; ties keep
    Loki's stream order)."""
    if body["status"] != "success":
        raise ValueError(f"status {body['status']!r}")
    data = body["data"]
    if data["resultType"] != "streams":
        raise ValueError(f"resultType {data['resultType']!r}")
    entries: list[_Entry] = []
    for stream in data["result"]:
        labels = _render_labels(stream["stream"])
        # an entry is [ts, line] or [ts, line, structured metadata]
        entries += [(labels, int(value[0]), str(value[1])) for value in stream["values"]]
    entries.sort(key=lambda e: e[1])
    return entries


def _render_labels(labels: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())) + "}"


def _ns(at: datetime) -> int:
    delta = at - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _from_ns(ns: int) -> datetime:
    seconds, rest = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1_000)
