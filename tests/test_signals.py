"""Stop signals set the stop event from a watcher thread; the handlers themselves do nothing
that could block, however many signals arrive and however fast."""

from __future__ import annotations

import os
import signal
import threading

from observer.signals import HANGUP, STOP_SIGNALS, stop_on_signals


def test_a_burst_of_stop_signals_sets_the_stop_event_and_nothing_waits():
    stop = threading.Event()
    with stop_on_signals(stop):
        for sig in [signal.SIGTERM] * 3 + [signal.SIGINT] * 2:
            os.kill(os.getpid(), sig)
        assert stop.wait(5)


def test_the_handlers_before_are_back_afterwards():
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    with stop_on_signals(threading.Event()):
        assert all(signal.getsignal(sig) is not before[sig] for sig in STOP_SIGNALS)
    assert {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} == before


def test_other_signals_do_not_stop():
    stop = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        with stop_on_signals(stop):
            os.kill(os.getpid(), signal.SIGUSR1)
            assert not stop.wait(0.5)
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_hangup_is_reported_and_neither_stops_nor_ends_the_process():
    stop, hung_up = threading.Event(), threading.Event()
    with stop_on_signals(stop, on_hangup=hung_up.set):
        os.kill(os.getpid(), HANGUP)
        assert hung_up.wait(5)
        assert not stop.wait(0.5)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)


def test_the_hangup_handler_before_is_back_afterwards():
    before = signal.getsignal(HANGUP)
    with stop_on_signals(threading.Event()):
        assert signal.getsignal(HANGUP) is not before
    assert signal.getsignal(HANGUP) == before


def test_the_handler_returns_even_while_the_stop_event_is_busy():
    """What deadlocked the controller: a second signal handled while the first one's
    Event.set() held the event's lock. The handler must not touch the event at all."""
    stop = threading.Event()
    with stop_on_signals(stop):
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler)
        returned = threading.Event()

        def handle_while_busy() -> None:
            with stop._cond:  # type: ignore[attr-defined]  # as Event.set() holds it
                handler(signal.SIGTERM, None)
            returned.set()

        threading.Thread(target=handle_while_busy, daemon=True).start()
        assert returned.wait(2)
