"""PeriodicLoop keeps cadence on a monotonic clock (and ticks at the wall times it is also
given), skips the slots an overrunning tick missed, backs off along a finite schedule after
failures, isolates per-item errors, reports the age of its last good tick and stops promptly
when asked."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from observer.clock import ManualClock, SystemClock
from observer.loops import PeriodicLoop
from observer.metrics import LoopMetrics

T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)


class Harness:
    """A loop named "sampler" on a ManualClock with its own registry and stop event; the
    tick records the monotonic time it started at and runs `body`."""

    def __init__(
        self,
        interval_seconds: float = 10.0,
        body: Callable[[Harness], None] | None = None,
        stop_after: int | None = None,
        backoff_seconds: tuple[float, ...] | None = None,
        also_at: Callable[[datetime], datetime] | None = None,
    ) -> None:
        self.clock = ManualClock(T0)
        self.registry = CollectorRegistry()
        self.stop = threading.Event()
        self.started_at: list[float] = []
        self._body = body
        self._stop_after = stop_after
        extra = {} if backoff_seconds is None else {"backoff_seconds": backoff_seconds}
        self.loop = PeriodicLoop(
            "sampler",
            interval_seconds,
            self._tick,
            self.clock,
            self.stop,
            LoopMetrics(self.registry),
            **extra,
            also_at=also_at,
        )

    def _tick(self) -> None:
        self.started_at.append(self.clock.monotonic())
        try:
            if self._body is not None:
                self._body(self)
        finally:
            if self._stop_after is not None and len(self.started_at) >= self._stop_after:
                self.stop.set()

    def errors(self, stage: str) -> float | None:
        return self.registry.get_sample_value(
            "observer_loop_errors_total", {"loop": "sampler", "stage": stage}
        )

    def ticks(self) -> float | None:
        return self.registry.get_sample_value("observer_loop_ticks_total", {"loop": "sampler"})

    def last_success_timestamp(self) -> float | None:
        return self.registry.get_sample_value(
            "observer_loop_last_success_timestamp_seconds", {"loop": "sampler"}
        )


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def fail(_: Harness) -> None:
    raise RuntimeError("NVML timed out")


# --- cadence --------------------------------------------------------------------------------


def test_ticks_start_on_the_interval_cadence_of_the_monotonic_clock() -> None:
    h = Harness(interval_seconds=10.0, stop_after=5)

    h.loop.run()

    assert h.started_at == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert h.ticks() == 5


def test_time_spent_inside_a_tick_does_not_push_the_cadence_back() -> None:
    h = Harness(interval_seconds=10.0, body=lambda h: h.clock.advance(3.0), stop_after=4)

    h.loop.run()

    assert h.started_at == [0.0, 10.0, 20.0, 30.0]


def test_a_tick_that_overruns_skips_the_missed_slots_instead_of_bursting() -> None:
    def slow_first_tick(h: Harness) -> None:
        if len(h.started_at) == 1:
            h.clock.advance(25.0)

    h = Harness(interval_seconds=10.0, body=slow_first_tick, stop_after=3)

    h.loop.run()

    assert h.started_at == [0.0, 30.0, 40.0]


def test_a_tick_that_lasts_exactly_one_interval_is_followed_at_once_by_the_next() -> None:
    def slow_first_tick(h: Harness) -> None:
        if len(h.started_at) == 1:
            h.clock.advance(10.0)

    h = Harness(interval_seconds=10.0, body=slow_first_tick, stop_after=3)

    h.loop.run()

    assert h.started_at == [0.0, 10.0, 20.0]


def test_a_tick_that_ends_exactly_on_a_later_slot_starts_the_next_tick_on_that_slot() -> None:
    # The slot at 20 s is not missed when the tick ends at 20 s: like the one-interval case
    # above, the next tick starts on it rather than waiting for 30 s.
    def slow_first_tick(h: Harness) -> None:
        if len(h.started_at) == 1:
            h.clock.advance(20.0)

    h = Harness(interval_seconds=10.0, body=slow_first_tick, stop_after=3)

    h.loop.run()

    assert h.started_at == [0.0, 20.0, 30.0]


def test_a_wall_time_it_is_also_given_gets_a_tick_and_the_cadence_counts_on_from_it() -> None:
    def next_at_seven_thirty_past(now: datetime) -> datetime:
        at = T0.replace(minute=7, second=30)  # T0 is 08:00
        while at <= now:
            at += timedelta(hours=1)
        return at

    h = Harness(interval_seconds=600.0, stop_after=5, also_at=next_at_seven_thirty_past)

    h.loop.run()

    #                        08:00 08:07:30 08:17:30 08:27:30 08:37:30
    assert h.started_at == [0.0, 450.0, 1050.0, 1650.0, 2250.0]


def test_a_wall_time_sooner_than_the_backoff_after_a_failure_still_gets_its_tick() -> None:
    h = Harness(
        interval_seconds=600.0,
        body=fail,
        stop_after=3,
        backoff_seconds=(3600.0,),
        also_at=lambda now: now.replace(second=0, microsecond=0) + timedelta(minutes=1),
    )

    h.loop.run()

    assert h.started_at == [0.0, 60.0, 120.0]


# --- failures and backoff -------------------------------------------------------------------


def test_failed_ticks_back_off_along_the_finite_schedule_and_then_stay_at_its_last_step() -> None:
    h = Harness(interval_seconds=0.5, body=fail, stop_after=8)

    h.loop.run()

    assert gaps(h.started_at) == [1.0, 2.0, 5.0, 10.0, 30.0, 30.0, 30.0]


def test_a_successful_tick_resets_the_backoff_to_the_cadence_and_the_first_step() -> None:
    outcomes = iter([False, False, False, True, True, False, True])

    def scripted(_: Harness) -> None:
        if not next(outcomes):
            raise RuntimeError("NVML timed out")

    h = Harness(interval_seconds=0.5, body=scripted, stop_after=7)

    h.loop.run()

    #       fail fail fail  ok   ok  fail  ok
    assert gaps(h.started_at) == [1.0, 2.0, 5.0, 0.5, 0.5, 1.0]


def test_a_failure_never_makes_the_loop_tick_faster_than_its_interval() -> None:
    h = Harness(interval_seconds=10.0, body=fail, stop_after=7)

    h.loop.run()

    assert gaps(h.started_at) == [10.0, 10.0, 10.0, 10.0, 30.0, 30.0]


def test_a_custom_backoff_schedule_is_followed() -> None:
    h = Harness(interval_seconds=0.5, body=fail, stop_after=4, backoff_seconds=(3.0, 7.0))

    h.loop.run()

    assert gaps(h.started_at) == [3.0, 7.0, 7.0]


def test_a_failed_tick_is_counted_as_a_tick_error_and_the_loop_keeps_going() -> None:
    h = Harness(interval_seconds=10.0, body=fail, stop_after=3)

    h.loop.run()

    assert h.errors("tick") == 3
    assert h.ticks() == 3
    assert h.errors("item") is None


def test_run_once_says_whether_the_tick_succeeded() -> None:
    ok = Harness()
    failing = Harness(body=fail)

    assert ok.loop.run_once() is True
    assert failing.loop.run_once() is False
    assert ok.errors("tick") is None
    assert failing.errors("tick") == 1


# --- per-item isolation ---------------------------------------------------------------------


def test_each_returns_the_results_of_the_items_that_worked_and_counts_the_one_that_failed() -> None:
    h = Harness()

    def read_gpu(index: int) -> str:
        if index == 1:
            raise RuntimeError("GPU 1 is lost")
        return f"GPU-{index}"

    assert h.loop.each([0, 1, 2, 3], read_gpu) == ["GPU-0", "GPU-2", "GPU-3"]
    assert h.errors("item") == 1
    assert h.errors("tick") is None


def test_a_tick_whose_items_fail_still_counts_as_a_good_tick() -> None:
    def tick_over_items(h: Harness) -> None:
        h.loop.each([0, 1], lambda i: 1 // 0)

    h = Harness(body=tick_over_items)

    assert h.loop.run_once() is True
    assert h.errors("item") == 2
    assert h.loop.last_success_age_seconds() == 0.0


# --- health ---------------------------------------------------------------------------------


def test_the_last_success_age_is_none_before_the_first_good_tick() -> None:
    h = Harness(body=fail)

    assert h.loop.last_success_age_seconds() is None
    h.loop.run_once()
    assert h.loop.last_success_age_seconds() is None
    assert h.last_success_timestamp() is None


def test_the_last_success_age_grows_with_the_clock_after_a_good_tick() -> None:
    h = Harness()
    h.clock.advance(100.0)
    h.loop.run_once()

    assert h.loop.last_success_age_seconds() == 0.0
    h.clock.advance(7.5)
    assert h.loop.last_success_age_seconds() == 7.5


def test_a_failed_tick_does_not_refresh_the_last_success() -> None:
    outcomes = iter([True, False])

    def scripted(_: Harness) -> None:
        if not next(outcomes):
            raise RuntimeError("NVML timed out")

    h = Harness(body=scripted)
    h.loop.run_once()
    h.clock.advance(60.0)
    h.loop.run_once()
    h.clock.advance(5.0)

    assert h.loop.last_success_age_seconds() == 65.0
    assert h.last_success_timestamp() == T0.timestamp()


def test_the_last_success_timestamp_is_the_wall_time_of_the_last_good_tick() -> None:
    h = Harness(interval_seconds=10.0, stop_after=3)

    h.loop.run()

    assert h.last_success_timestamp() == T0.timestamp() + 20.0


# --- stopping -------------------------------------------------------------------------------


def test_run_returns_as_soon_as_the_stop_event_is_set_without_waiting_out_the_interval() -> None:
    h = Harness(interval_seconds=3600.0, stop_after=1)

    h.loop.run()

    assert h.started_at == [0.0]
    assert h.clock.monotonic() == 0.0


def test_run_returns_promptly_when_stopped_during_a_failing_tick() -> None:
    h = Harness(interval_seconds=10.0, body=fail, stop_after=1)

    h.loop.run()

    assert h.started_at == [0.0]
    assert h.clock.monotonic() == 0.0


def test_run_does_not_tick_at_all_when_the_stop_event_is_already_set() -> None:
    h = Harness()
    h.stop.set()

    h.loop.run()

    assert h.started_at == []


def test_join_without_start_is_immediately_done() -> None:
    assert Harness().loop.join(0.0) is True


@pytest.mark.timeout(5)
def test_a_started_loop_on_the_system_clock_stops_within_its_deadline() -> None:
    registry = CollectorRegistry()
    stop = threading.Event()
    ticked = threading.Event()
    loop = PeriodicLoop("sampler", 0.01, ticked.set, SystemClock(), stop, LoopMetrics(registry))

    loop.start()
    assert ticked.wait(0.5)
    stop.set()
    began = time.monotonic()
    stopped = loop.join(0.5)

    assert stopped is True
    assert time.monotonic() - began < 0.5
    assert (registry.get_sample_value("observer_loop_ticks_total", {"loop": "sampler"}) or 0) >= 1
