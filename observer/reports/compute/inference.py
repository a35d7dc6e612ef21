"""The inference service's day: per window (and the whole day) how often it answered and how
fast, and each change it carried through (start, and in each window a scale-out and a rolling
restart) with the windows it started in, its time to ready and how long its replicas waited
for a node. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from observer.probes.windows import Calendar
from observer.records import InferencePhase, InferenceSample, PhaseKind

WHOLE_DAY = ""  # the row over every look, in or out of a window
OUTSIDE_WINDOWS = "-"  # the looks no window holds


@dataclass(frozen=True, slots=True)
class ServiceWindow:
    """Looks in one window once the service was up (those while it started are its time to
    ready): `available`, those in which some ready replica answered; latencies of the
    answered requests (None: none answered)."""

    window: str
    looks: int
    available: int
    requests: int
    errors: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None

    @property
    def availability(self) -> float | None:
        return self.available / self.looks if self.looks else None


@dataclass(frozen=True, slots=True)
class ServicePhase:
    kind: PhaseKind
    phase: InferencePhase
    windows: tuple[str, ...]  # those it started in (OUTSIDE_WINDOWS: none): each has its own

    @property
    def ready_seconds(self) -> float:
        return (self.phase.ready_at - self.phase.started_at).total_seconds()


@dataclass(frozen=True, slots=True)
class InferenceFigures:
    services: tuple[str, ...]
    windows: tuple[ServiceWindow, ...]  # the whole day first, then each window in order
    phases: tuple[ServicePhase, ...]  # in the order they became ready


def inference_figures(
    samples: Sequence[InferenceSample], phases: Sequence[InferencePhase], calendar: Calendar
) -> InferenceFigures | None:
    """None when the probe did not run that day (it is opt-in)."""
    if not samples and not phases:
        return None
    starting = [(p.started_at, p.ready_at) for p in phases if p.kind is PhaseKind.START]
    serving = [s for s in samples if not any(a <= s.at < b for a, b in starting)]
    groups: dict[str, list[InferenceSample]] = {WHOLE_DAY: serving}
    for window in calendar.windows:
        groups[window.name] = []
    for sample in serving:
        for name in calendar.windows_at(sample.at) or [OUTSIDE_WINDOWS]:
            groups.setdefault(name, []).append(sample)
    return InferenceFigures(
        services=tuple(sorted({s.service for s in samples} | {p.service for p in phases})),
        windows=tuple(_window(name, looks) for name, looks in groups.items() if looks),
        phases=tuple(
            ServicePhase(p.kind, p, tuple(calendar.windows_at(p.started_at)) or (OUTSIDE_WINDOWS,))
            for p in phases
        ),
    )


def _window(name: str, looks: Sequence[InferenceSample]) -> ServiceWindow:
    latencies = sorted(ms for look in looks for ms in look.latencies_ms)
    return ServiceWindow(
        window=name,
        looks=len(looks),
        available=sum(look.requests > look.errors for look in looks),
        requests=sum(look.requests for look in looks),
        errors=sum(look.errors for look in looks),
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        p99_ms=percentile(latencies, 99),
    )


def percentile(ordered: Sequence[float], rank: float) -> float | None:
    """The nearest-rank percentile of values in ascending order (None: no values)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(rank / 100 * len(ordered)) - 1)]
