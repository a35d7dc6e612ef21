"""Waiting for what another thread or process brings about: asked again until it is there, or
the test fails saying what never came."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    what: str,
    seconds: float,
    poll_seconds: float = 0.1,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """The first truthy value of `condition()`, asked every `poll_seconds`; the test fails with
    `what` when none came within `seconds`. An exception of `ignoring` is a "not yet" (a server
    that does not listen yet)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if got := condition():
                return got
        except ignoring:
            pass
        assert time.monotonic() < deadline, what
        time.sleep(poll_seconds)
