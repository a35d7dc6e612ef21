"""The HTTP surface as a client meets it: a client that hangs up before its answer (a
readiness probe past its timeout) costs the server nothing, not even a traceback."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from observer.http import serving


def slow_health() -> tuple[bool, dict[str, Any]]:
    time.sleep(0.3)  # the client is gone by the time the answer is written
    return True, {"status": "ok"}


def test_a_client_that_hangs_up_early_leaves_no_traceback(capfd: pytest.CaptureFixture[str]):
    with serving("127.0.0.1", 0, CollectorRegistry(), slow_health, dict) as port:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: observer\r\n\r\n")
                # SO_LINGER 0: the close resets the connection, as a timed-out prober's does.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        time.sleep(0.6)
        answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
    assert answer.json() == {"status": "ok"}
    assert "Traceback" not in capfd.readouterr().err
