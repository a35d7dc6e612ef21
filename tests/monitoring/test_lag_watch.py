"""The controller's monitoring-lag watch against the scripted Prometheus: it compares what
Prometheus shows with what the agents read themselves, so a GPU series frozen in Prometheus
while the agent's readings move is a flat line, and a GPU-busy probe's known start measures
how late Prometheus shows its GPU busy."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.clock import ManualClock
from observer.controller.lag import LagWatch, busy_probes
from observer.domain import (
    AttributedProcess,
    DriverState,
    DriverStatus,
    Expectation,
    Finding,
    GpuIdentity,
    GpuReading,
    GpuSample,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
    ProbeRun,
    RunState,
    SchedulerSnapshot,
)
from observer.metrics import HEARTBEAT_METRIC, ControllerMetrics
from observer.monitoring.checker import MonitoringChecker
from observer.monitoring.fake import Exposition, FakePrometheus
from observer.probes.catalog import builtin_catalog, with_overrides
from observer.settings.detectors import MonitoringLagSettings
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
UTIL = "observer_gpu_utilization_ratio"
GPUS = ("GPU-a0", "GPU-a1")
RULES = MonitoringLagSettings(freshness_series=(UTIL,), scrape_jobs=("observer", "agent"))
CATALOG = builtin_catalog(gpus_per_node=2)


class Cluster:
    """One two-GPU node: its agent's readings and its exporter scraped by Prometheus are the
    same numbers, a utilisation that moves every tick, and 0.97 once a GPU-busy job holds
    the GPU."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = ManualClock(T0)
        self.prometheus = FakePrometheus(self.clock, scrape_interval_seconds=15)
        self.prometheus.add_target("observer", "controller:9401", self._heartbeat)
        self.prometheus.add_target("agent", "node-1:9400", self._exporter)
        self.busy: dict[str, str] = {}  # GPU -> job keeping it busy
        self.runs: list[ProbeRun] = []
        self.nodes: dict[str, NodeSnapshot] = {}
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        self.registry = CollectorRegistry()
        metrics = ControllerMetrics(self.registry)
        checker = MonitoringChecker(
            self.prometheus, self.clock, RULES, metrics.monitoring, {"job": "observer"}
        )
        self.watch = LagWatch(
            checker,
            self.store,
            metrics,
            self.clock,
            RULES,
            lambda: self.nodes,
            lambda: self.runs,
            CATALOG,
        )

    def utilization(self, gpu: int, at: datetime) -> float:
        if GPUS[gpu] in self.busy:
            return 0.97
        return round(0.1 + 0.1 * ((int(at.timestamp()) // 5 + gpu) % 4), 2)

    def _heartbeat(self, at: datetime) -> Exposition:
        return [(HEARTBEAT_METRIC, {}, at.timestamp())]

    def _exporter(self, at: datetime) -> Exposition:
        return [
            (UTIL, {"uuid": uuid, "gpu": str(i)}, self.utilization(i, at))
            for i, uuid in enumerate(GPUS)
        ]

    def _snapshot(self) -> NodeSnapshot:
        now = self.clock.now()
        gpus = tuple(
            GpuReading(
                index=i,
                identity=GpuIdentity(i, uuid, "NVIDIA H200", None, None),
                sample=GpuSample(
                    now, i, utilization_gpu_percent=round(self.utilization(i, now) * 100)
                ),
                counters=None,
                baseline_memory_bytes=None,
            )
            for i, uuid in enumerate(GPUS)
        )
        processes = tuple(
            AttributedProcess(
                gpu_index=GPUS.index(uuid),
                gpu_uuid=uuid,
                pid=4000 + GPUS.index(uuid),
                used_memory_bytes=2**30,
                exists=True,
                command="gpu-burn",
                owner=Owner(OwnerKind.SLURM_JOB, job),
                owner_state=OwnerState(OwnerPhase.RUNNING),
            )
            for uuid, job in self.busy.items()
        )
        return NodeSnapshot("node-1", now, DriverStatus(DriverState.OK), gpus, processes, ())

    def run_for(self, seconds: float) -> list[Finding]:
        """Agents read every 5 s, the watch checks every 15 s."""
        changed: list[Finding] = []
        for _ in range(int(seconds // 5)):
            self.clock.advance(5)
            self.prometheus.play()
            self.nodes["node-1"] = self._snapshot()
            if int((self.clock.now() - T0).total_seconds()) % 15 == 0:
                changed += self.watch.check()
        return changed

    def start_busy_probe(self, gpu: int) -> ProbeRun:
        run = ProbeRun(
            run_id="run-busy",
            probe="gpu-busy",
            tenant="research",
            queue=None,
            window="peak",
            expectation=Expectation.SUCCEED,
            gpus=1,
            nodes=1,
            state=RunState.RUNNING,
            job_id="4242",
            submitted_at=self.clock.now() - timedelta(seconds=3),
            started_at=self.clock.now(),
            node_names=("node-1",),
        )
        self.runs.append(run)
        self.busy[GPUS[gpu]] = "4242"
        return run

    def lag(self, check: str) -> float | None:
        return self.registry.get_sample_value("observer_monitoring_lag_seconds", {"check": check})


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    made.store.close()


def test_a_pipeline_that_keeps_up_opens_nothing(cluster: Cluster):
    assert cluster.run_for(900) == []
    assert (cluster.lag("heartbeat") or -1) <= 15


def test_a_gpu_frozen_in_prometheus_while_its_agent_reads_it_moving_is_a_flat_line(
    cluster: Cluster,
):
    cluster.run_for(120)
    cluster.prometheus.freeze({"uuid": "GPU-a1"})

    changed = cluster.run_for(RULES.flatline_window_seconds + 30)

    [flat] = changed
    assert flat.detector == "monitoring_lag" and flat.is_open
    assert flat.subject == {
        "pipeline": "prometheus",
        "check": "flatline",
        "series": f'{UTIL}{{uuid="GPU-a1"}}',
    }
    assert flat.evidence["agent_distinct_values"] == 4
    # Opened once the whole window shows one value (the one scraped last before the freeze,
    # at most a scrape interval earlier), and within a check of it.
    frozen_for = (flat.opened_at - (T0 + timedelta(seconds=120))).total_seconds()
    window = RULES.flatline_window_seconds
    assert window - 15 <= frozen_for <= window + 15

    cluster.prometheus.thaw({"uuid": "GPU-a1"})
    [closed] = cluster.run_for(60)
    assert closed.key == flat.key and not closed.is_open
    assert [f.key for f in cluster.store.findings()] == [flat.key]


def test_a_gpu_busy_probe_shows_busy_within_a_scrape_interval_of_its_known_start(
    cluster: Cluster,
):
    cluster.run_for(60)
    cluster.start_busy_probe(0)

    assert cluster.run_for(180) == []
    lag = cluster.lag("gpu_busy_lag")
    assert lag is not None and 0 <= lag <= 15


def test_a_gpu_busy_probe_shown_late_is_lag_measured_from_its_known_start(cluster: Cluster):
    cluster.run_for(60)
    cluster.prometheus.ingest_delay_seconds = 90
    run = cluster.start_busy_probe(1)

    changed = cluster.run_for(180)

    lagging = [f for f in changed if f.subject.get("check") == "gpu_busy_lag"]
    [busy] = lagging
    assert busy.subject["gpu_uuid"] == "GPU-a1"
    assert busy.evidence["run_id"] == "run-busy"
    assert run.started_at is not None
    assert busy.evidence["started_at"] == run.started_at.isoformat()
    assert busy.evidence["lag_seconds"] > RULES.busy_lag_max_seconds
    # The same ingestion delay shows in the heartbeat read back.
    assert (cluster.lag("heartbeat") or 0) >= 90


# --- which GPUs a busy probe keeps busy -------------------------------------------------


def node(name: str, gpus: int, owned: dict[int, str] | None = None) -> NodeSnapshot:
    readings = tuple(
        GpuReading(i, GpuIdentity(i, f"GPU-{name}-{i}", "H200", None, None), None, None, None)
        for i in range(gpus)
    )
    processes = tuple(
        AttributedProcess(
            i,
            f"GPU-{name}-{i}",
            100 + i,
            None,
            True,
            None,
            Owner(OwnerKind.SLURM_JOB, job),
            OwnerState(OwnerPhase.RUNNING),
        )
        for i, job in (owned or {}).items()
    )
    return NodeSnapshot(name, T0, DriverStatus(DriverState.OK), readings, processes, ())


def busy_run(**changes: object) -> ProbeRun:
    run = ProbeRun(
        run_id="r1",
        probe="gpu-busy",
        tenant="research",
        queue=None,
        window="peak",
        expectation=Expectation.SUCCEED,
        gpus=1,
        nodes=1,
        state=RunState.RUNNING,
        job_id="77",
        started_at=T0,
        node_names=("n1",),
    )
    return replace(run, **changes)  # type: ignore[arg-type]


def test_a_busy_probe_is_watched_on_the_gpus_its_agent_attributes_to_its_job():
    nodes = [node("n1", 8, {3: "77", 5: "other"})]
    [probe] = busy_probes([busy_run()], CATALOG, nodes)
    assert (probe.run_id, probe.gpu_uuid, probe.started_at) == ("r1", "GPU-n1-3", T0)


def test_on_kubernetes_a_busy_probe_is_watched_on_the_gpus_of_its_jobs_pods():
    uid = "0b6c9a1e-5f0e-4a57-9a3b-2f4c1d9e8a77"
    named = node("n1", 8, {3: uid, 5: "5d3e0f7a-1c2b-4e8d-9f60-7a1b2c3d4e5f"})
    pods = replace(
        named,
        processes=tuple(
            replace(p, owner=Owner(OwnerKind.POD, p.owner.id)) for p in named.processes
        ),
    )
    job_id = "research/observer-gpu-busy-1"
    job = JobStatus(
        job_id, "r1", "research", None, JobPhase.RUNNING, 1, nodes=("n1",), owner_ids=(uid,)
    )
    run = busy_run(job_id=job_id)

    [probe] = busy_probes([run], CATALOG, [pods], SchedulerSnapshot(T0, (), (), (job,)))
    assert probe.gpu_uuid == "GPU-n1-3"
    assert busy_probes([run], CATALOG, [pods]) == []  # its pods unknown: not guessed


def test_a_busy_probe_holding_whole_nodes_is_watched_on_all_their_gpus():
    whole = with_overrides(CATALOG, {"gpu-busy": {"gpus_per_node": 2}})
    probes = busy_probes([busy_run(gpus=2)], whole, [node("n1", 2)])
    assert sorted(p.gpu_uuid for p in probes) == ["GPU-n1-0", "GPU-n1-1"]


def test_a_busy_probe_not_yet_placed_on_a_gpu_or_not_started_is_not_guessed():
    nodes = [node("n1", 8)]
    assert busy_probes([busy_run()], CATALOG, nodes) == []  # 1 of 8 GPUs, not attributed
    assert busy_probes([busy_run(started_at=None)], CATALOG, [node("n1", 8, {0: "77"})]) == []
    assert busy_probes([busy_run(probe="short")], CATALOG, [node("n1", 8, {0: "77"})]) == []
    assert busy_probes([busy_run(node_names=("gone",))], CATALOG, nodes) == []
