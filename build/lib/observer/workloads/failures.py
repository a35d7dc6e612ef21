"""The programs of the failure probes and the plain hold: `sleep`, `exit` (a non-zero end
the platform must report), `oom` (memory past the job's limit)."""

from __future__ import annotations

import time
from collections.abc import Callable

MEBIBYTE = 2**20
_PAGE_BYTES = 4096


def hold_memory(
    mebibytes: int | None, hold_seconds: float, sleep: Callable[[float], None] = time.sleep
) -> int:
    """Allocate and touch memory a mebibyte at a time, until the cgroup's OOM killer ends the
    process or `mebibytes` are held (None: no bound); then hold it for `hold_seconds`.
    Returns the mebibytes held, when it was not killed."""
    held: list[bytearray] = []
    while mebibytes is None or len(held) < mebibytes:
        chunk = bytearray(MEBIBYTE)
        chunk[::_PAGE_BYTES] = b"x" * (MEBIBYTE // _PAGE_BYTES)  # every page really resident
        held.append(chunk)
    sleep(hold_seconds)
    return len(held)
