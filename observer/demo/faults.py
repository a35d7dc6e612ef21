"""The faults a scenario injects, as declared in its file, and the score of its findings
against them.

Each fault kind is a model of its own keys (validated with the rest of the scenario) with a
local time `at`, usually an `until`, and the findings it must produce: a detector and the
subject those findings carry (a subset of theirs), part fixed by the kind and its keys, part
named when the fault is injected (the run, job or node it hit). A confounder is a fault the
observer must see through: it must produce nothing. A finding is explained by a fault when it
matches one of its expected findings and opened while the fault was on (or within the slack
after). A fault whose trigger never happened is not injected; one with a finding it must
produce and did not, missed; a finding no fault explains, unexpected. Any of them fails the
run."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator

from observer.controller.observe import AGENT_UNREACHABLE
from observer.detectors.fairness import PERSISTENT_UNFAIRNESS
from observer.detectors.gpu_health import (
    CLOCK_SLOWDOWN,
    ECC_UNCORRECTED,
    GPU_XID,
    ROW_REMAP_PENDING,
)
from observer.detectors.gpu_in_service import GPU_LOST, UNHEALTHY_GPU_IN_SERVICE
from observer.detectors.monitoring_lag import DETECTOR as MONITORING_LAG
from observer.detectors.monitoring_lag import FRESHNESS, HEARTBEAT, PIPELINE, SCRAPE
from observer.detectors.probe_release import DETECTOR as PROBE_UNRELEASED
from observer.detectors.unreleased import ALLOCATED_WITHOUT_JOB, STUCK_TERMINATING
from observer.domain import Finding
from observer.reports.compute.causes import Cause
from observer.settings.base import Group

# Time to see a fault through: the node rule's grace, a snapshot, a detection cycle.
MATCH_SLACK = timedelta(minutes=5)
LOCAL_TIME_FORMAT = "%Y-%m-%d %H:%M"
UNRELEASED_MEMORY = "unreleased_memory"  # observer/detectors/node_leaks.py
LOG_LOSS = "log_loss"  # observer/detectors/log_loss.py
GPU_DRIVER = Cause.GPU_DRIVER.value
NODE = Cause.NODE.value


@dataclass(frozen=True)
class Expected:
    """Findings a fault must produce: their detector, the subject they carry whatever the fault
    hit, the subject keys whose values the injection names, and values a key must not have."""

    detector: str
    subject: Mapping[str, str] = field(default_factory=dict)
    named: tuple[str, ...] = ()
    not_: Mapping[str, str] = field(default_factory=dict)


class FaultSpec(Group):
    """A fault as a scenario declares it: `at` and `until` are local times of the platform's
    timezone (naive here; the scenario gives them their zone)."""

    kind: str
    at: datetime
    until: datetime | None = None

    confounder: ClassVar[bool] = False
    needs_until: ClassVar[bool] = False
    # The cause the reports must give a probe run it failed (Cause in reports/compute/causes.py).
    cause: ClassVar[str | None] = None
    # What must happen while it is on for it to be injected, said when it did not.
    trigger: ClassVar[str] = ""

    @field_validator("at", "until", mode="before")
    @classmethod
    def _local_time(cls, value: Any) -> Any:
        if value is None or isinstance(value, datetime):
            return value
        try:
            # Naive: the scenario's timezone is in its settings, applied when it is played.
            return datetime.strptime(str(value), LOCAL_TIME_FORMAT)  # noqa: DTZ007
        except ValueError:
            raise ValueError(f'must be a local time "YYYY-MM-DD HH:MM", not {value!r}') from None

    def expected(self) -> tuple[Expected, ...]:
        return ()

    def ends(self) -> datetime | None:
        """When it is switched off (local, naive), if ever."""
        return self.until

    def describe(self) -> str:
        keys = {k: v for k, v in self.model_dump(exclude={"at", "until", "kind"}).items() if v}
        return self.kind + (f" ({', '.join(f'{k} {v}' for k, v in keys.items())})" if keys else "")


class UnfairScheduler(FaultSpec):
    """The scheduler serves one tenant first, always: the others wait beyond their share."""

    kind: Literal["unfair_scheduler"]
    favoured: str
    needs_until: ClassVar[bool] = True

    def expected(self) -> tuple[Expected, ...]:
        return (Expected(PERSISTENT_UNFAIRNESS, not_={"tenant": self.favoured}),)


class BriefUnfairness(FaultSpec):
    """Unfair for fewer windows than the persistence rule needs: no finding."""

    kind: Literal["brief_unfairness"]
    favoured: str
    confounder: ClassVar[bool] = True
    needs_until: ClassVar[bool] = True


class LeakedProbeProcess(FaultSpec):
    """The next probe to end while it is on leaves its GPU process, memory and all."""

    kind: Literal["leaked_probe_process"]
    needs_until: ClassVar[bool] = True
    trigger: ClassVar[str] = "no probe with a GPU process ended"

    def expected(self) -> tuple[Expected, ...]:
        return (
            Expected(UNRELEASED_MEMORY, named=("node",)),
            Expected(PROBE_UNRELEASED, named=("node", "run_id")),
        )


class LeakedAllocation(FaultSpec):
    """The scheduler counts GPUs of a node allocated with no job behind them."""

    kind: Literal["leaked_allocation"]
    node: str
    gpus: int = Field(1, ge=1)
    needs_until: ClassVar[bool] = True

    def expected(self) -> tuple[Expected, ...]:
        return (Expected(ALLOCATED_WITHOUT_JOB, {"node": self.node}),)


class StuckTerminating(FaultSpec):
    """A running job of another tenant (of `tenant`, if named) stays Terminating after its
    end, holding its GPUs."""

    kind: Literal["stuck_terminating"]
    tenant: str | None = None
    needs_until: ClassVar[bool] = True
    trigger: ClassVar[str] = "no other tenant's job was running"

    def expected(self) -> tuple[Expected, ...]:
        return (Expected(STUCK_TERMINATING, named=("job_id", "node")),)


class LogLoss(FaultSpec):
    """The next log canary to write while it is on loses `seconds` of its lines."""

    kind: Literal["log_loss"]
    seconds: float = Field(10, gt=0, le=600)
    trigger: ClassVar[str] = "no log-canary probe was in flight"

    def expected(self) -> tuple[Expected, ...]:
        return (Expected(LOG_LOSS, named=("run_id",)),)


class PrometheusStall(FaultSpec):
    """Prometheus stops scraping every target."""

    kind: Literal["prometheus_stall"]
    needs_until: ClassVar[bool] = True

    def expected(self) -> tuple[Expected, ...]:
        return tuple(
            Expected(MONITORING_LAG, {"pipeline": PIPELINE, "check": check})
            for check in (HEARTBEAT, FRESHNESS, SCRAPE)
        )


class PrometheusBlip(FaultSpec):
    """Prometheus misses `seconds` of scrapes: shorter than every hold, no finding."""

    kind: Literal["prometheus_blip"]
    seconds: float = Field(20, gt=0, le=600)
    confounder: ClassVar[bool] = True

    def ends(self) -> datetime | None:
        return self.at + timedelta(seconds=self.seconds)


class SchedulerUnreachable(FaultSpec):
    """Every call to the scheduler's API fails: blind time, retried, and no finding."""

    kind: Literal["scheduler_unreachable"]
    needs_until: ClassVar[bool] = True
    confounder: ClassVar[bool] = True


class AgentDown(FaultSpec):
    """A node's agent cannot be read."""

    kind: Literal["agent_down"]
    node: str
    needs_until: ClassVar[bool] = True

    def expected(self) -> tuple[Expected, ...]:
        return (Expected(AGENT_UNREACHABLE, {"agent": self.node}),)


class NodeDrain(FaultSpec):
    """An operator drains a node (and records it), resuming it at `until`: an intervention,
    audited, and no finding."""

    kind: Literal["node_drain"]
    node: str
    reason: str = "maintenance"
    by: str = "operator"
    confounder: ClassVar[bool] = True


class SlowMemoryRelease(FaultSpec):
    """Other tenants' jobs free their GPU memory `seconds` after they end (a real H200 frees
    it within about a second): no finding."""

    kind: Literal["slow_memory_release"]
    seconds: float = Field(4, gt=0, le=300)
    needs_until: ClassVar[bool] = True
    confounder: ClassVar[bool] = True


class PidReuse(FaultSpec):
    """The next process started on a node takes the pid of one that ended there: no
    finding."""

    kind: Literal["pid_reuse"]
    node: str
    confounder: ClassVar[bool] = True
    trigger: ClassVar[str] = "no process started on the node after one ended"


class OwnerFlap(FaultSpec):
    """The node's owner directory answers "unknown" for its running jobs for a few ticks:
    no finding."""

    kind: Literal["owner_flap"]
    node: str
    ticks: int = Field(3, ge=1, le=20)
    confounder: ClassVar[bool] = True
    trigger: ClassVar[str] = "no job was running on the node"


class GpuOffBus(FaultSpec):
    """Xid 79: a GPU falls off the bus under a job, the job fails, and the scheduler keeps
    offering the node; the GPU is reset at `until`. With `node`, a busy GPU of that node
    (GPU `gpu`, if named) under whatever job runs there; without, the GPU of the next
    GPU-busy probe anywhere, whose failed run the reports must put down to the GPU."""

    kind: Literal["gpu_off_bus"]
    node: str | None = None
    gpu: int | None = Field(None, ge=0)
    trigger: ClassVar[str] = "no job ran on the GPU"
    cause: ClassVar[str | None] = GPU_DRIVER

    def expected(self) -> tuple[Expected, ...]:
        return (
            Expected(GPU_XID, {"xid": "79"}, named=("node",)),
            Expected(GPU_LOST, named=("node",)),
            Expected(UNHEALTHY_GPU_IN_SERVICE, named=("node",)),
        )


class NodeFailure(FaultSpec):
    """The node a probe runs on fails under it (`scontrol update state=down`): every job there
    ends NODE_FAIL and is queued again, and the node is back at `until`. With `node`, that
    node once a probe runs there; without, the next probe's node. The reports must put each
    run it hit down to the node, a run that passed on its next attempt too."""

    kind: Literal["node_failure"]
    node: str | None = None
    reason: str = "node failure"
    needs_until: ClassVar[bool] = True
    trigger: ClassVar[str] = "no probe ran on the node"
    cause: ClassVar[str | None] = NODE


class EccBurst(FaultSpec):
    """Uncorrected ECC errors on a GPU and a row remap pending until it is reset at
    `until`."""

    kind: Literal["ecc_burst"]
    node: str
    gpu: int = Field(0, ge=0)
    errors: int = Field(8, ge=1)

    def expected(self) -> tuple[Expected, ...]:
        return (
            Expected(ECC_UNCORRECTED, {"node": self.node}),
            Expected(ROW_REMAP_PENDING, {"node": self.node}),
        )


class ThermalSlowdown(FaultSpec):
    """A busy GPU of the node (GPU `gpu`, if named) is slowed by hardware thermal
    protection."""

    kind: Literal["thermal_slowdown"]
    node: str
    gpu: int | None = Field(None, ge=0)
    needs_until: ClassVar[bool] = True
    trigger: ClassVar[str] = "no job ran on the node's GPU"

    def expected(self) -> tuple[Expected, ...]:
        return (Expected(CLOCK_SLOWDOWN, {"node": self.node}),)


class CommDegraded(FaultSpec):
    """The link between two GPUs of the node (`pair`, "a-b") runs at half its rate: the next
    gpu-comm probe there fails naming the pair, and the reports must put it down to the
    GPUs. Nothing else notices: no finding."""

    kind: Literal["comm_degraded"]
    node: str
    pair: str = Field("0-1", pattern=r"^\d+-\d+$")
    needs_until: ClassVar[bool] = True
    trigger: ClassVar[str] = "no gpu-comm probe ran on the node"
    cause: ClassVar[str | None] = GPU_DRIVER


AnyFault = Annotated[
    UnfairScheduler
    | BriefUnfairness
    | LeakedProbeProcess
    | LeakedAllocation
    | StuckTerminating
    | LogLoss
    | PrometheusStall
    | PrometheusBlip
    | SchedulerUnreachable
    | AgentDown
    | NodeDrain
    | SlowMemoryRelease
    | PidReuse
    | OwnerFlap
    | GpuOffBus
    | NodeFailure
    | EccBurst
    | ThermalSlowdown
    | CommDegraded,
    Field(discriminator="kind"),
]
KINDS: tuple[type[FaultSpec], ...] = AnyFault.__origin__.__args__  # type: ignore[attr-defined]


@dataclass
class Injection:
    """What became of a declared fault: when it was on, and what it hit (one subject per run,
    job or node); never started, it was not injected."""

    fault: FaultSpec
    start: datetime | None = None
    end: datetime | None = None
    hit: list[dict[str, str]] = field(default_factory=list)

    @property
    def injected(self) -> bool:
        return self.start is not None

    @property
    def subjects(self) -> list[str]:
        return [", ".join(f"{k}={v}" for k, v in sorted(hit.items())) for hit in self.hit]

    def expected(self) -> list[tuple[Expected, dict[str, str]]]:
        """Each finding this injection must produce, as (what, the subject it must carry)."""
        hits = self.hit or [{}]
        return [
            (e, {**e.subject, **{key: hit[key] for key in e.named}})
            for hit in hits
            for e in self.fault.expected()
        ]

    def expected_causes(self) -> list[tuple[str, str]]:
        """Each probe run it hit whose failure the reports must put down to its cause."""
        cause = self.fault.cause
        return [(hit["run_id"], cause) for hit in self.hit if cause and hit.get("run_id")]

    def on_at(self, at: datetime) -> bool:
        if self.start is None:
            return False
        return self.start <= at <= (self.end or at) + MATCH_SLACK

    def explains(self, finding: Finding) -> bool:
        return self.on_at(finding.opened_at) and any(
            _matches(finding, e, subject) for e, subject in self.expected()
        )


def _matches(finding: Finding, expected: Expected, subject: Mapping[str, str]) -> bool:
    return (
        finding.detector == expected.detector
        and all(finding.subject.get(k) == v for k, v in subject.items())
        and not any(finding.subject.get(k) == v for k, v in expected.not_.items())
    )


@dataclass(frozen=True)
class Score:
    injections: Sequence[Injection]
    found: Sequence[list[Finding]]  # per injection, the findings it explains
    unmet: Sequence[list[tuple[Expected, dict[str, str]]]]  # per injection, never found
    unexpected: list[Finding]
    # per injection: (run id, the cause it must have, the cause the reports gave)
    miscaused: Sequence[list[tuple[str, str, str | None]]]

    @property
    def missed(self) -> list[Injection]:
        """Not injected, a finding it must produce never came, or a run it failed put down
        to another cause."""
        rows = zip(self.injections, self.unmet, self.miscaused, strict=True)
        return [i for i, unmet, wrong in rows if not i.injected or unmet or wrong]

    @property
    def passed(self) -> bool:
        return not self.missed and not self.unexpected

    def confounders_on(self, finding: Finding) -> list[str]:
        """The confounders that were on when an unexpected finding opened."""
        at = finding.opened_at
        return [i.fault.kind for i in self.injections if i.fault.confounder and i.on_at(at)]

    def delays_seconds(self, index: int) -> dict[str, float]:
        """Per expected detector, from the fault's start to the first finding that met it."""
        start = self.injections[index].start
        first: dict[str, float] = {}
        for finding in sorted(self.found[index], key=lambda f: f.opened_at):
            if start is not None and finding.detector not in first:
                first[finding.detector] = (finding.opened_at - start).total_seconds()
        return first

    def by_detector(self) -> dict[str, dict[str, float | int | None]]:
        """Per detector: expected findings and how many came (recall), findings and how many a
        fault explains (precision), the median delay from fault to first finding."""
        rows: dict[str, dict[str, Any]] = {}

        def row(detector: str) -> dict[str, Any]:
            return rows.setdefault(
                detector, {"expected": 0, "met": 0, "findings": 0, "explained": 0, "delays": []}
            )

        for index, injection in enumerate(self.injections):
            if not injection.injected:
                continue
            unmet = self.unmet[index]
            for expected, subject in injection.expected():
                r = row(expected.detector)
                r["expected"] += 1
                r["met"] += (expected, subject) not in unmet
            for detector, delay in self.delays_seconds(index).items():
                row(detector)["delays"].append(delay)
            for finding in self.found[index]:
                row(finding.detector)["explained"] += 1
        for finding in [*(f for found in self.found for f in found), *self.unexpected]:
            row(finding.detector)["findings"] += 1
        return {
            detector: {
                "expected": r["expected"],
                "met": r["met"],
                "findings": r["findings"],
                "explained": r["explained"],
                "recall": r["met"] / r["expected"] if r["expected"] else None,
                "precision": r["explained"] / r["findings"] if r["findings"] else None,
                "median_delay_seconds": statistics.median(r["delays"]) if r["delays"] else None,
            }
            for detector, r in sorted(rows.items())
        }


def score(
    injections: Sequence[Injection],
    findings: Iterable[Finding],
    causes: Mapping[str, str | None] | None = None,
) -> Score:
    """`causes`: the cause the reports gave each failed probe run (run id -> cause)."""
    found: list[list[Finding]] = [[] for _ in injections]
    unexpected = []
    for finding in findings:
        at = next((n for n, i in enumerate(injections) if i.explains(finding)), None)
        if at is None:
            unexpected.append(finding)
        else:
            found[at].append(finding)
    unmet = [
        [
            (e, subject)
            for e, subject in i.expected()
            if not any(_matches(f, e, subject) for f in found[n])
        ]
        if i.injected
        else []
        for n, i in enumerate(injections)
    ]
    given = causes or {}
    miscaused = [
        [
            (run, cause, given.get(run))
            for run, cause in i.expected_causes()
            if given.get(run) != cause
        ]
        for i in injections
    ]
    return Score(injections, found, unmet, unexpected, miscaused)
