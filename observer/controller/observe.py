"""The controller's reading of the fleet: every agent's snapshot, its node-local findings
stored, its GPUs sampled into the store, and an agent that cannot be read recorded as the
observer's own blind spot (a condition), never as silence."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from observer.clock import Clock
from observer.detectors.conditions import ConditionTracker
from observer.domain import Finding, NodeSnapshot, Severity, Symptom
from observer.errors import BackendError
from observer.fleet.base import Fleet
from observer.logs import get_logger
from observer.metrics import ControllerMetrics
from observer.storage.store import Store, StoredGpuSample

_log = get_logger("observer.controller.observe")

AGENT_UNREACHABLE = "agent_unreachable"


class FleetObserver:
    def __init__(
        self,
        fleet: Fleet,
        store: Store,
        clock: Clock,
        metrics: ControllerMetrics,
        unreachable_grace_seconds: float,
        latest: dict[str, NodeSnapshot] | None = None,
    ) -> None:
        """`latest` is kept up to date with every agent's last snapshot, by node, for the
        detectors that compare the scheduler's view with the nodes'."""
        self._fleet = fleet
        self._store = store
        self._clock = clock
        self._metrics = metrics
        self._grace = unreachable_grace_seconds
        self._tracker = ConditionTracker()
        self._known: set[tuple[str, datetime]] | None = None
        self._latest = latest if latest is not None else {}

    def observe(self) -> list[Finding]:
        """Read every agent once; return the findings that opened or closed."""
        now = self._clock.now()
        snapshots: list[NodeSnapshot] = []
        symptoms: list[Symptom] = []
        for agent in self._fleet.agents():
            try:
                snapshots.append(self._fleet.fetch(agent))
            except BackendError as exc:
                self._metrics.agent_errors_total.labels(agent).inc()
                symptoms.append(_unreachable(agent, str(exc), self._grace))
        changed = self._tracker.update(symptoms, now)
        self._latest.update((snap.node, snap) for snap in snapshots)
        reported = [f for snap in snapshots for f in snap.findings]
        gone = self._no_longer_reported(snapshots, reported, now)
        known = self._known_findings()
        new = [f for f in reported if (f.key, f.opened_at) not in known]
        self._store.save_findings([*reported, *gone, *changed])
        known.update((f.key, f.opened_at) for f in reported)
        self._store.add_gpu_samples(_samples(snapshots))
        opened_or_closed = [*new, *gone, *changed]
        self._metrics.findings.record(opened_or_closed, self._store.findings(open_only=True))
        for finding in opened_or_closed:
            _log.info(
                "finding " + ("opened" if finding.is_open else "closed"),
                detector=finding.detector,
                subject=dict(finding.subject),
            )
        return opened_or_closed

    def _known_findings(self) -> set[tuple[str, datetime]]:
        if self._known is None:  # a restarted controller must not count old findings again
            self._known = {(f.key, f.opened_at) for f in self._store.findings(open_only=True)}
        return self._known

    def _no_longer_reported(
        self, snapshots: list[NodeSnapshot], reported: list[Finding], now: datetime
    ) -> list[Finding]:
        """Open node findings that their agent, read just now, no longer reports at all (it
        restarted and lost them): closed now, saying why."""
        nodes = {snap.node for snap in snapshots}
        current = {(f.key, f.opened_at) for f in reported}
        return [
            replace(
                f,
                closed_at=now,
                evidence={**f.evidence, "closed_because": "its agent no longer reports it"},
            )
            for f in self._store.findings(open_only=True)
            if f.subject.get("node") in nodes
            and f.detector != AGENT_UNREACHABLE
            and (f.key, f.opened_at) not in current
        ]


def _unreachable(agent: str, error: str, grace: float) -> Symptom:
    return Symptom(
        detector=AGENT_UNREACHABLE,
        subject={"agent": agent},
        severity=Severity.CRITICAL,
        summary=f"agent {agent} cannot be read: its node's GPUs are not observed",
        rule=f"the agent's /v1/snapshot failed for {grace:g} s",
        evidence={"error": error},
        hold_seconds=grace,
    )


def _samples(snapshots: list[NodeSnapshot]) -> list[StoredGpuSample]:
    return [
        StoredGpuSample(
            node=snap.node,
            gpu_uuid=gpu.identity.uuid,
            gpu_index=gpu.index,
            at=gpu.sample.at,
            utilization_gpu_percent=gpu.sample.utilization_gpu_percent,
            memory_used_bytes=gpu.sample.memory_used_bytes,
            memory_total_bytes=gpu.sample.memory_total_bytes,
            power_milliwatts=gpu.sample.power_milliwatts,
            process_count=len(gpu.sample.processes) if gpu.sample.processes is not None else None,
        )
        for snap in snapshots
        for gpu in snap.gpus
        if gpu.identity is not None and gpu.sample is not None
    ]
