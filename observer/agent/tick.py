"""One agent tick: sample, attribute, detect (the GPU health rules with what the event thread
last said of its Xid sources), take the Xids the event thread reported and the MIG
reconfigurations the samples show, track conditions, publish the snapshot."""

from __future__ import annotations

from collections import deque
from datetime import timedelta
from functools import partial

from observer.agent.attribution import Attributor
from observer.agent.mig_changes import MigChanges
from observer.agent.sampler import Sampler
from observer.agent.xids import XidFindings, XidWatch
from observer.clock import Clock
from observer.detectors import gpu_health, node_leaks
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding, NodeSnapshot, Subject
from observer.logging_setup import get_logger
from observer.metrics import AgentMetrics
from observer.ownership.tracked import TrackedOwners
from observer.settings.detectors import GpuHealthSettings, NodeLeakSettings

_log = get_logger("observer.agent")

# Closed findings stay in the snapshot this long so a controller polling less often than
# conditions open and close still sees every one of them.
CLOSED_RETENTION = timedelta(hours=1)
CLOSED_RETAINED_MAX = 1000


class NodeAgent:
    def __init__(
        self,
        node: str,
        sampler: Sampler,
        attributor: Attributor,
        rules: NodeLeakSettings,
        clock: Clock,
        metrics: AgentMetrics,
        owners: TrackedOwners | None = None,
        health: GpuHealthSettings | None = None,
        xids: XidWatch | None = None,
    ) -> None:
        """`owners`: the node's scheduler agent, when one is asked (the same directory the
        attributor asks); it is refreshed once per tick and its allocation layer detected
        on and published. `xids`: the event thread whose Xids each tick takes (None: no
        Xid source)."""
        self._node = node
        self._sampler = sampler
        self._attributor = attributor
        self._rules = rules
        self._clock = clock
        self.metrics = metrics
        self._owners = owners
        self._health_rules = health or GpuHealthSettings()
        self._health: gpu_health.HealthHistory = {}
        self._xid_watch = xids
        self._xids = XidFindings(
            node,
            self._health_rules.xid_merge_window_seconds,
            CLOSED_RETENTION,
            CLOSED_RETAINED_MAX,
            metrics.gpu_xid_events_total,
        )
        self._mig = MigChanges(node, CLOSED_RETENTION, CLOSED_RETAINED_MAX)
        self._tracker = ConditionTracker()
        self._closed: deque[Finding] = deque(maxlen=CLOSED_RETAINED_MAX)
        self._snapshot: NodeSnapshot | None = None

    def snapshot(self) -> NodeSnapshot | None:
        return self._snapshot

    def start(self) -> None:
        """Starts the Xid event thread, when there is one."""
        if self._xid_watch is not None:
            self._xid_watch.start()

    def join_events(self, timeout_seconds: float) -> bool:
        """Whether the Xid event thread (stopped by the stop event) ended within the time."""
        return self._xid_watch is None or self._xid_watch.join(timeout_seconds)

    def tick(self) -> list[Finding]:
        """Returns the findings that opened or closed on this tick."""
        reading = self._sampler.tick()
        now = self._clock.now()
        if self._owners is not None:
            self._owners.refresh(now)
        processes = self._attributor.attribute(reading.gpus)
        allocation = None
        if self._owners is not None:
            allocation = self._owners.allocation()
            self.metrics.owner_directory_up.labels(allocation.source).set(allocation.up)
        view = node_leaks.NodeView(self._node, reading.driver, reading.gpus, processes, allocation)
        health = gpu_health.HealthView(
            self._node,
            now,
            reading.gpus,
            processes,
            self._xid_watch.state() if self._xid_watch else None,
        )
        health_symptoms, self._health = gpu_health.evaluate(
            health, self._health, self._health_rules
        )
        changed = self._tracker.update(
            [*node_leaks.evaluate(view, self._rules), *health_symptoms],
            now,
            partial(_covers, view, health),
        )
        xids = self._xids.take(
            self._xid_watch.take() if self._xid_watch else [],
            reading.gpus,
            processes,
            self._attributor.owner_of,
            now,
        )
        reconfigured = self._mig.take(reading.gpus, now)
        events = [*xids, *reconfigured]
        open_now = self._tracker.open_findings()
        self._closed.extend(f for f in changed if not f.is_open)
        while (
            self._closed
            and self._closed[0].closed_at
            and (now - self._closed[0].closed_at > CLOSED_RETENTION)
        ):
            self._closed.popleft()
        self._snapshot = NodeSnapshot(
            node=self._node,
            at=now,
            driver=reading.driver,
            gpus=reading.gpus,
            processes=processes,
            findings=(
                *open_now,
                *self._closed,
                *self._xids.findings(),
                *self._mig.findings(),
            ),
            allocation=allocation,
        )
        self.metrics.findings.record([*changed, *events], open_now)
        for finding in xids:
            _log.warning("gpu xid", subject=dict(finding.subject), summary=finding.summary)
        for finding in reconfigured:
            _log.info("mig reconfigured", subject=dict(finding.subject), summary=finding.summary)
        for finding in changed:
            _log.info(
                "finding opened" if finding.is_open else "finding closed",
                detector=finding.detector,
                subject=dict(finding.subject),
                summary=finding.summary,
            )
        return [*changed, *events]

    def close(self) -> None:
        self._sampler.close()
        if self._owners is not None:
            self._owners.close()


def _covers(
    view: node_leaks.NodeView, health: gpu_health.HealthView, detector: str, subject: Subject
) -> bool:
    if detector in gpu_health.DETECTORS:
        return gpu_health.covers(health, detector, subject)
    return node_leaks.covers(view, detector, subject)
