"""Agents on 127.0.0.1 that answer /v1/snapshot well or badly, written byte by byte on a raw
socket (so that an answer can be garbage, endless, trickled or never sent), each counting
the bytes it managed to send before the reader hung up."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from observer import codec
from observer.domain import DriverState, DriverStatus, NodeSnapshot

AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
CHUNK = 64 * 1024


def snapshot(node: str) -> NodeSnapshot:
    return NodeSnapshot(node, AT, DriverStatus(DriverState.OK), (), (), ())


def snapshot_json(node: str) -> dict[str, Any]:
    return codec.snapshot_to_json(snapshot(node))


class Connection:
    """One reader's connection, as the agent's answer writes to it."""

    def __init__(self, sock: socket.socket, stopping: threading.Event) -> None:
        self._sock = sock
        self.stopping = stopping
        self.sent = 0

    def send(self, data: bytes) -> None:
        for start in range(0, len(data), CHUNK):
            self._sock.sendall(data[start : start + CHUNK])
            self.sent += min(CHUNK, len(data) - start)

    def head(self, status: str = "200 OK", length: int | None = None) -> None:
        """The status line and headers; no length: the body runs until the connection ends."""
        lines = [f"HTTP/1.0 {status}", "Content-Type: application/json"]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode())


Answer = Callable[[Connection], None]


def body(data: bytes, status: str = "200 OK", declared: bool = True) -> Answer:
    """`data`, its length in the headers unless not `declared` (then the end is the
    connection's)."""

    def answer(connection: Connection) -> None:
        connection.head(status, len(data) if declared else None)
        connection.send(data)

    return answer


def good(node: str) -> Answer:
    return body(json.dumps(snapshot_json(node)).encode())


def endless(connection: Connection) -> None:
    """A body with no length that never ends."""
    connection.head()
    while not connection.stopping.is_set():
        connection.send(b" " * CHUNK)


def fifty_megabytes(connection: Connection) -> None:
    size = 50 * 2**20
    connection.head(length=size)
    connection.send(b" " * size)


def trickled(connection: Connection) -> None:
    """A snapshot one byte every 0.5 s: each byte comes well within any per-read timeout."""
    data = json.dumps(snapshot_json("trickled")).encode()
    connection.head(length=len(data))
    for i in range(len(data)):
        if connection.stopping.wait(0.5):
            return
        connection.send(data[i : i + 1])


def silent(connection: Connection) -> None:
    """Accepts and reads the request, never answers."""
    connection.stopping.wait()


class Agent:
    """A running agent: its base URL, what it answers (which a test may change), and the
    bytes each finished connection sent."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.sent: list[int] = []
        self.finished = threading.Semaphore(0)
        self.url = ""


@contextmanager
def serving(answer: Answer) -> Iterator[Agent]:
    agent = Agent(answer)
    stopping = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            connection = Connection(self.request, stopping)
            try:
                request = b""
                while b"\r\n\r\n" not in request:
                    data = self.request.recv(4096)
                    if not data:
                        return
                    request += data
                agent.answer(connection)
            except OSError:
                pass  # the reader hung up: what it cut off is the point
            finally:
                agent.sent.append(connection.sent)
                agent.finished.release()

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    agent.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield agent
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
