"""Loopback ports for the tests' servers and the refusals they test: a free one, or one that a
listener holds."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    """A port nothing listens on just now: the system's pick, given back at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def taken_port() -> Iterator[int]:
    """A port that a listening socket holds until the block ends."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])
