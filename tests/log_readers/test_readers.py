"""Each log reader against a stand-in for its backend: Loki and Elasticsearch as small HTTP
servers on 127.0.0.1 that answer as the real ones do (stand_ins.py), plain files with their
rotations, and a job's output."""

from __future__ import annotations

import gzip
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from observer.errors import BackendError
from observer.log_readers.base import DeliveredLine, split_timestamp
from observer.log_readers.elasticsearch import ElasticsearchReader
from observer.log_readers.files import FileLogReader
from observer.log_readers.loki import LokiReader
from observer.log_readers.pod_logs import PodLogReader
from tests.log_readers.stand_ins import Answer, FakeLoki, FakeSearch, Request, millis, ns

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RUN = "9d41e7"
SINCE, UNTIL = T0 - timedelta(minutes=1), T0 + timedelta(minutes=10)


def canary(seq: int, run: str = RUN) -> str:
    return f"observer-canary run={run} seq={seq} ts={(T0 + timedelta(seconds=seq)).timestamp()}"


# --- Loki ----------------------------------------------------------------------------------


def test_loki_returns_the_runs_lines_across_streams_in_time_order(serve: Any) -> None:
    t = ns(T0)
    loki = FakeLoki(
        {
            "probe-a": [(t, canary(0)), (t + 2_000, canary(2)), (t + 3_000, canary(0, "other"))],
            "probe-b": [(t + 1_000, canary(1)), (t + 5_000, "unrelated line")],
        }
    )
    server = serve(loki)

    lines = LokiReader(server.url, FakeLoki.SELECTOR).read(RUN, SINCE, UNTIL)

    assert lines == [
        DeliveredLine(
            canary(0),
            '{container="probe", pod="probe-a"}',
            backend_timestamp=T0,
        ),
        DeliveredLine(
            canary(1),
            '{container="probe", pod="probe-b"}',
            backend_timestamp=T0 + timedelta(microseconds=1),
        ),
        DeliveredLine(
            canary(2),
            '{container="probe", pod="probe-a"}',
            backend_timestamp=T0 + timedelta(microseconds=2),
        ),
    ]
    (request,) = server.requests
    assert request.query == {
        "query": FakeLoki.SELECTOR + f' |= "run={RUN}"',
        "start": str(ns(SINCE)),
        "end": str(ns(UNTIL) + 1),
        "limit": "5000",
        "direction": "forward",
    }


def test_loki_pages_forward_without_losing_or_doubling_entries_that_share_a_timestamp(
    serve: Any,
) -> None:
    t = ns(T0)
    # seq 2 and 3 share one nanosecond across the first page boundary, 5 and 6 the third
    stamps = [t, t + 1, t + 5, t + 5, t + 9, t + 12, t + 12, t + 13]
    server = serve(FakeLoki({"probe-a": [(ts, canary(i)) for i, ts in enumerate(stamps)]}))

    lines = LokiReader(server.url, FakeLoki.SELECTOR, page_limit=3).read(RUN, SINCE, UNTIL)

    assert [line.text for line in lines] == [canary(i) for i in range(8)]
    assert [r.query["start"] for r in server.requests] == [
        str(ns(SINCE)),
        str(t + 5),
        str(t + 9),
        str(t + 12),
        str(t + 13),
    ]


def test_loki_with_more_entries_at_one_timestamp_than_a_page_is_an_error(serve: Any) -> None:
    server = serve(FakeLoki({"probe-a": [(ns(T0), canary(i)) for i in range(4)]}))

    with pytest.raises(BackendError, match="2 or more entries share one timestamp"):
        LokiReader(server.url, FakeLoki.SELECTOR, page_limit=2).read(RUN, SINCE, UNTIL)


def test_loki_sends_the_tenant_header(serve: Any) -> None:
    server = serve(FakeLoki({}))

    reader = LokiReader(server.url, FakeLoki.SELECTOR, headers={"X-Scope-OrgID": "soak"})

    assert reader.read(RUN, SINCE, UNTIL) == []
    assert server.requests[0].headers["x-scope-orgid"] == "soak"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ((400, "parse error at line 1, col 2"), "Loki answered 400 .*parse error"),
        ((200, {"status": "error", "data": {}}), "not a streams result"),
        ((200, {"status": "success", "data": {"resultType": "matrix"}}), "not a streams"),
        ((200, "<html>gateway</html>"), "not a streams result"),
    ],
)
def test_loki_refusing_or_answering_nonsense_is_a_backend_error(
    serve: Any, answer: Answer, message: str
) -> None:
    server = serve(lambda _: answer)

    with pytest.raises(BackendError, match=message):
        LokiReader(server.url, FakeLoki.SELECTOR).read(RUN, SINCE, UNTIL)


def test_an_unreachable_loki_is_a_backend_error() -> None:
    reader = LokiReader("http://127.0.0.1:9", FakeLoki.SELECTOR, timeout_seconds=2)  # discard

    with pytest.raises(BackendError, match="unreachable"):
        reader.read(RUN, SINCE, UNTIL)


# --- Elasticsearch / OpenSearch ------------------------------------------------------------


def doc(i: int, seq: int, at: datetime, **extra: Any) -> dict[str, Any]:
    return {"_id": f"id-{i}", "message": canary(seq), "@timestamp": at, **extra}


def test_search_returns_the_runs_lines_with_their_index_time_and_ingest_time(
    serve: Any,
) -> None:
    ingested = T0 + timedelta(seconds=4)
    docs = [
        doc(1, 1, T0 + timedelta(seconds=1), **{"event.ingested": ingested}),
        doc(0, 0, T0),
        {"_id": "x", "message": canary(0, "other"), "@timestamp": T0},
    ]
    server = serve(FakeSearch("logs-probe", docs))

    reader = ElasticsearchReader(server.url, "logs-probe", delivered_field="event.ingested")
    lines = reader.read(RUN, SINCE, UNTIL)

    assert lines == [
        DeliveredLine(canary(0), "logs-probe", backend_timestamp=T0),
        DeliveredLine(
            canary(1),
            "logs-probe",
            delivered_at=ingested,
            backend_timestamp=T0 + timedelta(seconds=1),
        ),
    ]
    (request,) = server.requests
    assert request.method == "POST"
    assert request.body["query"]["bool"]["filter"] == [
        {"match_phrase": {"message": f"run={RUN}"}},
        {"range": {"@timestamp": {"gte": SINCE.isoformat(), "lte": UNTIL.isoformat()}}},
    ]
    assert request.body["_source"] is False
    assert request.body["fields"] == [
        "message",
        {"field": "@timestamp", "format": "strict_date_optional_time_nanos"},
        {"field": "event.ingested", "format": "strict_date_optional_time_nanos"},
    ]
    assert "search_after" not in request.body


def test_search_pages_with_search_after_and_keeps_documents_sharing_a_millisecond(
    serve: Any,
) -> None:
    ms = timedelta(milliseconds=1)
    # seq 2 and 3 share one millisecond across the first page boundary
    stamps = [T0, T0 + ms, T0 + 5 * ms, T0 + 5 * ms, T0 + 9 * ms, T0 + 12 * ms, T0 + 12 * ms]
    server = serve(FakeSearch("logs", [doc(i, i, at) for i, at in enumerate(stamps)]))

    lines = ElasticsearchReader(server.url, "logs", page_size=3).read(RUN, SINCE, UNTIL)

    assert [line.text for line in lines] == [canary(i) for i in range(7)]
    assert [r.body.get("search_after") for r in server.requests] == [
        None,
        [millis(T0 + 5 * ms) - 1],
        [millis(T0 + 9 * ms) - 1],
        [millis(T0 + 12 * ms) - 1],
    ]


def test_search_with_more_documents_at_one_millisecond_than_a_page_is_an_error(
    serve: Any,
) -> None:
    server = serve(FakeSearch("logs", [doc(i, i, T0) for i in range(3)]))

    with pytest.raises(BackendError, match="2 or more documents share one timestamp"):
        ElasticsearchReader(server.url, "logs", page_size=2).read(RUN, SINCE, UNTIL)


def test_search_with_other_field_names_as_opensearch_shippers_write_them(serve: Any) -> None:
    docs = [{"_id": "a", "log": canary(0), "time": T0}]
    server = serve(FakeSearch("fluentbit", docs, message="log", ts="time"))

    reader = ElasticsearchReader(
        server.url, "fluentbit", message_field="log", timestamp_field="time"
    )

    assert reader.read(RUN, SINCE, UNTIL) == [
        DeliveredLine(canary(0), "fluentbit", backend_timestamp=T0)
    ]


def test_a_partial_search_is_an_error_not_lost_lines(serve: Any) -> None:
    def partial(request: Request) -> Answer:
        status, body = FakeSearch("logs", [doc(0, 0, T0)])(request)
        body["_shards"].update(successful=0, failed=1)
        return status, body

    server = serve(partial)

    with pytest.raises(BackendError, match=r"partial .*failed shards: 1"):
        ElasticsearchReader(server.url, "logs").read(RUN, SINCE, UNTIL)


def test_a_missing_index_is_a_backend_error(serve: Any) -> None:
    server = serve(FakeSearch("logs", []))

    with pytest.raises(BackendError, match=r"answered 404.*index_not_found"):
        ElasticsearchReader(server.url, "nope").read(RUN, SINCE, UNTIL)


# --- plain files ---------------------------------------------------------------------------


def write(path: Path, lines: list[str], mtime: datetime) -> None:
    data = "".join(line + "\n" for line in lines)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(data.encode()))
    else:
        path.write_text(data)
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))


def test_files_are_read_with_their_rotations_oldest_first(tmp_path: Path) -> None:
    write(tmp_path / "app.log.2.gz", [canary(0), canary(1)], T0)
    write(tmp_path / "app.log.1", [canary(2), canary(0, "other")], T0 + timedelta(seconds=5))
    write(tmp_path / "app.log", ["starting", canary(3)], T0 + timedelta(seconds=9))

    lines = FileLogReader(str(tmp_path / "app.log*")).read(RUN, SINCE, UNTIL)

    assert lines == [
        DeliveredLine(canary(0), "app.log.2.gz"),
        DeliveredLine(canary(1), "app.log.2.gz"),
        DeliveredLine(canary(2), "app.log.1"),
        DeliveredLine(canary(3), "app.log"),
    ]


def test_a_rotation_written_in_the_same_tick_as_the_live_file_comes_first(
    tmp_path: Path,
) -> None:
    write(tmp_path / "app.log", [canary(1)], T0)
    write(tmp_path / "app.log.1", [canary(0)], T0)

    lines = FileLogReader(str(tmp_path / "app.log*")).read(RUN, SINCE, UNTIL)

    assert [line.source for line in lines] == ["app.log.1", "app.log"]


def test_files_last_written_before_the_run_are_not_read(tmp_path: Path) -> None:
    write(tmp_path / "app.log.1", [canary(0)], SINCE - timedelta(hours=1))
    write(tmp_path / "app.log", [canary(1)], T0)

    lines = FileLogReader(str(tmp_path / "app.log*")).read(RUN, SINCE, UNTIL)

    assert [line.text for line in lines] == [canary(1)]


def test_a_collectors_receive_time_at_the_start_of_a_line_is_its_delivery_time(
    tmp_path: Path,
) -> None:
    write(tmp_path / "collected.log", [f"2026-03-02T09:00:00.250000+00:00 {canary(0)}"], T0)

    (line,) = FileLogReader(str(tmp_path / "collected.log"), leading_timestamp=True).read(
        RUN, SINCE, UNTIL
    )

    assert line == DeliveredLine(
        canary(0), "collected.log", delivered_at=T0 + timedelta(milliseconds=250)
    )


def test_no_matching_file_holds_no_lines(tmp_path: Path) -> None:
    assert FileLogReader(str(tmp_path / "app.log*")).read(RUN, SINCE, UNTIL) == []


def test_an_unreadable_file_is_a_backend_error(tmp_path: Path) -> None:
    (tmp_path / "app.log.1.gz").write_bytes(b"not gzip")

    with pytest.raises(BackendError, match="cannot read log files"):
        FileLogReader(str(tmp_path / "app.log*")).read(RUN, SINCE, UNTIL)


# --- a job's output ------------------------------------------------------------------------


def test_a_jobs_output_is_read_through_the_scheduler_backend() -> None:
    outputs = {"job-4": f"{canary(0)}\nsetting up\n{canary(1)}\n{canary(2, 'other')}\n"}

    reader = PodLogReader(outputs.__getitem__, {RUN: "job-4"}.get)

    assert reader.read(RUN, SINCE, UNTIL) == [
        DeliveredLine(canary(0), "job/job-4"),
        DeliveredLine(canary(1), "job/job-4"),
    ]


def test_the_pod_log_apis_timestamps_are_delivery_times() -> None:
    output = f"2026-03-02T09:00:01.123456789Z {canary(0)}\n"

    reader = PodLogReader(lambda _: output, lambda _: "pod-1", leading_timestamp=True)

    assert reader.read(RUN, SINCE, UNTIL) == [
        DeliveredLine(
            canary(0), "job/pod-1", delivered_at=T0 + timedelta(seconds=1, microseconds=123456)
        )
    ]


def test_a_run_without_a_known_job_is_a_backend_error() -> None:
    reader = PodLogReader(lambda _: "", lambda _: None)

    with pytest.raises(BackendError, match="no job is known for run"):
        reader.read(RUN, SINCE, UNTIL)


def test_a_job_whose_output_the_platform_lost_is_a_backend_error() -> None:
    def gone(job_id: str) -> str:
        raise BackendError(f"job {job_id} is not known to the cluster")

    with pytest.raises(BackendError, match="not known to the cluster"):
        PodLogReader(gone, lambda _: "job-9").read(RUN, SINCE, UNTIL)


# --- the leading timestamp -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2026-03-02T09:00:00Z hello", (T0, "hello")),
        ("2026-03-02T17:00:00+08:00 hello world", (T0, "hello world")),
        ("2026-03-02T09:00:00 naive", (None, "2026-03-02T09:00:00 naive")),
        ("hello world", (None, "hello world")),
        ("2026-03-02T09:00:00Z", (None, "2026-03-02T09:00:00Z")),
    ],
)
def test_only_a_timezone_aware_leading_timestamp_is_split_off(
    line: str, expected: tuple[datetime | None, str]
) -> None:
    assert split_timestamp(line) == expected
