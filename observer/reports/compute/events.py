"""The figures of what happened around the platform in a period: alerts fired, manual
interventions, report deliveries, findings, and the observer's own blind time. Pure."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from observer.detectors.gpu_health import XID_SOURCE_UNAVAILABLE
from observer.detectors.node_leaks import OWNER_STATE_UNKNOWN
from observer.domain import STALE_AFTER_INTERVALS, Finding, FindingKind, JsonValue, Severity
from observer.records import (
    DELIVERY_FAILED,
    WATCHABLE,
    ControllerRestart,
    ControllerRun,
    InterventionSource,
    StoredDelivery,
    StoredIntervention,
    controller_not_running,
    controller_restarts,
)
from observer.reports.compute import gpu_incidents
from observer.reports.compute import interventions as detected_interventions
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.findings import Sentence, describe
from observer.reports.compute.notes import Note, named

# Conditions during which the observer could not see a source, by source.
BLIND_DETECTORS = {
    "nvml_unavailable": "nvml",
    "gpu_lost": "nvml",
    XID_SOURCE_UNAVAILABLE: "xid",
    "agent_unreachable": "agents",
    "prometheus_unreachable": "prometheus",
    "log_pipeline_unreachable": "logs",
    "alertmanager_unreachable": "alerts",
    "store_unreachable": "store",
    "accounting_unreachable": "accounting",
    # The scheduler shows the observer its own jobs alone (Slurm's PrivateData=jobs): whatever
    # is judged from every tenant's jobs was not seen, never "none there".
    "scheduler_partly_visible": "scheduler",
}
BLIND_SOURCES = (
    "controller",
    "store",
    "scheduler",
    "accounting",
    "agents",
    "nvml",
    "xid",
    "prometheus",
    "logs",
    "alerts",
)
# Sources one node's agent stands for: blind there, the observer still sees the other nodes.
NODE_SOURCES = frozenset({"agents", "nvml", "xid"})
# What the node agents read on their node: set up, or not, with them.
_READ_BY_AGENTS = ("nvml", "xid")
SCHEDULER_GAP = "snapshot_gap"
NOT_SET_UP = "not_set_up"  # a source the settings never configured: blind the whole period
NODE_NAMES = 10  # nodes named in a sentence; a large fleet's are counted beyond


@dataclass(frozen=True, slots=True)
class AlertCount:
    name: str
    severity: str | None
    count: int


@dataclass(frozen=True, slots=True)
class AlertFigures:
    """Firings that started in the period, ignored names left out. `total` None: no alert
    source is set up (reports.alertmanager_url)."""

    total: int | None
    by_name: tuple[AlertCount, ...]


@dataclass(frozen=True, slots=True)
class InterventionItem:
    at: datetime
    source: str  # "recorded" | "detected"
    # detected: drain, resume, cordon, uncordon, taints_changed, job_cancelled, quota_changed
    action: str
    by: str  # "" when the platform does not say who
    reason: str
    subject: Mapping[str, str]
    detail: Mapping[str, JsonValue]
    audited_by: str | None  # detected: who recorded it, when a record accounts for it


@dataclass(frozen=True, slots=True)
class InterventionFigures:
    """`total` counts each intervention once: detected ones (with the record that audits
    each, if any) and records that audit nothing detected (what the observer cannot see)."""

    total: int
    recorded: int
    detected: int
    unaudited: int  # detected with no record naming the same subject close to it
    items: tuple[InterventionItem, ...]


@dataclass(frozen=True, slots=True)
class DeliveryItem:
    at: datetime
    report: str  # e.g. "daily-2026-11-30"
    channel: str
    attempts: int
    detail: str | None  # the channel's answer, secrets masked


@dataclass(frozen=True, slots=True)
class DeliveryFigures:
    """Deliveries of reports made in the period (the daily summary lists those of the reports
    before it): how many, and each that failed. `channels`: where reports go besides the
    directory, as configured; none: the directory is the only delivery."""

    total: int
    failed: int
    channels: tuple[str, ...]
    failures: tuple[DeliveryItem, ...]


@dataclass(frozen=True, slots=True)
class FindingItem:
    detector: str
    kind: str
    severity: str
    summary: str  # the stored English, as the JSON report and the CLI give it
    sentence: Sentence | None  # the summary in Notes (findings.describe)
    subject: Mapping[str, str]
    opened_at: datetime
    closed_at: datetime | None
    status: str  # event, opened (and still open at the end), opened_closed, closed, open
    evidence: Mapping[str, JsonValue]


@dataclass(frozen=True, slots=True)
class Incident:
    """Findings that share a cause and a time: one Prometheus stall seen by every check, one
    leak seen at the node, by the probe and by the scheduler. `subject`: what they share;
    `findings`: indices into FindingFigures.items."""

    opened_at: datetime
    closed_at: datetime | None  # None: a member is still open
    subject: Mapping[str, str]
    severity: str  # the worst of its members
    detectors: tuple[str, ...]
    findings: tuple[int, ...]
    new: bool  # a member was raised or opened in the period


@dataclass(frozen=True, slots=True)
class DetectorCounts:
    """Per detector in a period: conditions opened, closed, open at its end; events raised."""

    opened: int
    closed: int
    still_open: int
    events: int


@dataclass(frozen=True, slots=True)
class FindingFigures:
    opened: int
    closed: int
    still_open: int
    events: int
    critical: int  # opened or raised in the period with critical severity
    by_detector: Mapping[str, DetectorCounts]
    items: tuple[FindingItem, ...]
    incidents: tuple[Incident, ...]

    @property
    def incidents_opened(self) -> int:
        return sum(1 for i in self.incidents if i.new)


@dataclass(frozen=True, slots=True)
class BlindPeriod:
    """`cause`: the condition's detector, SCHEDULER_GAP, or for the controller why it was
    down (a RestartCause)."""

    source: str
    subject: str
    start: datetime
    end: datetime
    cause: str

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True, slots=True)
class PartBlind:
    """A node source blind on part of the fleet: `everywhere_seconds` it was blind on every
    node; beyond that, `hours` of the GPUs (`unit` "gpu": NVML, Xid; a node's NVML down is
    each of its GPUs) or of the nodes ("node": the agents, or where the scheduler does not
    say how many GPUs each node has) it could not see; `share`: both, of the layer's capacity
    (its GPUs' or nodes' time in the period)."""

    everywhere_seconds: float
    unit: str
    hours: float
    share: float


@dataclass(frozen=True, slots=True)
class BlindFigures:
    """Time the observer could not see a source. Per source set up: the union of its periods
    (two agents out at once count once), and per agent that was blind; total: the union of
    all. `share`: the fleet's blind share of the period, what decides whether a verdict can be
    given: a source blind everywhere counts whole, a node's agent count as that node's part of
    the fleet, a lost GPU as that GPU's (one GPU of 48 for two hours: two GPU-hours, 0.17 %;
    its node's part, where the scheduler does not say how many GPUs the nodes have).
    `by_source_share`: each source's share of its layer's capacity, the same way;
    `by_source_part`: the node sources blind on part of the fleet, as what they were.
    `everywhere_seconds`: the union of the periods blind on every node.
    `not_set_up`: sources not configured at all, never observed (a source set up that was
    never reachable is blind all along, never "not set up")."""

    total_seconds: float
    share: float | None
    by_source: Mapping[str, float]
    by_agent: Mapping[str, float]
    periods: tuple[BlindPeriod, ...]
    not_set_up: tuple[str, ...]
    scheduler_gap_seconds: float
    restarts: tuple[ControllerRestart, ...] = ()  # the controller came back up in the period
    everywhere_seconds: float = 0.0
    by_source_share: Mapping[str, float] = field(default_factory=dict)
    by_source_part: Mapping[str, PartBlind] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OwnerStateFigures:
    """Per node with GPU samples in the period, whether its agent knew if each GPU process's
    owner (pod, job) still ran: not known when its `owner_state_unknown` was open for more
    than `limit_share` of the period (an agent with no owner directory reports it all
    along). `not_known`: those nodes, with the share of the period their owner state was
    unknown. `known` None: no node was sampled. `known_share`: of the sampled nodes' time,
    the share their owner state was known (None: no node was sampled)."""

    nodes: int
    known: int | None
    not_known: Mapping[str, float]
    limit_share: float
    known_share: float | None = None


# --- alerts ----------------------------------------------------------------------------


def alert_figures(data: PeriodData, context: ReportContext) -> AlertFigures:
    if not context.sources.alertmanager:
        return AlertFigures(None, ())
    alerts = [a for a in data.alerts if a.name not in context.ignored_alerts]
    counts: dict[tuple[str, str | None], int] = {}
    for alert in alerts:
        key = (alert.name, alert.severity)
        counts[key] = counts.get(key, 0) + 1
    by_name = tuple(
        AlertCount(name, severity, count)
        for (name, severity), count in sorted(
            counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or "")
        )
    )
    return AlertFigures(len(alerts), by_name)


# --- interventions ---------------------------------------------------------------------


def intervention_figures(data: PeriodData, match_seconds: float) -> InterventionFigures:
    # The store holds what people recorded and what the platform's own records showed
    # (quota changes); node changes and runs are read for the rest.
    recorded = [i for i in data.interventions if i.source is InterventionSource.RECORDED]
    stored = [i for i in data.interventions if i.source is InterventionSource.DETECTED]
    seen = detected_interventions.detect(data.nodes_at_start, data.node_changes, data.runs)
    detected = sorted([*seen, *stored], key=lambda i: (i.at, sorted(i.subject.items())))
    records = detected_interventions.audit(detected, recorded, match_seconds)
    # A record that audits a detected intervention is that intervention's, not another one.
    auditing = {id(r) for r in records if r is not None}
    items = [_intervention_item(i, None) for i in recorded if id(i) not in auditing]
    items += [_intervention_item(i, r) for i, r in zip(detected, records, strict=True)]
    unaudited = sum(1 for r in records if r is None)
    items.sort(key=lambda i: (i.at, i.source, sorted(i.subject.items())))
    return InterventionFigures(
        total=len(items),
        recorded=len(recorded),
        detected=len(detected),
        unaudited=unaudited,
        items=tuple(items),
    )


def _intervention_item(
    intervention: StoredIntervention, record: StoredIntervention | None
) -> InterventionItem:
    detected = intervention.source is InterventionSource.DETECTED
    action = str(intervention.detail.get("action", "")) if detected else "recorded"
    return InterventionItem(
        at=intervention.at,
        source=intervention.source.value,
        action=action,
        by=intervention.by,
        reason=intervention.reason,
        subject=dict(intervention.subject),
        detail=dict(intervention.detail),
        audited_by=None if record is None else record.by,
    )


# --- deliveries ------------------------------------------------------------------------


def delivery_figures(
    deliveries: Sequence[StoredDelivery], context: ReportContext
) -> DeliveryFigures:
    failures = tuple(
        DeliveryItem(d.at, d.report, d.channel, d.attempts, d.detail)
        for d in deliveries
        if d.outcome == DELIVERY_FAILED
    )
    return DeliveryFigures(
        total=len(deliveries),
        failed=len(failures),
        channels=context.delivery_channels,
        failures=failures,
    )


# --- findings --------------------------------------------------------------------------


def finding_figures(findings: Sequence[Finding], start: datetime, end: datetime) -> FindingFigures:
    """Findings active in [start, end): events raised in it; conditions opened in it, closed
    in it, or open across it."""
    items = []
    counts: dict[str, list[int]] = {}
    for finding in findings:
        status = _status(finding, start, end)
        if status is None:
            continue
        row = counts.setdefault(finding.detector, [0, 0, 0, 0])
        if status == "event":
            row[3] += 1
        else:
            row[0] += status in ("opened", "opened_closed")
            row[1] += status in ("closed", "opened_closed")
            row[2] += status in ("opened", "open")
        items.append(
            FindingItem(
                detector=finding.detector,
                kind=finding.kind.value,
                severity=finding.severity.value,
                summary=finding.summary,
                sentence=describe(finding.detector, finding.subject, finding.evidence),
                subject=dict(finding.subject),
                opened_at=finding.opened_at,
                closed_at=finding.closed_at,
                status=status,
                evidence=dict(finding.evidence),
            )
        )
    by_detector = {
        d: DetectorCounts(opened=c[0], closed=c[1], still_open=c[2], events=c[3])
        for d, c in sorted(counts.items())
    }
    new = [i for i in items if i.status in _NEW]
    return FindingFigures(
        opened=sum(c.opened for c in by_detector.values()),
        closed=sum(c.closed for c in by_detector.values()),
        still_open=sum(c.still_open for c in by_detector.values()),
        events=sum(c.events for c in by_detector.values()),
        critical=sum(1 for i in new if i.severity == Severity.CRITICAL.value),
        by_detector=by_detector,
        items=tuple(items),
        incidents=incidents(items),
    )


# Findings naming the same one of these, opened this close together, share a cause.
INCIDENT_KEYS = ("pipeline", "node", "job_id", "run_id")
INCIDENT_WINDOW_SECONDS = 600.0
_NEW = ("event", "opened", "opened_closed")
_SEVERITY_ORDER = (Severity.CRITICAL.value, Severity.WARNING.value, Severity.INFO.value)


def incidents(items: Sequence[FindingItem]) -> tuple[Incident, ...]:
    """The findings grouped: two are one incident when they name the same pipeline, node,
    job or run and opened within INCIDENT_WINDOW_SECONDS of each other, or when one GPU
    fault led to the other (gpu_incidents: an Xid 79 and the node kept in service on it
    however long after), and so on, through every finding joined this way. Per shared name,
    joining each finding to the one opened just before it is enough: any two within the
    window have only such steps between them."""
    group = list(range(len(items)))

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    named: dict[tuple[str, str], list[int]] = {}
    for i, item in enumerate(items):
        for pair in _keys(item):
            named.setdefault(pair, []).append(i)
    for ids in named.values():
        ids.sort(key=lambda i: items[i].opened_at)
        for before, after in itertools.pairwise(ids):
            apart = (items[after].opened_at - items[before].opened_at).total_seconds()
            if apart <= INCIDENT_WINDOW_SECONDS:
                group[root(after)] = root(before)
    for ids in gpu_incidents.groups(items):
        for before, after in itertools.pairwise(ids):
            group[root(after)] = root(before)
    members: dict[int, list[int]] = {}
    for i in range(len(items)):
        members.setdefault(root(i), []).append(i)
    found = [_incident(items, ids) for ids in members.values()]
    return tuple(sorted(found, key=lambda x: (x.opened_at, x.findings)))


def _keys(item: FindingItem) -> set[tuple[str, str]]:
    return {(k, v) for k, v in item.subject.items() if k in INCIDENT_KEYS}


def _incident(items: Sequence[FindingItem], ids: list[int]) -> Incident:
    chosen = [items[i] for i in ids]
    common = set.intersection(*(_keys(i) for i in chosen))
    subject = dict(sorted(common)) if common else dict(sorted(_keys(chosen[0])))
    closed = [i.closed_at for i in chosen]
    return Incident(
        opened_at=min(i.opened_at for i in chosen),
        closed_at=None if None in closed else max(c for c in closed if c is not None),
        subject=subject or dict(chosen[0].subject),
        severity=min((i.severity for i in chosen), key=_severity_rank),
        detectors=tuple(sorted({i.detector for i in chosen})),
        findings=tuple(ids),
        new=any(i.status in _NEW for i in chosen),
    )


def _severity_rank(severity: str) -> int:
    return _SEVERITY_ORDER.index(severity) if severity in _SEVERITY_ORDER else len(_SEVERITY_ORDER)


def _status(finding: Finding, start: datetime, end: datetime) -> str | None:
    opened, closed = finding.opened_at, finding.closed_at
    if finding.kind is FindingKind.EVENT:
        return "event" if start <= opened < end else None
    if opened >= end or (closed is not None and closed < start):
        return None
    opened_here = opened >= start
    closed_here = closed is not None and closed < end
    if opened_here:
        return "opened_closed" if closed_here else "opened"
    return "closed" if closed_here else "open"


# --- owner state ------------------------------------------------------------------------


def owner_state_figures(data: PeriodData, limit_share: float) -> OwnerStateFigures:
    period = data.period
    unknown: dict[str, list[BlindPeriod]] = {}
    for finding in data.findings:
        node = finding.subject.get("node")
        if finding.detector != OWNER_STATE_UNKNOWN or node not in data.gpu.nodes:
            continue
        lo = max(finding.opened_at, period.start)
        hi = min(finding.closed_at or period.end, period.end)
        if hi > lo:
            unknown.setdefault(node, []).append(
                BlindPeriod("owners", node, lo, hi, finding.detector)
            )
    shares = {
        node: union_seconds(periods) / period.seconds if period.seconds else 1.0
        for node, periods in sorted(unknown.items())
    }
    not_known = {node: share for node, share in shares.items() if share > limit_share}
    nodes = len(data.gpu.nodes)
    return OwnerStateFigures(
        nodes=nodes,
        known=nodes - len(not_known) if nodes else None,
        not_known=not_known,
        limit_share=limit_share,
        known_share=1 - sum(shares.values()) / nodes if nodes else None,
    )


def owner_state_note(prefix: str, owners: OwnerStateFigures) -> Note:
    """The sentence 'owner state known on 4 of 6 nodes', naming the others: the message
    `prefix`.owner_state, or `prefix`.owner_state_not_known when a node did not know."""
    params: dict[str, JsonValue] = {"known": owners.known, "nodes": owners.nodes}
    if not owners.not_known:
        return Note(f"{prefix}.owner_state", params)
    params |= {
        "not_known": named(list(owners.not_known), NODE_NAMES),
        "limit_share": owners.limit_share,
    }
    return Note(f"{prefix}.owner_state_not_known", params)


# --- blind time ------------------------------------------------------------------------


def blind_figures(data: PeriodData, context: ReportContext) -> BlindFigures:
    period = data.period
    periods: list[BlindPeriod] = []
    for finding in data.findings:
        source = BLIND_DETECTORS.get(finding.detector)
        if source is None:
            continue
        lo = max(finding.opened_at, period.start)
        hi = min(finding.closed_at or period.end, period.end)
        if hi > lo:
            subject = ",".join(f"{k}={v}" for k, v in sorted(finding.subject.items()))
            periods.append(BlindPeriod(source, subject, lo, hi, finding.detector))
    # No controller ran between two of its runs, or after the last one: blind to everything,
    # however short.
    restarts = controller_restarts(data.controller_runs)
    not_running = controller_not_running(
        data.controller_runs, period.end, context.controller_gone_after_seconds
    )
    for down in not_running:
        lo, hi = max(down.down_from, period.start), min(down.up_at, period.end)
        if hi > lo:
            periods.append(BlindPeriod("controller", "", lo, hi, down.cause.value))
    # Failed reads are not stored, their gaps are: a gap past the staleness rule is blind.
    gap = STALE_AFTER_INTERVALS * context.snapshot_interval_seconds
    periods += scheduler_gaps([s.at for s in data.queue_samples], period.start, period.end, gap)
    set_up = _set_up(data, context)
    periods += _not_watched(data.controller_runs, set_up, period.start, period.end)
    periods.sort(key=lambda p: (p.start, p.source, p.subject))
    by_source = {
        source: union_seconds([p for p in periods if p.source == source])
        for source in BLIND_SOURCES
        if set_up[source]
    }
    agent_periods = [p for p in periods if p.source == "agents" and set_up["agents"]]
    by_agent = {
        agent: union_seconds([p for p in agent_periods if p.subject == agent])
        for agent in sorted({p.subject for p in agent_periods})
    }
    total = union_seconds(periods)
    not_set_up = tuple(s for s in BLIND_SOURCES if not set_up[s])
    fleet = Fleet(_node_gpus(data), len(data.gpu.nodes), period.seconds)
    parts = {
        source: part
        for source in NODE_SOURCES & by_source.keys()
        if (part := _part(source, [p for p in periods if p.source == source], fleet))
    }
    return BlindFigures(
        total_seconds=total,
        share=_fleet_share(periods, fleet),
        by_source=by_source,
        by_agent=by_agent,
        periods=tuple(periods),
        not_set_up=not_set_up,
        scheduler_gap_seconds=gap,
        restarts=tuple(r for r in restarts if period.start <= r.up_at < period.end),
        everywhere_seconds=union_seconds([p for p in periods if _scope(p) is None]),
        by_source_share={
            source: parts[source].share
            if source in parts
            else (seconds / period.seconds if period.seconds else 0.0)
            for source, seconds in by_source.items()
        },
        by_source_part=parts,
    )


def _set_up(data: PeriodData, context: ReportContext) -> dict[str, bool]:
    """Per source, whether any controller run of the period was set up to read it: as the
    runs recorded it, else (runs from before the store kept it) as the settings say, the node
    agents also when their samples show they were read. Never from the source's failures."""
    runs = [
        r
        for r in data.controller_runs
        if r.watching is not None
        and r.started_at < data.period.end
        and r.ended_at >= data.period.start
    ]
    sources = context.sources
    configured = {
        "agents": sources.agents or bool(data.gpu.nodes),
        "prometheus": sources.prometheus,
        "logs": sources.logs,
        "alerts": sources.alertmanager,
    }
    watched = {
        s: any(s in (r.watching or ()) for r in runs) if runs else configured[s] for s in WATCHABLE
    }
    return {
        "controller": True,
        "store": True,
        "scheduler": True,
        "accounting": True,  # every backend lists finished jobs and quota changes
        **dict.fromkeys(_READ_BY_AGENTS, watched["agents"]),
        **watched,
    }


def _not_watched(
    runs: Sequence[ControllerRun], set_up: Mapping[str, bool], start: datetime, end: datetime
) -> list[BlindPeriod]:
    """The time a controller ran without a source other runs of the period read: blind to it
    (a Prometheus added half way through covered half the soak)."""
    periods = []
    for run in runs:
        lo, hi = max(run.started_at, start), min(run.ended_at, end)
        if run.watching is None or hi <= lo:
            continue
        for source in WATCHABLE:
            if set_up[source] and source not in run.watching:
                periods.append(BlindPeriod(source, "", lo, hi, NOT_SET_UP))
                if source == "agents":
                    periods += [BlindPeriod(s, "", lo, hi, NOT_SET_UP) for s in _READ_BY_AGENTS]
    return periods


@dataclass(frozen=True, slots=True)
class Fleet:
    """What a node-scoped blind period is a part of: `gpus` per node, as the scheduler listed
    them; `sampled`, the nodes the agents sampled; the period's `seconds`."""

    gpus: Mapping[str, int]
    sampled: int
    seconds: float

    def nodes(self, blind: Collection[str]) -> int:
        # An agent is named as the controller reaches it, not always by its node's name.
        return max(len(self.gpus), self.sampled, len(blind))


def _node_gpus(data: PeriodData) -> dict[str, int]:
    gpus: dict[str, int] = {}
    for n in [*data.nodes_at_start, *(c.node for c in data.node_changes)]:
        if n.gpus_total > 0:
            gpus[n.name] = max(gpus.get(n.name, 0), n.gpus_total)
    return gpus


def _scope(period: BlindPeriod) -> tuple[str, str | None] | None:
    """A node source's period on one node (and GPU, for a lost one); None: on every node."""
    if period.source not in NODE_SOURCES:
        return None
    node = node_of(period)
    if node is None:
        return None
    parts = dict(part.partition("=")[::2] for part in period.subject.split(","))
    return node, parts.get("gpu") or parts.get("gpu_uuid") or None


def _blind_beyond(
    periods: Sequence[BlindPeriod], everywhere: Sequence[BlindPeriod]
) -> dict[str, tuple[float, dict[str, float]]]:
    """Per node, the seconds its node-wide periods add to `everywhere`, and per GPU, the
    seconds its own add to both."""
    by_node: dict[str, list[BlindPeriod]] = {}
    by_gpu: dict[tuple[str, str], list[BlindPeriod]] = {}
    for p in periods:
        scope = _scope(p)
        if scope is None:
            continue
        node, gpu = scope
        by_node.setdefault(node, [])
        if gpu is None:
            by_node[node].append(p)
        else:
            by_gpu.setdefault((node, gpu), []).append(p)
    base = union_seconds(everywhere)
    beyond = {}
    for node, own in by_node.items():
        wide = [*everywhere, *own]
        wide_seconds = union_seconds(wide)
        gpus = {
            gpu: union_seconds([*wide, *ps]) - wide_seconds
            for (n, gpu), ps in by_gpu.items()
            if n == node
        }
        beyond[node] = (wide_seconds - base, gpus)
    return beyond


def _part(source: str, periods: Sequence[BlindPeriod], fleet: Fleet) -> PartBlind | None:
    everywhere = [p for p in periods if _scope(p) is None]
    beyond = _blind_beyond(periods, everywhere)
    if not beyond or not fleet.seconds:
        return None
    whole = union_seconds(everywhere)
    total_gpus = sum(fleet.gpus.values())
    if source != "agents" and total_gpus and beyond.keys() <= fleet.gpus.keys():
        gpu_seconds = sum(
            node_seconds * fleet.gpus[node] + sum(gpus.values())
            for node, (node_seconds, gpus) in beyond.items()
        )
        return PartBlind(
            whole, "gpu", gpu_seconds / 3600, (whole + gpu_seconds / total_gpus) / fleet.seconds
        )
    node_wide = _blind_beyond([_node_wide(p) for p in periods], everywhere)
    node_seconds = sum(seconds for seconds, _ in node_wide.values())
    nodes = fleet.nodes(node_wide.keys())
    return PartBlind(
        whole, "node", node_seconds / 3600, (whole + node_seconds / nodes) / fleet.seconds
    )


def _node_wide(period: BlindPeriod) -> BlindPeriod:
    """A period on one GPU as one on its node."""
    scope = _scope(period)
    return period if scope is None else replace(period, subject=f"node={scope[0]}")


def _fleet_share(periods: Sequence[BlindPeriod], fleet: Fleet) -> float | None:
    """A node's blind periods count as its part of the fleet, a lost GPU's as that GPU's
    where the scheduler says how many GPUs the fleet has, else as its node's."""
    if not fleet.seconds:
        return None
    everywhere = [p for p in periods if _scope(p) is None]
    total_gpus = sum(fleet.gpus.values())
    beyond = _blind_beyond(periods if total_gpus else [_node_wide(p) for p in periods], everywhere)
    nodes = fleet.nodes(beyond.keys())
    node_part = sum(n for n, _ in beyond.values()) / nodes if nodes else 0.0
    gpu_part = sum(sum(g.values()) for _, g in beyond.values()) / total_gpus if total_gpus else 0.0
    return min((union_seconds(everywhere) + node_part + gpu_part) / fleet.seconds, 1.0)


def node_of(period: BlindPeriod) -> str | None:
    """The node a node-scoped period names: its agent, or the node of its GPUs."""
    parts = dict(part.partition("=")[::2] for part in period.subject.split(","))
    return parts.get("node") or parts.get("agent") or None


def scheduler_gaps(
    instants: Sequence[datetime], start: datetime, end: datetime, limit_seconds: float
) -> list[BlindPeriod]:
    """Stretches of [start, end) longer than `limit_seconds` with no stored snapshot, whole
    (the scheduler was last seen at the stretch's start and seen again at its end)."""
    points = [start, *sorted({at for at in instants if start <= at < end}), end]
    limit = timedelta(seconds=limit_seconds)
    return [
        BlindPeriod("scheduler", "snapshots", a, b, SCHEDULER_GAP)
        for a, b in itertools.pairwise(points)
        if b - a > limit
    ]


def union_seconds(periods: Sequence[BlindPeriod]) -> float:
    total = 0.0
    reach: datetime | None = None
    for p in sorted(periods, key=lambda p: p.start):
        if reach is None or p.start >= reach:
            total += p.seconds
            reach = p.end
        elif p.end > reach:
            total += (p.end - reach).total_seconds()
            reach = p.end
    return total
