"""A Prometheus stand-in behind the PrometheusApi boundary, on an injected clock: it scrapes
its targets at a fixed interval (each target a function of the scrape time), keeps the raw
samples and answers the three reads the checker makes. Its switches break it the ways a real
pipeline breaks: samples that become queryable late (ingestion lag), a target that stops
answering or that Prometheus stops scraping, a series frozen at its last value (flat line),
and Prometheus itself paused (every read times out, nothing is scraped meanwhile).

It answers only what the checker asks: a series selector with `=` matchers, alone, as a
range (`series`) or inside `time() - timestamp(...)`; anything else is a MonitoringError."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from observer.clock import Clock
from observer.domain import TargetHealth, TargetState
from observer.monitoring.base import (
    MonitoringError,
    PrometheusUnreachableError,
    SeriesSamples,
    VectorSample,
)

# Prometheus's lookback for instant queries: an older sample is not returned.
LOOKBACK_SECONDS = 300.0
# Samples kept per series: longer than any window the checker reads.
RETENTION = timedelta(hours=1)

Labels = frozenset[tuple[str, str]]
# What one scrape of a target returns: (metric name, labels, value) per series.
Exposition = Iterable[tuple[str, Mapping[str, str], float]]


@dataclass
class FakeTarget:
    job: str
    instance: str
    collect: Callable[[datetime], Exposition]  # the exporter, asked at each scrape's time
    answering: bool = True  # False: every scrape fails, as a target that stopped answering
    scraped: bool = True  # False: Prometheus stopped scraping it; its last scrape ages
    ingest_delay_seconds: float = 0.0  # its samples become queryable this much later
    health: TargetState = TargetState.UNKNOWN
    last_scrape: datetime | None = None
    last_error: str = ""
    next_scrape: datetime | None = None


@dataclass
class _Point:
    at: datetime  # scrape time
    visible_at: datetime  # when a query first sees it
    value: float | None  # None: a staleness marker


_scraped_at = attrgetter("at")


@dataclass
class FakePrometheus:
    clock: Clock
    scrape_interval_seconds: float = 15.0
    scrape_timeout_seconds: float = 10.0
    ingest_delay_seconds: float = 0.0  # every scraped sample is queryable this much later
    paused: bool = field(default=False, init=False)  # see pause()
    _targets: list[FakeTarget] = field(default_factory=list, init=False)
    _frozen: list[Labels] = field(default_factory=list, init=False)
    _series: dict[Labels, list[_Point]] = field(default_factory=dict, init=False)

    def add_target(
        self, job: str, instance: str, collect: Callable[[datetime], Exposition]
    ) -> FakeTarget:
        target = FakeTarget(job, instance, collect, next_scrape=self.clock.now())
        self._targets.append(target)
        return target

    def freeze(self, labels: Mapping[str, str]) -> None:
        """Series carrying these labels keep the value they have now (a stuck exporter)."""
        self._frozen.append(frozenset(labels.items()))

    def thaw(self, labels: Mapping[str, str]) -> None:
        self._frozen.remove(frozenset(labels.items()))

    def pause(self) -> None:
        """As under SIGSTOP: every read times out and nothing is scraped until resume()."""
        self.play()
        self.paused = True

    def resume(self) -> None:
        self.play()  # the scrapes due while paused never happen
        self.paused = False

    def play(self) -> None:
        """Scrape every target whose scrapes are due by now, in time order."""
        now = self.clock.now()
        interval = timedelta(seconds=self.scrape_interval_seconds)
        for target in self._targets:
            while target.next_scrape is not None and target.next_scrape <= now:
                if not self.paused and target.scraped:
                    self._scrape(target, target.next_scrape)
                target.next_scrape += interval

    # --- PrometheusApi -------------------------------------------------------------------

    def query(self, expr: str, at: datetime | None = None) -> list[VectorSample]:
        at = self._read(at)
        freshness = re.fullmatch(r"time\(\) - timestamp\((.+)\)", expr)
        wanted = _parse_selector(freshness.group(1) if freshness else expr)
        found = []
        for labels, points in self._matching(wanted):
            last = next((p for p in reversed(points) if p.visible_at <= at), None)
            # Never sampled, gone stale, or older than the lookback: not in the answer.
            if last is None or last.value is None:
                continue
            age = (at - last.at).total_seconds()
            if age > LOOKBACK_SECONDS:
                continue
            if freshness:  # a function's result drops the metric name, as Prometheus's does
                shown = {k: v for k, v in labels if k != "__name__"}
                found.append(VectorSample(shown, age, at))
            else:
                found.append(VectorSample(dict(labels), last.value, at))
        return found

    def series(
        self, selector: str, window_seconds: float, at: datetime | None = None
    ) -> list[SeriesSamples]:
        at = self._read(at)
        since = at - timedelta(seconds=window_seconds)
        found = []
        for labels, points in self._matching(_parse_selector(selector)):
            # A series' points are in scrape order: only the window's slice is looked at.
            first = bisect_right(points, since, key=_scraped_at)
            last = bisect_right(points, at, lo=first, key=_scraped_at)
            shown = tuple(
                (p.at, p.value)
                for p in points[first:last]
                if p.value is not None and p.visible_at <= at
            )
            if shown:
                found.append(SeriesSamples(dict(labels), shown))
        return found

    def targets(self) -> list[TargetHealth]:
        self._read(None)
        return [
            TargetHealth(
                job=t.job,
                instance=t.instance,
                labels={"job": t.job, "instance": t.instance},
                health=t.health,
                last_scrape=t.last_scrape,
                last_scrape_duration_seconds=0.005,
                last_error=t.last_error,
                scrape_interval_seconds=self.scrape_interval_seconds,
                scrape_timeout_seconds=self.scrape_timeout_seconds,
            )
            for t in self._targets
        ]

    # --- inside ------------------------------------------------------------------------

    def _read(self, at: datetime | None) -> datetime:
        if self.paused:
            raise PrometheusUnreachableError("fake prometheus is paused: no answer")
        self.play()
        return at or self.clock.now()

    def _scrape(self, target: FakeTarget, at: datetime) -> None:
        target.last_scrape = at
        own = {("job", target.job), ("instance", target.instance)}
        visible = at + timedelta(seconds=self.ingest_delay_seconds + target.ingest_delay_seconds)
        if not target.answering:
            target.health, target.last_error = TargetState.DOWN, "connection refused"
            for labels, points in self._series.items():
                if own <= labels and points[-1].value is not None:
                    points.append(_Point(at, visible, None))
            return
        target.health, target.last_error = TargetState.UP, ""
        oldest = at - RETENTION
        for name, extra, exported in target.collect(at):
            labels = frozenset({("__name__", name), *own, *extra.items()})
            points = self._series.setdefault(labels, [])
            while points and points[0].at < oldest:
                del points[0]
            value = exported
            if any(f <= labels for f in self._frozen):  # the last value it had, if any
                value = next((p.value for p in reversed(points) if p.value is not None), value)
            points.append(_Point(at, visible, value))

    def _matching(self, wanted: Labels) -> list[tuple[Labels, list[_Point]]]:
        return [(labels, points) for labels, points in self._series.items() if wanted <= labels]


_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?(?:\{(.*)\})?")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def _parse_selector(text: str) -> Labels:
    whole = _SELECTOR.fullmatch(text.strip())
    if whole is None or not (whole.group(1) or whole.group(2)):
        raise MonitoringError(f"query {text!r}: bad_data: the fake reads series selectors only")
    labels = {("__name__", whole.group(1))} if whole.group(1) else set()
    body, position = whole.group(2) or "", 0
    while position < len(body):
        matcher = _MATCHER.match(body, position)
        if matcher is None:
            raise MonitoringError(f"query {text!r}: bad_data: only = matchers are read")
        value = re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), matcher[2])
        labels.add((matcher[1], value))
        position = matcher.end()
    return frozenset(labels)
