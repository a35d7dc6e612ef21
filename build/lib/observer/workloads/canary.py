"""`observer probe log-canary` / `log-burst`: the sequenced lines the log-loss check reads
back, in the one format domain.CANARY_MARK describes (a canary paced by an interval, a burst
padded to a line size and written as fast as the pipe takes it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from observer.domain import CANARY_MARK, Workload, canary_padding


def canary_line(run_id: str, seq: int, at_ns: int, padding: str) -> str:
    """One line, without its newline; `ts` as `date +%s.%N` writes it."""
    seconds, nanoseconds = divmod(at_ns, 10**9)
    return f"{CANARY_MARK} run={run_id} seq={seq} ts={seconds}.{nanoseconds:09d}{padding}"


def write_canary(
    out: TextIO,
    run_id: str,
    lines: int,
    interval_seconds: float,
    line_bytes: int,
    clock_ns: Callable[[], int] = time.time_ns,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Write lines seq 0..lines-1, each flushed as written (a kill mid-way loses nothing the
    pipeline could have had)."""
    padding = canary_padding(run_id, Workload(0, log_lines=lines, log_line_bytes=line_bytes))
    for seq in range(lines):
        out.write(canary_line(run_id, seq, clock_ns(), padding) + "\n")
        out.flush()
        if interval_seconds:
            sleep(interval_seconds)
