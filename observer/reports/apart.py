"""The controller's daily summaries built in a short-lived process of their own. A build reads
the soak to date, so its peak grows with the soak, and a process keeps what its peak took
(CPython's arenas, glibc's heap); a spawned process inherits none of the controller's memory
and gives all of its own back when it exits, so the controller's stays level.

The build process opens the store again, writes each due day's summary (`publish.py`) at the
moment the controller gives it (never its own clock: the demo and the simulations run on a
manual one), and answers each summary written as plain values. What it failed with arrives as
the same error with the same message; a process that died, ran past its time or is stopped
with the controller is ended and is one ReportError. The controller keeps which days are
due, the metrics, delivery and the store's outage."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Literal

from observer.clock import ManualClock
from observer.errors import ReportError, StoreError
from observer.logging_setup import Format, configure_logging, get_logger, logging_configured
from observer.reports.publish import Written, write_summary
from observer.settings import Settings
from observer.storage.store import Store

# How often the wait looks at the stop event: a stopping controller ends the build within this.
STOP_POLL_SECONDS = 0.1
# A build process asked to end (SIGTERM) is killed when it has not within this.
END_GRACE_SECONDS = 1.0

_log = get_logger("observer.reports")
_ERRORS: dict[str, type[ReportError | StoreError]] = {"report": ReportError, "store": StoreError}


@dataclass(frozen=True, slots=True)
class _Failed:
    """What the build failed with: its kind (a key of _ERRORS) and its one-line message."""

    kind: Literal["report", "store"]
    message: str


def build_apart(
    store: Store,
    settings: Settings,
    days: Sequence[date],
    now: datetime,
    stop: threading.Event,
    timeout_seconds: float,
) -> Iterator[Written]:
    """Write the summaries of `days` as at `now`, oldest first, in a process of their own over
    `store`'s database; yields each as it is written. `timeout_seconds`: the longest wait for
    the next summary. A StoreError of the build is `store`'s own failure (its outage)."""
    if not days:
        return
    context = multiprocessing.get_context("spawn")
    answers, answering = context.Pipe(duplex=False)
    child = context.Process(
        target=_build,
        args=(store.url, settings, list(days), now, logging_configured(), answering),
        name="observer-reports",
        daemon=True,
    )
    try:
        child.start()
    except OSError as exc:  # no process to be had (a limit on processes, no memory)
        answers.close()
        raise ReportError(f"cannot start the report build's process: {exc}") from exc
    finally:
        answering.close()  # the child's end is the child's alone: its exit reads as the end
    try:
        with store.elsewhere():
            for _ in days:
                answer = _next_answer(answers, child, stop, timeout_seconds)
                if isinstance(answer, _Failed):
                    raise _ERRORS[answer.kind](answer.message)
                yield answer
        child.join(END_GRACE_SECONDS)
    finally:
        _end(child)
        answers.close()


def _next_answer(
    answers: Connection,
    child: BaseProcess,
    stop: threading.Event,
    timeout_seconds: float,
) -> Written | _Failed:
    # Real seconds whatever clock the controller runs on: it waits on a real process.
    deadline = time.monotonic() + timeout_seconds
    while not answers.poll(STOP_POLL_SECONDS):
        if stop.is_set():
            raise ReportError("the report build was stopped with the controller")
        if time.monotonic() >= deadline:
            raise ReportError(
                f"the report build wrote no summary in {timeout_seconds:g} s and was stopped"
            )
    try:
        answer: Written | _Failed = answers.recv()
    except EOFError:
        child.join(END_GRACE_SECONDS)
        if stop.is_set():  # a signal to the process group ends the build with the controller
            raise ReportError("the report build was stopped with the controller") from None
        raise ReportError(
            f"the report build's process ended without an answer ({_exit(child.exitcode)})"
        ) from None
    return answer


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _end(child: BaseProcess) -> None:
    if child.is_alive():
        child.terminate()
        child.join(END_GRACE_SECONDS)
    if child.is_alive():
        child.kill()
        child.join()
    child.close()


def _build(
    url: str,
    settings: Settings,
    days: list[date],
    now: datetime,
    logging: tuple[str, Format] | None,
    answering: Connection,
) -> None:
    """The build process: each day's summary written and answered, or what failed."""
    # Ctrl-C reaches the terminal's whole process group: the controller ends its build itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if logging is not None:
        configure_logging(*logging)
    try:
        with Store(url, ManualClock(now)) as store:
            for day in days:
                written = write_summary(store, settings, day, now)
                _log.info("daily summary written", day=day.isoformat(), pid=os.getpid())
                answering.send(written)
    except ReportError as exc:
        answering.send(_Failed("report", str(exc)))
    except StoreError as exc:
        answering.send(_Failed("store", str(exc)))
    except Exception as exc:
        _log.exception("report build failed", pid=os.getpid())
        answering.send(_Failed("report", f"the report build failed: {exc!r}"))
    finally:
        answering.close()
