"""One agent tick: sample, attribute, detect, track conditions, publish the snapshot."""

from __future__ import annotations

from collections import deque
from datetime import timedelta
from functools import partial

from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.clock import Clock
from observer.detectors import node_leaks
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding, NodeSnapshot
from observer.logs import get_logger
from observer.metrics import AgentMetrics
from observer.ownership.tracked import TrackedOwners
from observer.settings.detectors import NodeLeakSettings

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
    ) -> None:
        """`owners`: the node's scheduler agent, when one is asked (the same directory the
        attributor asks); it is refreshed once per tick and its allocation layer detected
        on and published."""
        self._node = node
        self._sampler = sampler
        self._attributor = attributor
        self._rules = rules
        self._clock = clock
        self.metrics = metrics
        self._owners = owners
        self._tracker = ConditionTracker()
        self._closed: deque[Finding] = deque(maxlen=CLOSED_RETAINED_MAX)
        self._snapshot: NodeSnapshot | None = None

    def snapshot(self) -> NodeSnapshot | None:
        return self._snapshot

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
        changed = self._tracker.update(
            node_leaks.evaluate(view, self._rules), now, partial(node_leaks.covers, view)
        )
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
            findings=(*open_now, *self._closed),
            allocation=allocation,
        )
        self.metrics.findings.record(changed, open_now)
        for finding in changed:
            _log.info(
                "finding opened" if finding.is_open else "finding closed",
                detector=finding.detector,
                subject=dict(finding.subject),
                summary=finding.summary,
            )
        return changed

    def close(self) -> None:
        self._sampler.close()
        if self._owners is not None:
            self._owners.close()
