"""The faults the demo injects, declared before it starts, and the score of its findings
against them.

Each fault has a window of local times on the first day, a trigger that must happen in it,
and the findings it must produce: a detector and the subject those findings carry (a subset
of theirs), part fixed here, part named when the fault is injected (the run, job or node it
hit). A finding is explained by a fault when it matches one of those and opened while the
fault was on (or within the slack after). A fault whose trigger never happened is not
injected; one with a finding it must produce and did not, missed; a finding no fault
explains, unexpected. Any of them fails the demo."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta

from observer.domain import Finding

# Time to see a fault through: the node rule's grace, a snapshot, a detection cycle.
MATCH_SLACK = timedelta(minutes=5)


@dataclass(frozen=True)
class Expected:
    """Findings a fault must produce: their detector, the subject they carry whatever the fault
    hit, and the subject keys whose values the injection names."""

    detector: str
    subject: Mapping[str, str] = field(default_factory=dict)
    named: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fault:
    """A fault as declared: its kind, what a person would call it, its window, what must happen
    in the window for it to be injected (`trigger` says what was missing when it did not), and
    the findings it must produce."""

    kind: str
    name: str
    on: time
    off: time
    trigger: str
    expected: tuple[Expected, ...]


FAULTS = (
    Fault(
        "unfair_scheduler",
        "unfair scheduling: prod always served first",
        time(1, 50),
        time(12, 5),
        "the scheduler was never switched to favour prod",
        (Expected("persistent_unfairness", {"tenant": "research"}),),
    ),
    Fault(
        "leaked_probe_process",
        "leaked GPU process of the next probe to end",
        time(3, 0),
        time(3, 45),
        "no probe ended",
        (
            Expected("unreleased_memory", named=("node",)),
            Expected("probe_unreleased", named=("node", "run_id")),
        ),
    ),
    Fault(
        "log_loss",
        "log-loss burst: 10 s of canary lines never delivered",
        time(10, 0),
        time(11, 30),
        "no log-canary probe was in flight",
        (Expected("log_loss", named=("run_id",)),),
    ),
    Fault(
        "stuck_terminating",
        "another tenant's pod stuck Terminating",
        time(10, 20),
        time(11, 30),
        "no other tenant's job was running",
        (Expected("stuck_terminating", named=("job_id", "node")),),
    ),
    Fault(
        "prometheus_stall",
        "monitoring stall: Prometheus stopped scraping",
        time(14, 0),
        time(14, 20),
        "Prometheus was not scraping to begin with",
        tuple(
            Expected("monitoring_lag", {"pipeline": "prometheus", "check": check})
            for check in ("heartbeat", "freshness", "scrape")
        ),
    ),
)


@dataclass
class Injection:
    """What became of a declared fault: when it was on, and what it hit (one subject per run,
    job or node); never started, it was not injected."""

    fault: Fault
    start: datetime | None = None
    end: datetime | None = None
    hit: list[dict[str, str]] = field(default_factory=list)

    @property
    def injected(self) -> bool:
        return self.start is not None

    @property
    def subjects(self) -> list[str]:
        return [", ".join(f"{k}={v}" for k, v in sorted(hit.items())) for hit in self.hit]

    def expected(self) -> list[tuple[str, dict[str, str]]]:
        """Each finding this injection must produce, as (detector, subject)."""
        hits = self.hit or [{}]
        return [
            (e.detector, {**e.subject, **{key: hit[key] for key in e.named}})
            for hit in hits
            for e in self.fault.expected
        ]

    def explains(self, finding: Finding) -> bool:
        if self.start is None:
            return False
        end = (self.end or finding.opened_at) + MATCH_SLACK
        return self.start <= finding.opened_at <= end and any(
            _matches(finding, detector, subject) for detector, subject in self.expected()
        )


def _matches(finding: Finding, detector: str, subject: Mapping[str, str]) -> bool:
    return finding.detector == detector and all(
        finding.subject.get(k) == v for k, v in subject.items()
    )


@dataclass(frozen=True)
class Score:
    found: Mapping[str, list[Finding]]  # fault kind -> the findings it explains
    unmet: Mapping[str, list[tuple[str, dict[str, str]]]]  # kind -> expected, never found
    missed: list[Injection]  # not injected, or a finding it must produce never came
    unexpected: list[Finding]


def score(injections: Sequence[Injection], findings: Iterable[Finding]) -> Score:
    found: dict[str, list[Finding]] = {i.fault.kind: [] for i in injections}
    unexpected = []
    for finding in findings:
        injection = next((i for i in injections if i.explains(finding)), None)
        if injection is None:
            unexpected.append(finding)
        else:
            found[injection.fault.kind].append(finding)
    unmet = {
        i.fault.kind: [
            (detector, subject)
            for detector, subject in i.expected()
            if not any(_matches(f, detector, subject) for f in found[i.fault.kind])
        ]
        for i in injections
        if i.injected
    }
    missed = [i for i in injections if not i.injected or unmet[i.fault.kind]]
    return Score(found, unmet, missed, unexpected)
