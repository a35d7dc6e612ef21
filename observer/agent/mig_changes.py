"""MIG reconfigurations, as an event finding (`mig_reconfigured`): a GPU whose MIG layout (mode
and MIG devices: UUID, GPU and compute instance ids, size) differs from the one it had at its
previous sample that read it. A repartition kills the processes on the MIG devices it removes
and changes what the node can give, so an SRE reading a soak wants it on the record.

NVML also signals it (`nvmlEventTypeMigConfigChange`), but the sampler reads every GPU's MIG
devices each tick anyway: comparing layouts sees the change whether or not the event set takes
that event, and a change while the agent was down shows on the first tick after (as any
reading does; one the agent's restart hid, between two runs, is not seen)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime, timedelta

from observer.domain import Finding, FindingKind, GpuReading, MigInstance, Severity

MIG_RECONFIGURED = "mig_reconfigured"
# A GPU's MIG layout: its MIG devices, or None with MIG mode off (or not supported).
_Layout = tuple[tuple[str, int, int, int | None], ...] | None


class MigChanges:
    """The reconfigurations seen, each kept `retention` (and at most `retained_max`) so that a
    controller polling less often than they happen still reads every one."""

    def __init__(self, node: str, retention: timedelta, retained_max: int) -> None:
        self._node = node
        self._retention = retention
        self._layouts: dict[str, _Layout] = {}
        self._seen: deque[Finding] = deque(maxlen=retained_max)

    def take(self, gpus: Sequence[GpuReading], now: datetime) -> list[Finding]:
        """Compare this tick's layouts with the last; return the reconfigurations found."""
        new = []
        for gpu in gpus:
            sample, identity = gpu.sample, gpu.identity
            if identity is None or sample is None or any(e.call == "mig" for e in sample.errors):
                continue  # not read this tick: no layout to compare
            layout = _layout(sample.mig_instances)
            if identity.uuid in self._layouts and self._layouts[identity.uuid] != layout:
                before = self._layouts[identity.uuid]
                new.append(self._finding(gpu.index, identity.uuid, before, layout, now))
            self._layouts[identity.uuid] = layout
        self._seen.extend(new)
        while self._seen and now - self._seen[0].opened_at > self._retention:
            self._seen.popleft()
        return new

    def findings(self) -> list[Finding]:
        return list(self._seen)

    def _finding(
        self, index: int, uuid: str, before: _Layout, after: _Layout, now: datetime
    ) -> Finding:
        where = f"GPU {index} on {self._node}"
        if before is None:
            summary = f"MIG mode was turned on for {where}: {_count(after)} MIG devices now"
        elif after is None:
            summary = f"MIG mode was turned off for {where}: {_count(before)} MIG devices before"
        else:
            summary = (
                f"{where} was repartitioned: {_count(before)} MIG devices before, "
                f"{_count(after)} now"
            )
        return Finding(
            detector=MIG_RECONFIGURED,
            kind=FindingKind.EVENT,
            subject={"node": self._node, "gpu_uuid": uuid},
            severity=Severity.INFO,
            summary=summary,
            opened_at=now,
            closed_at=now,
            evidence={
                "gpu_index": index,
                "gpu_uuid": uuid,
                "mig_devices_before": None if before is None else len(before),
                "mig_devices_after": None if after is None else len(after),
                "mig_uuids_before": None if before is None else [m[0] for m in before],
                "mig_uuids_after": None if after is None else [m[0] for m in after],
                "rule": "the GPU's MIG mode or MIG devices differ from its previous sample",
            },
        )


def _layout(instances: tuple[MigInstance, ...] | None) -> _Layout:
    if instances is None:
        return None
    return tuple(
        (m.uuid, m.gpu_instance_id, m.compute_instance_id, m.memory_total_bytes) for m in instances
    )


def _count(layout: _Layout) -> int:
    return len(layout or ())
