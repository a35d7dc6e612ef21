"""Log loss, from the lines of one log-canary run as the log backend delivered them.

The canary writes `observer-canary run=<run_id> seq=<n> ts=<unix seconds>` for n = 0..N-1,
padded ones followed by ` pad=<k>:` and k times "x" (a burst past rotation thresholds).
Rules (each run is one Event):
- log_loss: every line must arrive exactly once and in order. Missing lines are critical;
  duplicated, out-of-order, torn (malformed) lines and sequence numbers the canary never
  wrote are warnings. Each missing range is attributed to the log rotations and pipeline
  gaps that overlap the time its lines were written, or else to the nearest one;
- log_delivery_latency: the 95th percentile of delivery latency (delivery time minus the
  line's own write time) above the configured limit.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

from observer.domain import CANARY_MARK, Finding, FindingKind, JsonValue, Severity
from observer.settings.detectors import LogLossSettings

_CANARY = re.compile(
    rf"{CANARY_MARK} run=(?P<run>\S+) seq=(?P<seq>\d+) ts=(?P<ts>\d+(?:\.\d+)?)"
    r"(?: pad=(?P<pad>\S*))?(?:\s|$)"
)
_PADDING = re.compile(r"(?P<count>\d+):(?P<pad>x*)")
Cause = Literal["rotation", "gap"]
# Evidence stays readable when a pipeline loses every other line: the first ranges, and totals
MAX_EVIDENCE_RANGES = 50


class Delivered(Protocol):
    """A delivered line as the log boundary returns it (log_readers.base.DeliveredLine)."""

    @property
    def text(self) -> str: ...
    @property
    def delivered_at(self) -> datetime | None: ...
    @property
    def backend_timestamp(self) -> datetime | None: ...


@dataclass(frozen=True, slots=True)
class CanaryLine:
    run_id: str
    seq: int
    written_at: datetime


@dataclass(frozen=True, slots=True)
class Attribution:
    """A rotation (an instant: start == end) or a pipeline gap a missing range falls in
    (`overlaps`) or, when none does, lies nearest to (`distance_seconds` away)."""

    cause: Cause
    start: datetime
    end: datetime
    overlaps: bool
    distance_seconds: float


@dataclass(frozen=True, slots=True)
class MissingRange:
    """Sequence numbers first..last never delivered. Their lines were written after
    `written_after` (the delivered line before them) and before `written_before` (the one
    after); None where the range starts or ends the run."""

    first_seq: int
    last_seq: int
    written_after: datetime | None
    written_before: datetime | None
    attributions: tuple[Attribution, ...]

    @property
    def lines(self) -> int:
        return self.last_seq - self.first_seq + 1


@dataclass(frozen=True, slots=True)
class Latency:
    """Delivery latency over the first delivery of each line whose delivery time is known;
    `basis` names the times used (delivered_at, backend_timestamp)."""

    lines: int
    basis: str
    p50_seconds: float
    p95_seconds: float
    max_seconds: float


@dataclass(frozen=True, slots=True)
class CanaryReport:
    run_id: str
    expected: int
    received: int  # distinct expected sequence numbers delivered
    missing: tuple[MissingRange, ...]
    duplicated: Mapping[int, int]  # seq -> times delivered, for lines delivered more than once
    out_of_order: int  # lines first delivered after a line with a higher sequence number
    unexpected: tuple[int, ...]  # sequence numbers outside 0..expected-1
    malformed: int  # lines naming the run that are not whole canary lines (torn lines)
    latency: Latency | None

    @property
    def missing_lines(self) -> int:
        return sum(r.lines for r in self.missing)

    @property
    def clean(self) -> bool:
        return not (
            self.missing
            or self.duplicated
            or self.out_of_order
            or self.unexpected
            or self.malformed
        )


def parse_canary(line: str) -> CanaryLine | None:
    """The canary line in `line`, or None; a padded line cut short (a pipeline's line-size
    limit, a runtime splitting long lines) is None too: not a whole canary line."""
    match = _CANARY.search(line)
    if match is None:
        return None
    if match["pad"] is not None:
        padding = _PADDING.fullmatch(match["pad"])
        if padding is None or int(padding["count"]) != len(padding["pad"]):
            return None
    seconds, _, fraction = match["ts"].partition(".")
    written_at = datetime.fromtimestamp(int(seconds), UTC).replace(
        microsecond=int(fraction[:6].ljust(6, "0"))
    )
    return CanaryLine(match["run"], int(match["seq"]), written_at)


def analyse(
    run_id: str,
    expected_lines: int,
    delivered: Sequence[Delivered],
    rotations: Sequence[datetime] = (),
    gaps: Sequence[tuple[datetime, datetime]] = (),
) -> CanaryReport:
    """`delivered` in the order the reader returned it; `rotations` the instants the log was
    rotated and `gaps` the [start, end] intervals the pipeline is known to have been down."""
    mention = re.compile(rf"run={re.escape(run_id)}(?:\s|$)")
    counts: Counter[int] = Counter()
    first: dict[int, tuple[CanaryLine, Delivered]] = {}
    out_of_order = malformed = 0
    highest = -1
    for line in delivered:
        canary = parse_canary(line.text)
        if canary is None:
            if mention.search(line.text):
                malformed += 1
            continue
        if canary.run_id != run_id:
            continue
        counts[canary.seq] += 1
        if canary.seq not in first:
            first[canary.seq] = (canary, line)
            if canary.seq < highest:
                out_of_order += 1
        highest = max(highest, canary.seq)
    written = {seq: canary.written_at for seq, (canary, _) in first.items()}
    missing = tuple(
        _missing_range(lo, hi, written, rotations, gaps)
        for lo, hi in _ranges(s for s in range(expected_lines) if s not in counts)
    )
    return CanaryReport(
        run_id=run_id,
        expected=expected_lines,
        received=sum(1 for s in counts if 0 <= s < expected_lines),
        missing=missing,
        duplicated={s: n for s, n in sorted(counts.items()) if n > 1},
        out_of_order=out_of_order,
        unexpected=tuple(sorted(s for s in counts if s >= expected_lines)),
        malformed=malformed,
        latency=_latency(first.values()),
    )


# The detectors findings() raises events for (the controller exports their counters at 0).
EVENT_DETECTORS = ("log_loss", "log_delivery_latency")


def findings(
    report: CanaryReport, *, tenant: str, pipeline: str, rules: LogLossSettings, at: datetime
) -> list[Finding]:
    """Events for one run; `pipeline` names the reader (loki, files:/var/log/...), `at` is
    when the run ended. A clean, timely run gives none."""
    subject = {"run_id": report.run_id, "tenant": tenant, "pipeline": pipeline}
    latency = _latency_evidence(report.latency)
    result = []
    if not report.clean:
        result.append(
            Finding(
                detector="log_loss",
                kind=FindingKind.EVENT,
                subject=subject,
                severity=Severity.CRITICAL if report.missing else Severity.WARNING,
                summary=_loss_summary(report, pipeline),
                opened_at=at,
                closed_at=at,
                evidence={**_loss_evidence(report), "latency_seconds": latency},
            )
        )
    if report.latency is not None and report.latency.p95_seconds > rules.delivery_p95_max_seconds:
        result.append(
            Finding(
                detector="log_delivery_latency",
                kind=FindingKind.EVENT,
                subject=subject,
                severity=Severity.WARNING,
                summary=f"log canary {report.run_id} via {pipeline}: p95 delivery latency "
                f"{report.latency.p95_seconds:.1f} s (limit "
                f"{rules.delivery_p95_max_seconds:g} s)",
                opened_at=at,
                closed_at=at,
                evidence={
                    "latency_seconds": latency,
                    "p95_max_seconds": rules.delivery_p95_max_seconds,
                    "rule": f"p95 of (delivery time - written time) over the run's lines <= "
                    f"{rules.delivery_p95_max_seconds:g} s",
                },
            )
        )
    return result


# --- analysis ----------------------------------------------------------------------------


def _ranges(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Ascending integers as inclusive runs: 1, 2, 3, 7 -> (1, 3), (7, 7)."""
    runs: list[tuple[int, int]] = []
    for s in seqs:
        if runs and runs[-1][1] == s - 1:
            runs[-1] = (runs[-1][0], s)
        else:
            runs.append((s, s))
    return runs


def _missing_range(
    lo: int,
    hi: int,
    written: Mapping[int, datetime],
    rotations: Sequence[datetime],
    gaps: Sequence[tuple[datetime, datetime]],
) -> MissingRange:
    after, before = written.get(lo - 1), written.get(hi + 1)
    return MissingRange(lo, hi, after, before, _attribute(after, before, rotations, gaps))


def _attribute(
    after: datetime | None,
    before: datetime | None,
    rotations: Sequence[datetime],
    gaps: Sequence[tuple[datetime, datetime]],
) -> tuple[Attribution, ...]:
    candidates: list[tuple[Cause, datetime, datetime]] = [
        *(("rotation", r, r) for r in rotations),
        *(("gap", start, end) for start, end in gaps),
    ]
    found = []
    for cause, start, end in candidates:
        # how far the event lies outside [after, before]; <= 0: they overlap
        distance = max(
            (after - end).total_seconds() if after is not None else -math.inf,
            (start - before).total_seconds() if before is not None else -math.inf,
        )
        found.append(Attribution(cause, start, end, distance <= 0, max(distance, 0.0)))
    overlapping = sorted((a for a in found if a.overlaps), key=lambda a: a.start)
    return tuple(overlapping or sorted(found, key=lambda a: a.distance_seconds)[:1])


def _latency(firsts: Iterable[tuple[CanaryLine, Delivered]]) -> Latency | None:
    seconds = []
    basis = set()
    for canary, line in firsts:
        if line.delivered_at is not None:
            basis.add("delivered_at")
            seconds.append((line.delivered_at - canary.written_at).total_seconds())
        elif line.backend_timestamp is not None:
            basis.add("backend_timestamp")
            seconds.append((line.backend_timestamp - canary.written_at).total_seconds())
    if not seconds:
        return None
    seconds.sort()
    return Latency(
        lines=len(seconds),
        basis="+".join(sorted(basis)),
        p50_seconds=_percentile(seconds, 50),
        p95_seconds=_percentile(seconds, 95),
        max_seconds=seconds[-1],
    )


def _percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest rank: a value that was measured, never an interpolation."""
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# --- evidence ----------------------------------------------------------------------------


def _loss_summary(report: CanaryReport, pipeline: str) -> str:
    parts = []
    if report.missing:
        shown = report.missing[:3]
        ranges = ", ".join(_seq_span(r.first_seq, r.last_seq) for r in shown)
        more = f" and {len(report.missing) - 3} more ranges" if len(report.missing) > 3 else ""
        causes = sorted({_cause_words(a) for r in shown for a in r.attributions})
        where = f" ({'; '.join(causes)})" if causes else ""
        parts.append(
            f"{report.missing_lines} of {report.expected} lines missing: {ranges}{more}{where}"
        )
    if report.duplicated:
        extra = sum(n - 1 for n in report.duplicated.values())
        parts.append(f"{extra} duplicate deliveries of {len(report.duplicated)} lines")
    if report.out_of_order:
        parts.append(f"{report.out_of_order} lines out of order")
    if report.malformed:
        parts.append(f"{report.malformed} torn lines")
    if report.unexpected:
        parts.append(f"{len(report.unexpected)} sequence numbers the canary never wrote")
    return f"log canary {report.run_id} via {pipeline}: " + ", ".join(parts)


def _loss_evidence(report: CanaryReport) -> dict[str, JsonValue]:
    duplicated = _runs_with_counts(report.duplicated)
    unexpected = _ranges(report.unexpected)
    return {
        "expected_lines": report.expected,
        "received_lines": report.received,
        "missing_lines": report.missing_lines,
        "missing_range_count": len(report.missing),
        "missing_ranges": [
            {
                "first_seq": r.first_seq,
                "last_seq": r.last_seq,
                "lines": r.lines,
                "written_after": _iso(r.written_after),
                "written_before": _iso(r.written_before),
                "attributed_to": [
                    {
                        "cause": a.cause,
                        "start": _iso(a.start),
                        "end": _iso(a.end),
                        "overlaps": a.overlaps,
                        "distance_seconds": round(a.distance_seconds, 3),
                    }
                    for a in r.attributions
                ],
            }
            for r in report.missing[:MAX_EVIDENCE_RANGES]
        ],
        "duplicate_deliveries": sum(n - 1 for n in report.duplicated.values()),
        # [first_seq, last_seq, times delivered] for runs of lines delivered equally often
        "duplicated_ranges": [list(r) for r in duplicated[:MAX_EVIDENCE_RANGES]],
        "out_of_order_lines": report.out_of_order,
        "malformed_lines": report.malformed,
        "unexpected_seq_ranges": [list(r) for r in unexpected[:MAX_EVIDENCE_RANGES]],
        "rule": f"each of seq 0..{report.expected - 1} delivered exactly once, in sequence "
        "order, as a whole line",
    }


def _latency_evidence(latency: Latency | None) -> dict[str, JsonValue] | None:
    if latency is None:
        return None
    return {
        "lines": latency.lines,
        "basis": latency.basis,
        "p50": round(latency.p50_seconds, 3),
        "p95": round(latency.p95_seconds, 3),
        "max": round(latency.max_seconds, 3),
    }


def _runs_with_counts(counts: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """Consecutive sequence numbers delivered equally often, as (first, last, times)."""
    runs: list[tuple[int, int, int]] = []
    for seq, n in sorted(counts.items()):
        if runs and runs[-1][1] == seq - 1 and runs[-1][2] == n:
            runs[-1] = (runs[-1][0], seq, n)
        else:
            runs.append((seq, seq, n))
    return runs


def _cause_words(a: Attribution) -> str:
    if a.cause == "rotation":
        what = f"rotation at {_iso(a.start)}"
    else:
        what = f"pipeline gap {_iso(a.start)} to {_iso(a.end)}"
    return f"in the {what}" if a.overlaps else f"nearest: {what}, {a.distance_seconds:.1f} s away"


def _seq_span(first: int, last: int) -> str:
    return f"seq {first}" if first == last else f"seq {first}-{last}"


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None
