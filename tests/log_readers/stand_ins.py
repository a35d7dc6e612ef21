"""Loki and Elasticsearch as small HTTP servers on 127.0.0.1 that answer as the real ones do
for the requests the readers send (filtering, time order, limits and pagination), and take
lines in through the real ingest APIs (Loki's push, Elasticsearch's index API), so a test can
feed them as a shipper would. Shapes from the APIs' documentation: Loki's HTTP API
(query_range, push) and Elasticsearch's _search (search_after, fields) and _doc."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


def ns(at: datetime) -> int:
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1e6) * 1000


def millis(at: datetime) -> int:
    return ns(at) // 1_000_000


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"  # strict_date_optional_time_nanos


# --- a local HTTP server --------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


Answer = tuple[int, Any]  # status, JSON body (a str is sent as text; 204 sends none)


@dataclass
class Server:
    url: str
    requests: list[Request] = field(default_factory=list)


def start_server(answer: Callable[[Request], Answer]) -> tuple[Server, ThreadingHTTPServer]:
    """A server answering every request with `answer`; the caller shuts it down."""
    state = Server(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._handle(None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self._handle(json.loads(self.rfile.read(length)))

        def _handle(self, body: Any) -> None:
            url = urlsplit(self.path)
            request = Request(
                self.command,
                url.path,
                {k: v[0] for k, v in parse_qs(url.query).items()},
                {k.lower(): v for k, v in self.headers.items()},
                body,
            )
            state.requests.append(request)
            status, payload = answer(request)
            data = b"" if status == 204 else _encode(payload)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    return state, server


def _encode(payload: Any) -> bytes:
    return (payload if isinstance(payload, str) else json.dumps(payload)).encode()


# --- Loki ----------------------------------------------------------------------------------


class FakeLoki:
    """Streams of (ns, line) entries by pod; query_range as Loki answers it: the selector must
    be the known one, `|= "..."` filters, [start, end) in time order across streams, at most
    `limit` entries. POST /loki/api/v1/push adds entries as a shipper (Promtail, Alloy) sends
    them: {"streams": [{"stream": {labels}, "values": [["<ns>", "<line>"], ...]}]}."""

    SELECTOR = '{namespace="research", container="probe"}'

    def __init__(self, streams: dict[str, list[tuple[int, str]]] | None = None) -> None:
        self.streams = streams if streams is not None else {}  # pod name -> entries

    def __call__(self, request: Request) -> Answer:
        if request.path == "/loki/api/v1/push" and request.method == "POST":
            for stream in request.body["streams"]:
                stored = self.streams.setdefault(stream["stream"]["pod"], [])
                stored += [(int(ts), line) for ts, line in stream["values"]]
            return 204, None
        if request.path != "/loki/api/v1/query_range":
            return 404, "404 page not found"
        match = re.fullmatch(r"(\{.*\}) \|= (\".*\")", request.query["query"])
        if match is None or match[1] != self.SELECTOR:
            return 400, f"parse error: {request.query['query']}"
        needle = json.loads(match[2])
        start, end = int(request.query["start"]), int(request.query["end"])
        assert request.query["direction"] == "forward"
        entries = sorted(
            (
                (ts, pod, text)
                for pod, values in self.streams.items()
                for ts, text in values
                if start <= ts < end and needle in text
            ),
            key=lambda e: e[0],
        )[: int(request.query["limit"])]
        result: dict[str, list[list[str]]] = {}
        for ts, pod, text in entries:
            result.setdefault(pod, []).append([str(ts), text])
        return 200, {
            "status": "success",
            "data": {
                "resultType": "streams",
                "result": [
                    {"stream": {"container": "probe", "pod": pod}, "values": values}
                    for pod, values in result.items()
                ],
                "stats": {},
            },
        }


# --- Elasticsearch / OpenSearch ------------------------------------------------------------


class FakeSearch:
    """Documents of one index; _search as Elasticsearch answers it for the request the reader
    sends: match_phrase and range filters, ascending sort on the timestamp with its epoch
    milliseconds as sort value, search_after, `fields` with dates in ISO format.
    POST /<index>/_doc indexes a document as a shipper (Filebeat, Fluent Bit) sends it, its
    date fields as ISO strings; with `ingested`, the cluster's ingest pipeline stamps
    event.ingested with it."""

    def __init__(
        self,
        index: str,
        docs: list[dict[str, Any]] | None = None,
        message: str = "message",
        ts: str = "@timestamp",
        ingested: Callable[[], datetime] | None = None,
    ) -> None:
        self.index, self.message, self.ts = index, message, ts
        self.docs = docs if docs is not None else []
        self._ingested = ingested
        self._ids = itertools.count()

    def __call__(self, request: Request) -> Answer:
        if request.path == f"/{self.index}/_doc" and request.method == "POST":
            return self._index(request.body)
        if request.path != f"/{self.index}/_search":
            return 404, {"error": {"type": "index_not_found_exception"}, "status": 404}
        body = request.body
        phrase_filter, range_filter = body["query"]["bool"]["filter"]
        phrase = phrase_filter["match_phrase"][self.message]
        bounds = range_filter["range"][self.ts]
        assert body["sort"] == [{self.ts: {"order": "asc"}}]
        after = body.get("search_after", [None])[0]
        low, high = (datetime.fromisoformat(bounds[k]) for k in ("gte", "lte"))
        hits = [
            d
            for d in sorted(self.docs, key=lambda d: d[self.ts])
            if phrase in d[self.message]
            and low <= d[self.ts] <= high
            and (after is None or millis(d[self.ts]) > after)
        ][: body["size"]]
        wanted = [f if isinstance(f, str) else f["field"] for f in body["fields"]]
        return 200, {
            "took": 3,
            "timed_out": False,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {
                "max_score": None,
                "hits": [
                    {
                        "_index": self.index,
                        "_id": d["_id"],
                        "_score": None,
                        "fields": {
                            k: [iso(d[k]) if isinstance(d[k], datetime) else d[k]]
                            for k in wanted
                            if k in d
                        },
                        "sort": [millis(d[self.ts])],
                    }
                    for d in hits
                ],
            },
        }

    def _index(self, source: dict[str, Any]) -> Answer:
        doc_id = f"doc-{next(self._ids)}"
        doc = {**source, "_id": doc_id, self.ts: datetime.fromisoformat(source[self.ts])}
        if self._ingested is not None:
            doc["event.ingested"] = self._ingested()
        self.docs.append(doc)
        return 201, {
            "_index": self.index,
            "_id": doc_id,
            "_version": 1,
            "result": "created",
            "_shards": {"total": 1, "successful": 1, "failed": 0},
        }
