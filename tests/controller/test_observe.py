"""The controller reads every agent: their node findings are stored and counted once, their
GPUs sampled, and an agent it cannot read is recorded as a blind spot, not as health."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from observer.agent.attribution import Attributor
from observer.agent.main import run_agent
from observer.agent.sampler import Sampler
from observer.agent.tick import NodeAgent
from observer.clock import ManualClock
from observer.controller.observe import FleetObserver
from observer.domain import (
    NO_OWNER,
    DriverState,
    DriverStatus,
    Expectation,
    Finding,
    FindingKind,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Owner,
    OwnerKind,
    ProbeRun,
    RunState,
    SchedulerSnapshot,
    Severity,
)
from observer.fleet.http import HttpFleet
from observer.fleet.local import LocalFleet
from observer.gpu.fake import GIB, FakeGpu, FakeGpuBackend
from observer.metrics import AgentMetrics, ControllerMetrics
from observer.ownership.fake import FakeHost
from observer.settings.detectors import NodeLeakSettings
from observer.settings.reports import ReportSettings
from observer.storage.store import Store
from tests.support.cli import run_cli
from tests.support.databases import migrated_sqlite
from tests.support.settings import replay_agent_settings

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class Node:
    def __init__(self, name: str, clock: ManualClock, gpus: int = 2) -> None:
        self.gpus = FakeGpuBackend([FakeGpu(f"GPU-{name}-{i}") for i in range(gpus)], clock)
        self.host = FakeHost()
        metrics = AgentMetrics(CollectorRegistry())
        self.agent = NodeAgent(
            name,
            Sampler(self.gpus, clock, metrics, 60),
            Attributor(self.host, self.host),
            NodeLeakSettings(grace_seconds=5),
            clock,
            metrics,
        )


def _store(tmp_path: Path) -> Store:
    url = migrated_sqlite(tmp_path / "observer.db")
    return Store(url)


def test_node_findings_are_stored_once_and_closed_with_the_agent(tmp_path: Path):
    clock = ManualClock(START)
    nodes = {name: Node(name, clock) for name in ("n1", "n2")}
    fleet = LocalFleet({name: node.agent.snapshot for name, node in nodes.items()})
    store = _store(tmp_path)
    metrics = ControllerMetrics(CollectorRegistry())
    observer = FleetObserver(fleet, store, clock, metrics, unreachable_grace_seconds=30)

    nodes["n2"].host.spawn(700, NO_OWNER)  # a process in no pod or job
    nodes["n2"].gpus.gpus[1].processes[700] = 3 * GIB
    for _ in range(10):
        for node in nodes.values():
            node.agent.tick()
        observer.observe()
        clock.advance(1)

    [orphan] = store.findings()
    assert orphan.detector == "orphan_process"
    assert orphan.subject == {"node": "n2", "gpu_uuid": "GPU-n2-1", "pid": "700"}
    assert orphan.is_open
    total = metrics.findings.total.labels("orphan_process", "warning")._value.get()
    assert total == 1  # reported on every read, counted once
    assert len(store.gpu_samples(None, START, clock.now())) == 10 * 4

    nodes["n2"].gpus.gpus[1].processes.clear()
    nodes["n2"].agent.tick()
    observer.observe()
    [closed] = store.findings()
    assert closed.closed_at is not None


def _job(job_id: str, tenant: str, node: str, *owner_ids: str) -> JobStatus:
    """A running job whose processes the agents name by its id (Slurm), or by `owner_ids`
    (the UIDs of a Kubernetes Job's pods)."""
    owners = owner_ids or (job_id,)
    return JobStatus(
        job_id, None, tenant, None, JobPhase.RUNNING, 1, nodes=(node,), owner_ids=owners
    )


def test_each_gpu_sample_carries_the_tenant_of_the_job_holding_it(tmp_path: Path):
    clock = ManualClock(START)
    n1, n2 = Node("n1", clock), Node("n2", clock)
    n1.host.spawn(701, Owner(OwnerKind.SLURM_JOB, "4242"))
    n1.gpus.gpus[0].processes[701] = GIB
    # A GPU time-shared by two tenants' jobs belongs to neither.
    n1.host.spawn(702, Owner(OwnerKind.SLURM_JOB, "4243"))
    n1.host.spawn(703, Owner(OwnerKind.SLURM_JOB, "4244"))
    n1.gpus.gpus[1].processes.update({702: GIB, 703: GIB})
    # On Kubernetes a process is known by its pod's UID, which its Job's status lists; a pod
    # of no job the scheduler shows gives its GPU no tenant.
    n2.host.spawn(704, Owner(OwnerKind.POD, "0d5c3a8e-64ab-4f4e-a7a4-9f1a3b2c1d00"))
    n2.gpus.gpus[0].processes[704] = GIB
    n2.host.spawn(705, Owner(OwnerKind.POD, "7e1f2a3b-0c4d-4e5f-8a9b-1c2d3e4f5a6b"))
    n2.gpus.gpus[1].processes[705] = GIB
    scheduler = SchedulerSnapshot(
        START,
        (),
        (),
        (
            _job("4242", "research", "n1"),
            _job("4243", "research", "n1"),
            _job("4244", "prod", "n1"),
            _job("prod/train-1", "prod", "n2", "0d5c3a8e-64ab-4f4e-a7a4-9f1a3b2c1d00"),
        ),
    )
    seen: list[SchedulerSnapshot | None] = [None]
    fleet = LocalFleet({"n1": n1.agent.snapshot, "n2": n2.agent.snapshot})
    store = _store(tmp_path)
    metrics = ControllerMetrics(CollectorRegistry())
    observer = FleetObserver(fleet, store, clock, metrics, 30, scheduler=lambda: seen[0])
    for node in (n1, n2):
        node.agent.tick()
    observer.observe()  # before the first scheduler snapshot: no tenant is known
    clock.advance(1)
    seen[0] = scheduler
    for node in (n1, n2):
        node.agent.tick()
    observer.observe()

    before = {s.gpu_uuid: s.tenant for s in store.gpu_samples(None, START, START.replace(second=1))}
    assert set(before.values()) == {None}
    after = {
        s.gpu_uuid: s.tenant
        for s in store.gpu_samples(None, clock.now(), clock.now().replace(second=2))
    }
    assert after == {
        "GPU-n1-0": "research",
        "GPU-n1-1": None,
        "GPU-n2-0": "prod",
        "GPU-n2-1": None,
    }


def _probe_run(run_id: str, probe: str) -> ProbeRun:
    return ProbeRun(
        run_id, probe, "research", None, None, Expectation.SUCCEED, 1, 1, RunState.RUNNING
    )


def test_each_gpu_sample_says_which_probe_or_whether_a_tenants_own_job_held_it(tmp_path: Path):
    clock = ManualClock(START)
    node = Node("n1", clock, gpus=3)
    node.host.spawn(701, Owner(OwnerKind.SLURM_JOB, "4242"))
    node.gpus.gpus[0].processes[701] = GIB
    node.host.spawn(702, Owner(OwnerKind.SLURM_JOB, "4243"))
    node.gpus.gpus[1].processes[702] = GIB
    node.host.spawn(703, Owner(OwnerKind.SLURM_JOB, "4244"))
    node.gpus.gpus[2].processes[703] = GIB
    probe_job = replace(_job("4242", "research", "n1"), run_id="run-1")
    replica = replace(_job("4244", "research", "n1"), service="observer-inference")
    jobs = (probe_job, _job("4243", "research", "n1"), replica)
    active = [_probe_run("run-1", "gpu-busy")]
    fleet = LocalFleet({"n1": node.agent.snapshot})
    store = _store(tmp_path)
    observer = FleetObserver(
        fleet,
        store,
        clock,
        ControllerMetrics(CollectorRegistry()),
        30,
        scheduler=lambda: SchedulerSnapshot(clock.now(), (), (), jobs),
        runs=lambda: tuple(active),
    )

    def tasks() -> dict[str, tuple[str | None, str | None]]:
        node.agent.tick()
        observer.observe()
        at = clock.now()
        clock.advance(1)
        return {s.gpu_uuid: (s.tenant, s.task) for s in store.gpu_samples(None, at, clock.now())}

    assert tasks() == {
        "GPU-n1-0": ("research", "gpu-busy"),
        "GPU-n1-1": ("research", "job"),
        "GPU-n1-2": ("research", "inference"),  # a replica of the observer's own service
    }
    # The run ended, its job still holds the GPU (Slurm's COMPLETING): still the probe's.
    active.clear()
    assert tasks()["GPU-n1-0"] == ("research", "gpu-busy")
    # A run the controller never knew (it ended before a restart): a probe, which one not known.
    restarted = FleetObserver(
        fleet,
        store,
        clock,
        ControllerMetrics(CollectorRegistry()),
        30,
        scheduler=lambda: SchedulerSnapshot(clock.now(), (), (), jobs),
    )
    node.agent.tick()
    restarted.observe()
    [sample] = [
        s
        for s in store.gpu_samples(None, clock.now(), clock.now() + timedelta(seconds=1))
        if s.gpu_index == 0
    ]
    assert (sample.tenant, sample.task) == ("research", None)


def test_each_gpu_sample_keeps_its_jobs_task_type_from_the_configured_mapping(tmp_path: Path):
    clock = ManualClock(START)
    node = Node("n1", clock, gpus=4)
    for gpu, pid in enumerate((701, 702, 703, 704)):
        node.host.spawn(pid, Owner(OwnerKind.SLURM_JOB, str(4242 + gpu)))
        node.gpus.gpus[gpu].processes[pid] = GIB
    rules = ReportSettings.model_validate(
        {
            "task_types": [
                {"type": "interactive", "queue": "debug"},
                {"type": "training", "queue": "gpu", "priority": "long"},
                {"type": "batch", "priority": "normal"},
            ]
        }
    ).task_types

    def job(job_id: str, queue: str | None, priority: str | None) -> JobStatus:
        return replace(_job(job_id, "research", "n1"), queue=queue, priority=priority)

    jobs = (
        job("4242", "gpu", "long"),  # the second rule: both match
        job("4243", "debug", "long"),  # the first rule that matches wins
        job("4244", "gpu", "short"),  # no rule: other
        replace(job("4245", "gpu", "long"), run_id="run-1"),  # the observer's own: a probe
    )
    store = _store(tmp_path)
    observer = FleetObserver(
        LocalFleet({"n1": node.agent.snapshot}),
        store,
        clock,
        ControllerMetrics(CollectorRegistry()),
        30,
        scheduler=lambda: SchedulerSnapshot(clock.now(), (), (), jobs),
        task_types=rules,
    )
    node.agent.tick()
    observer.observe()
    stored = store.gpu_samples(None, START, START + timedelta(seconds=1))
    assert {s.gpu_uuid: s.task_type for s in stored} == {
        "GPU-n1-0": "training",
        "GPU-n1-1": "interactive",
        "GPU-n1-2": "other",
        "GPU-n1-3": "probe",
    }


def test_an_unreadable_agent_is_a_blind_spot_that_opens_after_grace_and_closes(tmp_path: Path):
    clock = ManualClock(START)
    node = Node("n1", clock)
    fleet = LocalFleet({"n1": node.agent.snapshot})
    store = _store(tmp_path)
    observer = FleetObserver(fleet, store, clock, ControllerMetrics(CollectorRegistry()), 30)
    node.agent.tick()
    fleet.unreachable.add("n1")
    for _ in range(31):
        observer.observe()
        clock.advance(1)
    [blind] = store.findings(open_only=True)
    assert blind.detector == "agent_unreachable"
    assert blind.severity.value == "critical"
    fleet.unreachable.clear()
    observer.observe()
    assert store.findings(open_only=True) == []


def test_an_agent_that_drops_out_of_discovery_keeps_its_blind_spot_open(tmp_path: Path):
    clock = ManualClock(START)
    node = Node("n1", clock)
    snapshots = {"n1": node.agent.snapshot}
    fleet = LocalFleet(snapshots)
    store = _store(tmp_path)
    observer = FleetObserver(fleet, store, clock, ControllerMetrics(CollectorRegistry()), 30)
    node.agent.tick()
    fleet.unreachable.add("n1")
    for _ in range(31):
        observer.observe()
        clock.advance(1)
    [blind] = store.findings(open_only=True)
    del snapshots["n1"]  # no longer listed by discovery: not seen, so not seen well either
    for _ in range(5):
        observer.observe()
        clock.advance(1)
    assert store.findings(open_only=True) == [blind]


def test_a_finding_an_agent_forgot_when_it_restarted_is_closed(tmp_path: Path):
    clock = ManualClock(START)
    node = Node("n1", clock)
    node.host.spawn(700, NO_OWNER)
    node.gpus.gpus[0].processes[700] = GIB
    fleet = LocalFleet({"n1": node.agent.snapshot})
    store = _store(tmp_path)
    observer = FleetObserver(fleet, store, clock, ControllerMetrics(CollectorRegistry()), 30)
    for _ in range(7):
        node.agent.tick()
        clock.advance(1)
    observer.observe()
    assert store.findings(open_only=True)

    restarted = Node("n1", clock)  # the agent restarted: the process is gone too
    fleet = LocalFleet({"n1": restarted.agent.snapshot})
    restarted.agent.tick()
    FleetObserver(fleet, store, clock, ControllerMetrics(CollectorRegistry()), 30).observe()
    [closed] = store.findings()
    assert closed.closed_at == clock.now()
    assert closed.evidence["closed_because"] == "its agent no longer reports it"


def test_the_controller_keeps_of_agent_findings_only_what_the_agents_report_now(
    tmp_path: Path,
):
    """Weeks of a soak bring new findings every hour; each is stored and counted once, read
    after read and across reads the agent missed, and what the controller holds to know them
    is what the agent still reports, not every finding of the soak."""
    clock = ManualClock(START)
    reported: list[Finding] = []

    def snapshot() -> NodeSnapshot:
        driver = DriverStatus(DriverState.OK, "550.54")
        return NodeSnapshot("n1", clock.now(), driver, (), (), tuple(reported))

    fleet = LocalFleet({"n1": snapshot})
    store = _store(tmp_path)
    metrics = ControllerMetrics(CollectorRegistry())
    observer = FleetObserver(fleet, store, clock, metrics, unreachable_grace_seconds=600)
    hours = 24 * 14
    for hour in range(hours):
        # The agent reports the finding that closed now beside the one that opened.
        closed = [replace(f, closed_at=clock.now()) for f in reported[-1:]]
        opened = Finding(
            detector="orphan_process",
            kind=FindingKind.CONDITION,
            subject={"node": "n1", "gpu_uuid": "GPU-n1-0", "pid": str(1000 + hour)},
            severity=Severity.WARNING,
            summary=f"pid {1000 + hour} belongs to no pod or job",
            opened_at=clock.now(),
            closed_at=None,
            evidence={},
        )
        reported[:] = [*closed, opened]
        for _ in range(hour % 3):  # reads that failed, then the one that answers
            fleet.unreachable.add("n1")
            observer.observe()
            fleet.unreachable.clear()
            clock.advance(5)
        observer.observe()
        clock.advance(3600)

    assert metrics.findings.total.labels("orphan_process", "warning")._value.get() == hours
    stored = store.findings(detector="orphan_process")
    assert len(stored) == hours
    assert [f.subject["pid"] for f in stored if f.is_open] == [str(1000 + hours - 1)]
    known = observer._known
    assert known is not None
    assert sum(len(findings) for findings in known.values()) == len(reported)


def test_agents_are_read_over_http_and_listed_by_the_findings_command(
    tmp_path: Path, h200_trace: Path
):
    stop = threading.Event()
    ports: list[int] = []
    ready = threading.Event()
    settings = replay_agent_settings(h200_trace, node_name="gpu-7", interval_seconds=0.05)

    def listening(port: int) -> None:
        ports.append(port)
        ready.set()

    thread = threading.Thread(
        target=run_agent, args=(settings, stop), kwargs={"on_listening": listening}
    )
    thread.start()
    store = _store(tmp_path)
    try:
        assert ready.wait(10)
        fleet = HttpFleet([f"http://127.0.0.1:{ports[0]}", "http://127.0.0.1:1"])
        clock = ManualClock(datetime.now(UTC))
        observer = FleetObserver(fleet, store, clock, ControllerMetrics(CollectorRegistry()), 0)
        deadline = 0
        began = datetime.now(UTC)
        while not store.gpu_samples("gpu-7", began, datetime.now(UTC)):
            observer.observe()
            deadline += 1
            assert deadline < 100
            threading.Event().wait(0.05)
    finally:
        stop.set()
        thread.join(5)
    [blind] = store.findings(open_only=True)
    assert blind.subject == {"agent": "http://127.0.0.1:1"}
    store.close()

    config = tmp_path / "c.yaml"
    config.write_text(f"storage: {{sqlite_path: {tmp_path / 'observer.db'}}}\n")
    done = run_cli("findings", "--config", str(config), "--open", "--json")
    assert done.exit_code == 0, done.stderr
    [line] = [json.loads(x) for x in done.stdout.splitlines()]
    assert line["detector"] == "agent_unreachable"
    assert line["closed_at"] is None
