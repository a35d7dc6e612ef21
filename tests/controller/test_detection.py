"""The controller's own detectors on its loops: a log canary read back after it ends and its
lost lines counted exactly; GPUs held with no job, by a job stuck ending, or by our own probe
after it ended, each found once and closed when released; silence when nothing was lost or
held up."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from observer.backends.simulated import SimulatedCluster
from observer.clock import ManualClock
from observer.controller.compose import Task
from observer.controller.views import Published
from observer.controller.watches.releases import RELEASE_CHECK_HORIZON
from observer.domain import (
    Finding,
    FindingKind,
    JobPhase,
    JobStatus,
    NodeSnapshot,
    Owner,
    OwnerKind,
    RunState,
    SchedulerSnapshot,
    Severity,
)
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.detectors.test_probe_release import agent, process
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LAUNCH = START + timedelta(seconds=600)  # the plan entry's first firing


class Soak:
    def __init__(
        self,
        tmp_path: Path,
        plan: list[dict[str, object]] | None = None,
        agents: bool = False,
        pods: bool = False,
    ) -> None:
        """`agents`: the nodes' agents are read every 15 s (`self.agents`); without them the
        node layer is unknown. `pods`: jobs are owned by pods, as on Kubernetes."""
        self.settings = controller_settings(
            plan=plan
            or [
                {
                    "window": "always",
                    "probe": "log-canary",
                    "every_seconds": 600,
                    "tenants": ["research"],
                },
                {"window": "always", "probe": "burst", "every_seconds": 300},
            ],
            probes={"log-canary": {"log_lines": 300, "log_interval_seconds": 0.1}},
            logs={"settle_seconds": 5},
            gpus_per_node=4,
            simulation={"nodes": 2, "gpus_per_node": 4, "pools": ["a"]},
        )
        self.clock = ManualClock(START)
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        self.cluster = simulated_cluster(self.settings, self.clock)
        backend = PodOwned(self.cluster) if pods else self.cluster

        def read_agents() -> None:  # self.agents publishes to the controller made below
            self.agents.read()

        tasks = [Task("agents", 15.0, read_agents)] if agents else []
        self.schedule = SimulatedSoak(self.settings, self.clock, self.store, backend, agents=tasks)
        self.controller = self.schedule.controller
        self.metrics = self.schedule.metrics
        self.agents = Agents(self.cluster, self.clock, self.controller.nodes, pods)


def test_lines_lost_in_the_pipeline_are_counted_exactly_and_attributed_to_the_run(tmp_path: Path):
    soak = Soak(tmp_path)
    # Lines written from 10 s to 15 s into the canary (seq 100-149) never arrive.
    soak.cluster.faults.log_loss = [
        (LAUNCH + timedelta(seconds=10), LAUNCH + timedelta(seconds=15))
    ]
    soak.schedule.run_for(900)

    [canary] = soak.store.runs(probe="log-canary")
    [finding] = soak.store.findings(detector="log_loss")
    assert finding.kind.value == "event"
    assert finding.severity.value == "critical"
    assert finding.subject["run_id"] == canary.run_id
    assert finding.subject["tenant"] == canary.tenant
    assert finding.evidence["expected_lines"] == 300
    assert finding.evidence["missing_lines"] == 50
    [missing] = finding.evidence["missing_ranges"]
    assert (missing["first_seq"], missing["last_seq"]) == (100, 149)
    total = soak.metrics.findings.total.labels("log_loss", "critical")._value.get()
    assert total == 1


def test_a_clean_soak_raises_no_finding(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.schedule.run_for(1900)
    assert len(soak.store.runs(probe="log-canary")) == 3
    assert len(soak.store.runs(probe="burst")) > 10  # burst saturates the cluster: probes wait
    assert soak.store.findings() == []


def test_a_scheduler_that_cannot_be_read_opens_nothing_from_its_last_snapshot(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.schedule.run_for(120)
    soak.cluster.faults.leaked_gpus["node-001"] = 2
    soak.schedule.run_for(30)  # one snapshot shows the leak
    soak.cluster.faults.reachable = False
    soak.schedule.run_for(300)  # the grace passes many times over on that one snapshot
    assert soak.store.findings() == []
    soak.cluster.faults.reachable = True
    soak.schedule.run_for(45)  # seen again, but not yet for the grace
    assert soak.store.findings() == []
    soak.schedule.run_for(60)
    [leak] = soak.store.findings(open_only=True)
    assert leak.detector == "allocated_without_job"


def test_a_scheduler_that_cannot_be_read_closes_nothing(tmp_path: Path):
    soak = Soak(tmp_path)
    soak.schedule.run_for(120)
    soak.cluster.faults.leaked_gpus["node-001"] = 2
    soak.schedule.run_for(120)
    [leak] = soak.store.findings(open_only=True)
    soak.cluster.faults.leaked_gpus.clear()  # released while no one can see it
    soak.cluster.faults.reachable = False
    soak.schedule.run_for(300)
    assert soak.store.findings(open_only=True) == [leak]
    soak.cluster.faults.reachable = True
    soak.schedule.run_for(60)
    assert soak.store.findings(open_only=True) == []


def test_gpus_the_scheduler_holds_with_no_job_behind_them_open_a_condition_until_released(
    tmp_path: Path,
):
    soak = Soak(tmp_path)
    soak.schedule.run_for(120)
    soak.cluster.faults.leaked_gpus["node-001"] = 2  # counted allocated, no job holds them
    soak.schedule.run_for(30)
    assert soak.store.findings() == []  # within the 60 s grace
    soak.schedule.run_for(60)
    [leak] = soak.store.findings(open_only=True)
    assert leak.detector == "allocated_without_job"
    assert leak.subject == {"node": "node-001"}
    assert leak.evidence["excess_gpus"] == 2
    assert leak.evidence["layers"] == {
        "scheduler": "held",
        # No agent is read in this soak: unknown, never released.
        "allocation": "unknown",
        "nvml": "unknown",
        "agree": ["scheduler"],
        "disagree": [],
    }

    soak.cluster.faults.leaked_gpus.clear()
    soak.schedule.run_for(60)
    assert soak.store.findings(open_only=True) == []
    [closed] = soak.store.findings()
    assert closed.closed_at is not None


SHORT = [{"window": "always", "probe": "short", "every_seconds": 600, "tenants": ["research"]}]
ENDED = LAUNCH + timedelta(seconds=60)  # the short probe's one minute


def test_a_probe_whose_process_outlives_its_job_is_found_then_closed_and_forgotten(
    tmp_path: Path,
):
    soak = Soak(tmp_path, SHORT, agents=True)
    soak.agents.keep_ended = True
    soak.schedule.run_for(720)  # 60 s after the probe's end: within the 90 s grace
    [run] = soak.store.runs(probe="short")
    assert (run.state, run.finished_at) == (RunState.DONE, ENDED)
    assert soak.store.findings() == []

    soak.schedule.run_for(60)
    [leak] = soak.store.findings(open_only=True)
    [node] = run.node_names
    assert leak.detector == "probe_unreleased"
    assert leak.subject == {"run_id": run.run_id, "node": node, "tenant": "research"}
    assert leak.evidence["job_id"] == run.job_id
    assert leak.evidence["gpus"][0]["processes"][0]["owner"] == f"job/{run.job_id}"
    assert (leak.evidence["layers"]["scheduler"], leak.evidence["layers"]["nvml"]) == (
        "released",
        "held",
    )

    soak.agents.keep_ended = False
    soak.schedule.run_for(30)
    assert soak.store.findings(open_only=True) == []

    # Judged clean, the run is forgotten: what shows up on its GPU later is not its doing.
    assert run.job_id is not None
    soak.agents.put(run.job_id, node)
    soak.schedule.run_for(120)
    assert len(soak.store.findings()) == 1


def test_a_node_whose_agent_is_not_read_neither_opens_nor_closes_the_probes_finding(
    tmp_path: Path,
):
    soak = Soak(tmp_path, SHORT, agents=True)
    soak.agents.keep_ended = True
    soak.schedule.run_for(630)  # the probe runs; the agents have seen its process
    soak.agents.blind = set(soak.cluster.nodes)
    soak.schedule.run_for(300)
    assert soak.store.findings() == []  # the last snapshots predate the grace's end

    soak.agents.blind = set()
    soak.schedule.run_for(30)
    [leak] = soak.store.findings(open_only=True)

    soak.agents.blind = set(soak.cluster.nodes)
    soak.agents.keep_ended = False  # released, but no agent sees it
    soak.schedule.run_for(120)
    assert soak.store.findings(open_only=True) == [leak]

    soak.agents.blind = set()
    soak.schedule.run_for(30)
    assert soak.store.findings(open_only=True) == []


def test_a_run_no_agent_reports_on_within_the_horizon_is_let_go_unjudged(tmp_path: Path):
    soak = Soak(tmp_path, SHORT, agents=True)
    soak.agents.keep_ended = True
    soak.schedule.run_for(630)
    [first] = soak.controller.runner.active()
    soak.agents.blind = set(soak.cluster.nodes)
    soak.schedule.run_for(RELEASE_CHECK_HORIZON.total_seconds() + 60)  # past its end + horizon

    soak.agents.blind = set()  # its leftover is still there, but the check was let go
    soak.schedule.run_for(60)
    leaks = soak.store.findings(detector="probe_unreleased")
    assert leaks  # the later runs, which the agents now see, are judged
    assert first.run_id not in {f.subject["run_id"] for f in leaks}


def test_a_probe_stuck_ending_is_stuck_terminating_and_its_gpu_is_not_also_without_a_job(
    tmp_path: Path,
):
    soak = Soak(tmp_path, SHORT, agents=True)
    soak.schedule.run_for(605)
    [run] = soak.controller.runner.active()
    assert run.job_id is not None
    soak.cluster.faults.stuck_jobs.add(run.job_id)  # its pod will not go once it ends
    soak.schedule.run_for(60 + 120 + 60)

    opened = {f.detector: f for f in soak.store.findings(open_only=True)}
    assert opened.keys() == {"stuck_terminating", "probe_unreleased"}
    stuck = opened["stuck_terminating"]
    [node] = run.node_names
    assert stuck.subject == {"job_id": run.job_id, "tenant": "research", "node": node}
    assert stuck.evidence["ending_since"] == ENDED.isoformat()
    # The controlled experiment sees the same GPU held, and both layers agree.
    assert opened["probe_unreleased"].evidence["layers"]["agree"] == ["scheduler", "nvml"]

    soak.cluster.faults.stuck_jobs.discard(run.job_id)  # force-deleted
    soak.schedule.run_for(60)
    assert soak.store.findings(open_only=True) == []
    assert {f.detector for f in soak.store.findings()} == {"stuck_terminating", "probe_unreleased"}


def test_on_kubernetes_a_probes_pod_left_on_its_gpu_is_found_by_the_pods_uid(tmp_path: Path):
    soak = Soak(tmp_path, SHORT, agents=True, pods=True)
    soak.agents.keep_ended = True
    # Judged after the grace, when the scheduler no longer lists the job or its pods.
    soak.schedule.run_for(780)

    [run] = soak.store.runs(probe="short")
    [leak] = soak.store.findings(open_only=True)
    assert leak.detector == "probe_unreleased"
    assert leak.evidence["matched_by"] == "a process owned by the run's job"
    assert leak.evidence["owner_ids"] == [pod_uid(str(run.job_id))]
    assert leak.evidence["gpus"][0]["processes"][0]["owner"] == f"pod/{pod_uid(str(run.job_id))}"

    soak.agents.keep_ended = False
    soak.schedule.run_for(30)
    assert soak.store.findings(open_only=True) == []


def pod_uid(job_id: str) -> str:
    return f"uid-of-{job_id.replace('/', '-')}"


class PodOwned:
    """The simulated cluster as Kubernetes names its jobs' owners: by their pods' UIDs."""

    def __init__(self, cluster: SimulatedCluster) -> None:
        self._cluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    def jobs(self, job_ids: Collection[str]) -> dict[str, JobStatus]:
        return {k: _pod_owned(v) for k, v in self._cluster.jobs(job_ids).items()}

    def snapshot(self) -> SchedulerSnapshot:
        snap = self._cluster.snapshot()
        return replace(snap, jobs=tuple(map(_pod_owned, snap.jobs)))


def _pod_owned(job: JobStatus) -> JobStatus:
    return replace(job, owner_ids=(pod_uid(job.job_id),))


def test_a_node_kept_in_service_after_a_fatal_xid_is_found_with_the_jobs_placed_since(
    tmp_path: Path,
):
    soak = Soak(tmp_path, agents=True)
    soak.schedule.run_for(120)
    fell_off = START + timedelta(seconds=120)
    xid = Finding(
        detector="gpu_xid",
        kind=FindingKind.EVENT,
        subject={"node": "node-001", "pci_bus_id": "0000:3b:00.0", "xid": "79"},
        severity=Severity.CRITICAL,
        summary="Xid 79 on node-001 GPU 2: GPU has fallen off the bus",
        opened_at=fell_off,
        closed_at=fell_off,
        evidence={"xid": 79, "fatal": True, "xid_class": "bus", "gpu_index": 2},
    )
    soak.agents.findings["node-001"] = [xid]
    soak.schedule.run_for(590)  # within detectors.gpu_in_service.grace_seconds (600 s)
    assert soak.store.findings(detector="unhealthy_gpu_in_service") == []

    soak.schedule.run_for(60)  # burst probes keep landing on the node

    [found] = soak.store.findings(detector="unhealthy_gpu_in_service", open_only=True)
    assert found.subject == {"node": "node-001"}
    assert found.evidence["fault"]["detector"] == "gpu_xid"
    placed = found.evidence["jobs_placed_since"]
    assert placed and all(datetime.fromisoformat(j["started_at"]) > fell_off for j in placed)

    soak.cluster.drain("node-001", "GPU 2 Xid 79")  # the platform reacts
    soak.schedule.run_for(60)
    assert soak.store.findings(detector="unhealthy_gpu_in_service", open_only=True) == []


def test_a_non_fatal_xid_keeps_the_node_in_service_without_a_finding(tmp_path: Path):
    soak = Soak(tmp_path, agents=True)
    soak.schedule.run_for(60)
    at = START + timedelta(seconds=60)
    soak.agents.findings["node-001"] = [
        Finding(
            detector="gpu_xid",
            kind=FindingKind.EVENT,
            subject={"node": "node-001", "pci_bus_id": "0000:3b:00.0", "xid": "13"},
            severity=Severity.WARNING,
            summary="Xid 13: graphics engine exception (application)",
            opened_at=at,
            closed_at=at,
            evidence={"xid": 13, "fatal": False, "xid_class": "application"},
        )
    ]
    soak.schedule.run_for(900)
    assert soak.store.findings(detector="unhealthy_gpu_in_service") == []


class Agents:
    """The nodes' agents as the simulated cluster leaves them: every job the scheduler shows
    on a node (running, or ending while it holds its GPUs) has one process per GPU there,
    owned by its job id (by its pod's UID with `pods`). `keep_ended`: processes stay after
    their job is gone from the scheduler; `blind`: nodes whose agent is not read."""

    def __init__(
        self,
        cluster: SimulatedCluster,
        clock: ManualClock,
        latest: Published[Mapping[str, NodeSnapshot]],
        pods: bool = False,
    ) -> None:
        self._pods = pods
        self.keep_ended = False
        self.blind: set[str] = set()
        self.findings: dict[str, list[Finding]] = {}  # by node: what its agent also reports
        self._cluster = cluster
        self._clock = clock
        self._latest = latest
        self._placed: dict[str, tuple[str, tuple[int, ...]]] = {}  # job id -> node, GPUs

    def put(self, job_id: str, node: str, gpus: int = 1) -> None:
        used = {g for n, held in self._placed.values() if n == node for g in held}
        free = [g for g in range(self._cluster.nodes[node].gpus) if g not in used]
        self._placed[job_id] = (node, tuple(free[:gpus]))

    def read(self) -> None:
        holding = {
            j.job_id: j
            for j in self._cluster.snapshot().jobs
            if j.nodes and (j.phase is JobPhase.RUNNING or j.ending_since is not None)
        }
        if not self.keep_ended:
            self._placed = {k: v for k, v in self._placed.items() if k in holding}
        for job in holding.values():
            if job.job_id not in self._placed:
                self.put(job.job_id, job.nodes[0], job.gpus // len(job.nodes))
        seconds = (self._clock.now() - START).total_seconds()
        read = {}
        for node in sorted(set(self._cluster.nodes) - self.blind):
            processes = [
                process(gpu, 1000 + n, self._owner(job_id))
                for n, (job_id, (where, gpus)) in enumerate(self._placed.items())
                if where == node
                for gpu in gpus
            ]
            read[node] = agent(seconds, processes, node=node, findings=self.findings.get(node, ()))
        self._latest.publish({**self._latest.get(), **read})

    def _owner(self, job_id: str) -> Owner:
        return Owner(OwnerKind.POD, pod_uid(job_id)) if self._pods else Owner(OwnerKind.JOB, job_id)
