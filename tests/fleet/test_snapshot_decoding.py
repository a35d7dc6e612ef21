"""The controller decodes an agent's snapshot strictly: everything an agent writes reads back
the same, and anything else is a SnapshotError that names the field and what was wrong."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from observer import codec
from observer.agent.attribution import Attributor
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.clock import ManualClock
from observer.domain import NO_OWNER, GpmActivity, GpmState, NodeSnapshot, Owner, OwnerKind
from observer.errors import SnapshotError
from observer.fleet import wire
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.metrics import AgentMetrics
from observer.ownership.fake import FakeHost
from observer.settings.detectors import NodeLeakSettings


def busy_snapshot(pod_processes: int = 1) -> NodeSnapshot:
    """An 8-GPU node with an orphan and `pod_processes` of a pod's processes on each GPU, and
    their findings, half its GPUs reporting GPM activity and half without GPM
    (bench/snapshot_decode.py decodes it too)."""
    clock = ManualClock(datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    activity = GpmActivity(0.5, 0.25, 0.125, 0.75)
    gpus = FakeGpuBackend(
        [FakeGpu(f"GPU-{i}", activity=None if i % 2 else activity) for i in range(8)], clock
    )
    host = FakeHost()
    metrics = AgentMetrics(CollectorRegistry())
    agent = NodeAgent(
        "node-3",
        Sampler(gpus, clock, metrics, 60),
        Attributor(host, host),
        NodeLeakSettings(grace_seconds=5),
        clock,
        metrics,
    )
    for i, gpu in enumerate(gpus.gpus):
        host.spawn(1000 + i, NO_OWNER)
        gpu.processes[1000 + i] = GIB
        for k in range(pod_processes):
            pid = 2000 + 1000 * k + i
            host.spawn(pid, Owner(OwnerKind.POD, f"pod-{i}", f"container-{i}"))
            gpu.processes[pid] = 2 * GIB
    for _ in range(7):
        agent.tick()
        clock.advance(1)
    snap = agent.snapshot()
    assert snap is not None
    return snap


def test_what_an_agent_writes_reads_back_the_same() -> None:
    snap = busy_snapshot()
    assert snap.findings and snap.processes
    assert {type(gpu.activity) for gpu in snap.gpus} == {GpmActivity, GpmState}
    assert wire.snapshot_from_bytes(json.dumps(codec.snapshot_to_json(snap)).encode()) == snap


Change = Callable[[dict[str, Any]], object]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d["gpus"][0].update(index="0"), "gpus[0].index: expected int, got string"),
        (lambda d: d["gpus"][1].update(index=True), "gpus[1].index: expected int, got bool"),
        (lambda d: d["processes"][2].pop("pid"), "processes[2].pid: missing"),
        (lambda d: d["processes"][0]["owner"].update(kind="vm"), "owner.kind: 'vm' is not"),
        (lambda d: d["gpus"][0]["sample"].update(at="noon"), "gpus[0].sample.at: not an ISO"),
        (
            lambda d: d["gpus"][0]["sample"].update(power_milliwatts=1.5),
            "gpus[0].sample.power_milliwatts: expected int, got number",
        ),
        (
            lambda d: d["findings"][0]["subject"].update(pid=700),
            "findings[0].subject.pid: expected string, got int",
        ),
        (
            lambda d: d["gpus"][1].update(activity="idle"),
            "gpus[1].activity: 'idle' is not an allowed value",
        ),
        (
            lambda d: d["gpus"][0]["activity"].update(sm_active_ratio="high"),
            "gpus[0].activity.sm_active_ratio: expected number, got string",
        ),
        (lambda d: d.update(gpus={}), "snapshot field gpus: expected array, got object"),
        (lambda d: d.update(driver=None), "snapshot field driver: expected object, got null"),
    ],
)
def test_a_snapshot_of_the_wrong_shape_names_the_field(change: Change, problem: str) -> None:
    data = codec.snapshot_to_json(busy_snapshot())
    change(data)
    with pytest.raises(SnapshotError) as raised:
        wire.snapshot_from_bytes(json.dumps(data).encode())
    assert str(raised.value).startswith("snapshot field ")
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"", "snapshot is not JSON (Expecting value: line 1 column 1 (char 0))"),
        (b"\xff\xfe", "snapshot is not UTF-8 (invalid start byte at byte 0)"),
        (b"[1, 2]", "snapshot: expected object, got array"),
        (b"[" * 100_000, "snapshot is not JSON (nested too deeply)"),
        (b'{"node": ' + b"9" * 5000 + b"}", "snapshot is not JSON (Exceeds the limit"),
    ],
)
def test_a_body_that_is_no_snapshot_says_what_it_is(body: bytes, problem: str) -> None:
    with pytest.raises(SnapshotError) as raised:
        wire.snapshot_from_bytes(body)
    assert str(raised.value).startswith(problem)
