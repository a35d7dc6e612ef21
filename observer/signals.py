"""SIGTERM and SIGINT stop a long-running command without a signal handler that could block:
the handlers do nothing, the interpreter writes each signal's number to a pipe
(signal.set_wakeup_fd, async-signal-safe), and a watcher thread reading the pipe sets the stop
event. A signal that arrives while another is being dealt with (GNU timeout signals the child
and then its group; a person presses Ctrl-C twice) finds nothing held that it could wait on.

SIGHUP, which operators send to have a daemon reopen its log files and a closing terminal
sends to what it started, is said in the log and changes nothing: the observer writes its
log to standard error, so there is no file to reopen (Python's default action would end the
daemon at once, with no cleanup)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from observer.logging_setup import get_logger

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
HANGUP = signal.SIGHUP

_log = get_logger(__name__)


def _ignore(signum: int, frame: object) -> None:
    """The Python-level handler: the wakeup pipe has the signal already."""


def _hung_up() -> None:
    _log.info("SIGHUP received: the log goes to standard error, nothing to reopen; carrying on")


@contextmanager
def stop_on_signals(
    stop: threading.Event, on_hangup: Callable[[], None] = _hung_up
) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT set `stop` and SIGHUP calls `on_hangup` (both
    from the watcher thread)."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    wanted = {int(sig) for sig in STOP_SIGNALS}

    def watch() -> None:
        while data := os.read(read, 64):  # empty once the write end is closed
            if wanted.intersection(data):
                stop.set()
            if int(HANGUP) in data:
                on_hangup()

    watcher = threading.Thread(target=watch, name="signals", daemon=True)
    watcher.start()
    previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    previous = {sig: signal.signal(sig, _ignore) for sig in (*STOP_SIGNALS, HANGUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(previous_fd)
        os.close(write)
        watcher.join()
        os.close(read)
