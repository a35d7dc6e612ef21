"""A bad agent costs only itself: garbage, an endless or a 50 MB body, a trickle, silence, a
snapshot of the wrong shape or a 500 is that agent's BackendError naming it and the reason,
read within the deadline, while the good agents' snapshots arrive beside it."""

from __future__ import annotations

import json
import time
from contextlib import ExitStack

from observer.errors import BackendError
from observer.fleet.http import HttpFleet
from tests.fleet.raw_agents import (
    Agent,
    Answer,
    Connection,
    body,
    endless,
    fifty_megabytes,
    good,
    serving,
    silent,
    snapshot,
    snapshot_json,
    trickled,
)

DEADLINE_SECONDS = 1.5
MARGIN_SECONDS = 1.0
MAX_BYTES = 2**20
# What the kernel's socket buffers take in on loopback before the writer learns the reader
# has gone: the most a capped read lets an agent send.
SOCKET_BUFFERS_BYTES = 16 * 2**20


def _wrong_shape() -> bytes:
    data = snapshot_json("wrong")
    data["gpus"] = [{"index": "0", "identity": None, "sample": None, "counters": None}]
    return json.dumps(data).encode()


BAD: dict[str, tuple[Answer, str]] = {
    "not_utf8": (body(b'{"node": "\xff\xfe"}'), "snapshot is not UTF-8 (invalid start byte at"),
    "not_json": (
        body(b"<html>busy</html>"),
        "snapshot is not JSON (Expecting value: line 1 column 1 (char 0))",
    ),
    "endless": (endless, f"snapshot larger than {MAX_BYTES} bytes"),
    "fifty_megabytes": (fifty_megabytes, f"snapshot larger than {MAX_BYTES} bytes"),
    "trickled": (trickled, f"no whole answer within {DEADLINE_SECONDS:g} s"),
    "silent": (silent, f"no whole answer within {DEADLINE_SECONDS:g} s"),
    "wrong_shape": (
        body(_wrong_shape()),
        "snapshot field gpus[0].index: expected int, got string",
    ),
    "server_error": (body(b"oops", "500 Internal Server Error"), "answered HTTP 500"),
}


def test_each_bad_agent_is_its_own_error_and_the_fleet_is_read_within_the_deadline() -> None:
    with ExitStack() as stack:
        goods = [stack.enter_context(serving(good(f"n{i}"))) for i in range(3)]
        bad: dict[str, Agent] = {
            name: stack.enter_context(serving(answer)) for name, (answer, _) in BAD.items()
        }
        fleet = HttpFleet(
            [a.url for a in [*goods, *bad.values()]],
            read_timeout_seconds=DEADLINE_SECONDS,
            max_snapshot_bytes=MAX_BYTES,
            concurrency=32,
        )
        began = time.monotonic()
        result = fleet.fetch_all(fleet.agents())
        elapsed = time.monotonic() - began

        assert elapsed < DEADLINE_SECONDS + MARGIN_SECONDS
        assert [result[a.url] for a in goods] == [snapshot(f"n{i}") for i in range(3)]
        for name, agent in bad.items():
            error = result[agent.url]
            assert isinstance(error, BackendError), name
            assert str(error).startswith(f"agent {agent.url}: {BAD[name][1]}"), str(error)
        for name in ("endless", "fifty_megabytes"):
            assert bad[name].finished.acquire(timeout=10)
            [sent] = bad[name].sent
            assert sent < MAX_BYTES + SOCKET_BUFFERS_BYTES, (name, sent)


def test_a_body_is_capped_as_it_streams_when_no_length_is_declared() -> None:
    data = json.dumps(snapshot_json("n1")).encode()
    with serving(body(data, declared=False)) as agent:
        fleet = HttpFleet([agent.url], max_snapshot_bytes=len(data) - 1)
        [error] = fleet.fetch_all(fleet.agents()).values()
        fleet = HttpFleet([agent.url], max_snapshot_bytes=len(data))
        [read] = fleet.fetch_all(fleet.agents()).values()

    assert isinstance(error, BackendError)
    assert f"snapshot larger than {len(data) - 1} bytes" in str(error)
    assert read == snapshot("n1")


def test_an_agent_address_that_is_no_url_is_that_agent_s_error() -> None:
    fleet = HttpFleet(["http://node-3:x"])
    [error] = fleet.fetch_all(fleet.agents()).values()
    assert isinstance(error, BackendError)
    assert str(error) == "agent http://node-3:x: Invalid port: 'x'"


def chunked(data: bytes) -> Answer:
    """`data` in HTTP/1.1 chunks of 1,000 bytes, no length declared."""

    def answer(connection: Connection) -> None:
        connection.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for start in range(0, len(data), 1000):
            part = data[start : start + 1000]
            connection.send(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        connection.send(b"0\r\n\r\n")

    return answer


def cut_short(connection: Connection) -> None:
    """Declares the whole snapshot, sends half of it and hangs up."""
    data = json.dumps(snapshot_json("cut")).encode()
    connection.head(length=len(data))
    connection.send(data[: len(data) // 2])


def test_a_chunked_answer_is_read_whole_and_capped_and_one_cut_short_is_an_error() -> None:
    data = json.dumps(snapshot_json("n1")).encode()
    with serving(chunked(data)) as whole, serving(cut_short) as cut:
        [read] = HttpFleet([whole.url]).fetch_all([whole.url]).values()
        capped = HttpFleet([whole.url], max_snapshot_bytes=len(data) - 1)
        [too_large] = capped.fetch_all([whole.url]).values()
        [short] = HttpFleet([cut.url]).fetch_all([cut.url]).values()

    assert read == snapshot("n1")
    assert isinstance(too_large, BackendError)
    assert f"snapshot larger than {len(data) - 1} bytes" in str(too_large)
    assert isinstance(short, BackendError)
    assert str(short).startswith(f"agent {cut.url}: peer closed connection without sending")
