"""Elasticsearch or OpenSearch through `POST /<index>/_search`: the only module that knows
their search API (the request and answer used here are the same in both).

Pages with search_after on the timestamp alone: a unique tie-breaker would need a point in
time, whose API differs between the two, and sorting on _id is disabled in Elasticsearch 8.
So each next page asks for timestamps at or after the last one (search_after last - 1, the
sort value being an integer count of milli- or nanoseconds) and skips the documents at that
timestamp already read, by _id."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx

from observer.errors import BackendError
from observer.log_readers.base import DeliveredLine, run_token

# ISO 8601 with up to nine fractional digits, whatever the field's mapped format
_DATE_FORMAT = "strict_date_optional_time_nanos"


class ElasticsearchReader:
    def __init__(
        self,
        base_url: str,
        index: str,
        *,
        message_field: str = "message",
        timestamp_field: str = "@timestamp",
        delivered_field: str | None = None,
        page_size: int = 1000,
        timeout_seconds: float = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """`index`: an index, alias, data stream or pattern (logs-*). `message_field` must
        be analysed text: match_phrase on a keyword-only field matches no line.
        `timestamp_field`: the time documents are filed under (the shipper's).
        `delivered_field`: an ingest time set by the cluster, e.g. event.ingested from an
        ingest pipeline, if there is one. `headers`: Authorization (Basic or ApiKey)."""
        self._base_url = base_url
        self._index = index
        self._message_field = message_field
        self._timestamp_field = timestamp_field
        self._delivered_field = delivered_field
        self._page_size = page_size
        self._timeout_seconds = timeout_seconds
        self._headers = dict(headers or {})

    def read(self, run_id: str, since: datetime, until: datetime) -> list[DeliveredLine]:
        body: dict[str, Any] = {
            "size": self._page_size,
            "query": {
                "bool": {
                    "filter": [
                        {"match_phrase": {self._message_field: run_token(run_id)}},
                        {
                            "range": {
                                self._timestamp_field: {
                                    "gte": since.isoformat(),
                                    "lte": until.isoformat(),
                                }
                            }
                        },
                    ]
                }
            },
            "sort": [{self._timestamp_field: {"order": "asc"}}],
            "_source": False,
            "fields": [
                self._message_field,
                *(
                    {"field": f, "format": _DATE_FORMAT}
                    for f in (self._timestamp_field, self._delivered_field)
                    if f is not None
                ),
            ],
            "track_total_hits": False,
        }
        lines: list[DeliveredLine] = []
        at_last: set[str] = set()  # _ids of the documents at the last sort value read
        last: int | None = None
        with httpx.Client(
            base_url=self._base_url, timeout=self._timeout_seconds, headers=self._headers
        ) as client:
            while True:
                if last is not None:
                    body["search_after"] = [last - 1]
                hits = self._page(client, body)
                fresh = [h for h in hits if h["_id"] not in at_last]
                lines += [self._line(h) for h in fresh]
                if len(hits) < self._page_size:
                    return lines
                if not fresh:
                    raise BackendError(
                        f"{self._page_size} or more documents share one timestamp in "
                        f"{self._index}: raise the page size"
                    )
                page_last = _sort_value(hits[-1])
                if page_last != last:
                    at_last = set()
                at_last |= {h["_id"] for h in hits if _sort_value(h) == page_last}
                last = page_last

    def _page(self, client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            response = client.post(f"/{self._index}/_search", json=body)
        except httpx.HTTPError as exc:
            raise BackendError(f"{self._base_url} is unreachable: {exc}") from exc
        if response.status_code != 200:
            raise BackendError(
                f"search of {self._index} answered {response.status_code}: {response.text[:300]}"
            )
        try:
            answer = response.json()
            shards = answer.get("_shards", {})
            # a partial answer would read as lost lines
            if answer.get("timed_out") or shards.get("failed", 0):
                raise BackendError(
                    f"search of {self._index} was partial (timed out: "
                    f"{answer.get('timed_out')}, failed shards: {shards.get('failed', 0)})"
                )
            hits: list[dict[str, Any]] = answer["hits"]["hits"]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackendError(f"search of {self._index} gave no hits list: {exc}") from exc
        return hits

    def _line(self, hit: Mapping[str, Any]) -> DeliveredLine:
        fields = hit.get("fields", {})
        try:
            text = fields[self._message_field][0]
            if not isinstance(text, str):
                raise TypeError(f"{self._message_field} is {type(text).__name__}")
            return DeliveredLine(
                text,
                str(hit["_index"]),
                delivered_at=_date(fields, self._delivered_field),
                backend_timestamp=_date(fields, self._timestamp_field),
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise BackendError(f"document {hit.get('_id')} is not a log line: {exc}") from exc


def _sort_value(hit: Mapping[str, Any]) -> int:
    try:
        return int(hit["sort"][0])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise BackendError(f"document {hit.get('_id')} has no sort value: {exc}") from exc


def _date(fields: Mapping[str, Any], name: str | None) -> datetime | None:
    if name is None or name not in fields:
        return None
    return datetime.fromisoformat(fields[name][0])
