"""The controller reads its agents over HTTP concurrently, a bounded number at once, and an
agent it cannot read is that agent's error, not the whole read's."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from observer import codec
from observer.domain import DriverState, DriverStatus, NodeSnapshot
from observer.errors import BackendError
from observer.fleet.http import HttpFleet

AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
# Liveness bounds only: a correct fleet never waits this long, a sequential one would.
BARRIER_SECONDS = 20.0
CLIENT_TIMEOUT_SECONDS = 30.0


def snapshot(node: str) -> NodeSnapshot:
    return NodeSnapshot(node, AT, DriverStatus(DriverState.OK), (), (), ())


@contextmanager
def agent(node: str, before_answer: Callable[[], None] = lambda: None) -> Iterator[str]:
    """A real HTTP server answering /v1/snapshot as node's agent, once `before_answer` returns
    (503 if it raises); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                before_answer()
                body = json.dumps(codec.snapshot_to_json(snapshot(node))).encode()
                status = 200
            except threading.BrokenBarrierError:
                body, status = b"the other agents were never asked", 503
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def agents(count: int, before_answer: Callable[[], None]) -> Iterator[list[str]]:
    with ExitStack() as stack:
        yield [stack.enter_context(agent(f"n{i}", before_answer)) for i in range(count)]


def read(urls: list[str], concurrency: int) -> dict[str, NodeSnapshot | BackendError]:
    fleet = HttpFleet(urls, read_timeout_seconds=CLIENT_TIMEOUT_SECONDS, concurrency=concurrency)
    return fleet.fetch_all(fleet.agents())


def test_slow_agents_are_all_asked_at_once_so_a_read_takes_one_wait_not_one_per_agent():
    # No agent answers before every agent has been asked: read one after another, the first
    # would wait for the others forever (until the barrier breaks and it answers 503).
    everyone_asked = threading.Barrier(8, timeout=BARRIER_SECONDS)

    def wait_for_the_others() -> None:
        everyone_asked.wait()

    with agents(8, wait_for_the_others) as urls:
        result = read(urls, concurrency=8)

    assert [result[url] for url in urls] == [snapshot(f"n{i}") for i in range(8)]


def test_no_more_agents_than_the_concurrency_are_read_at_once():
    changed = threading.Condition()
    in_flight = [0, 0]  # now, most

    def hold_a_while_for_a_third() -> None:
        # Held until a third read is in flight, which a bound of two never lets happen; the
        # wait's end is what lets each pair go.
        with changed:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
            changed.notify_all()
            changed.wait_for(lambda: in_flight[0] >= 3, timeout=0.2)
            in_flight[0] -= 1

    with agents(6, hold_a_while_for_a_third) as urls:
        result = read(urls, concurrency=2)

    assert all(isinstance(result[url], NodeSnapshot) for url in urls)
    assert in_flight[1] == 2


def test_an_agent_that_cannot_be_read_is_its_own_error_beside_the_others_snapshots():
    with agent("n1") as good:
        result = read([good, "http://127.0.0.1:1"], concurrency=4)

    assert result[good] == snapshot("n1")
    error = result["http://127.0.0.1:1"]
    assert isinstance(error, BackendError)
    assert "http://127.0.0.1:1" in str(error)
