"""The scenario's faults switched on and off at their local times in the simulated world: one
switch per kind, each turning a declared fault into an Injection with what it hit, or leaving
it one that was not injected (its trigger never came)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from observer.backends.simulated import SimulatedCluster
from observer.demo import faults as kinds
from observer.demo.faults import FaultSpec, Injection
from observer.demo.nodes import DemoNodes
from observer.demo.scenario import Scenario
from observer.domain import JobPhase, ProbeRun
from observer.fleet.local import LocalFleet
from observer.monitoring.fake import FakeTarget
from observer.probes.catalog import GPU_COMM_PROBE
from observer.records import StoredIntervention
from observer.storage.store import Store

# A log-loss fault cuts the canaries' lines from this long after they start.
LOG_LOSS_AFTER = timedelta(seconds=20)


@dataclass(frozen=True)
class World:
    """What the faults act on."""

    cluster: SimulatedCluster
    nodes: DemoNodes
    fleet: LocalFleet
    scraped: Sequence[FakeTarget]
    active: Callable[[], Sequence[ProbeRun]]  # the probe runs in flight
    store: Store


class Switch:
    """One fault's effect: `on` at its start, `off` at its end, `tick` every step between
    (while armed). A switch that hits something calls `began` with what it hit."""

    def __init__(self, world: World, injection: Injection) -> None:
        self.world = world
        self.injection = injection
        self.armed = False

    @property
    def fault(self) -> FaultSpec:
        return self.injection.fault

    def on(self, now: datetime) -> None:
        self.armed = True

    def off(self, now: datetime) -> None:
        self.armed = False
        if self.injection.injected and self.injection.end is None:
            self.injection.end = now

    def tick(self, now: datetime) -> None:
        return None

    def began(self, now: datetime, *hit: dict[str, str]) -> None:
        self.injection.start = now
        self.injection.hit = list(hit)


class _Unfair(Switch):
    def on(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.UnfairScheduler | kinds.BriefUnfairness)
        self.world.cluster.faults.favoured_tenant = self.fault.favoured
        self.began(now)

    def off(self, now: datetime) -> None:
        self.world.cluster.faults.favoured_tenant = None
        super().off(now)


class _LeakedProbeProcess(Switch):
    def on(self, now: datetime) -> None:
        self.world.nodes.leak_next_probe = True
        self._from = now

    def off(self, now: datetime) -> None:
        # Injected only if a probe ended meanwhile, from its end: its process outlived it
        # from then. Unarmed, none after the window leaks.
        nodes = self.world.nodes
        nodes.leak_next_probe = False
        leaked = [{"node": node, "run_id": run} for run, node in nodes.leaked.values()]
        if leaked:
            ends = [self._ended(hit["run_id"]) for hit in leaked]
            self.began(min([at for at in ends if at is not None], default=self._from), *leaked)
        nodes.release_leaks()
        super().off(now)

    def _ended(self, run_id: str) -> datetime | None:
        run = self.world.store.run(run_id)
        return run.finished_at if run else None


class _LeakedAllocation(Switch):
    def on(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.LeakedAllocation)
        self.world.cluster.faults.leaked_gpus[self.fault.node] = self.fault.gpus
        self.began(now)

    def off(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.LeakedAllocation)
        self.world.cluster.faults.leaked_gpus.pop(self.fault.node, None)
        super().off(now)


class _StuckTerminating(Switch):
    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.StuckTerminating)
        cluster = self.world.cluster
        for job, _, placement in cluster.holdings():
            if (
                job.run_id is None
                and job.phase is JobPhase.RUNNING
                and self.fault.tenant in (None, job.tenant)
            ):
                cluster.faults.stuck_jobs.add(job.job_id)
                self._job = job.job_id
                self.began(now, {"job_id": job.job_id, "node": next(iter(placement))})
                self.armed = False
                return

    def off(self, now: datetime) -> None:
        if self.injection.injected:
            cluster = self.world.cluster
            # Stuck from the job's own end, which came after it was picked (what the nodes
            # show: the cluster's API may be down).
            ended = next(
                (j.finished_at for j, _, _ in cluster.holdings() if j.job_id == self._job), None
            )
            self.injection.start = ended or self.injection.start
            cluster.faults.stuck_jobs.discard(self._job)
        super().off(now)


class _LogLoss(Switch):
    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.LogLoss)
        canaries = [
            run
            for run in self.world.active()
            if run.probe == "log-canary" and run.started_at is not None
        ]
        if not canaries:
            return
        started = canaries[0].started_at
        assert started is not None
        # Every canary in flight writes through this stretch: they are launched together.
        cut = started + LOG_LOSS_AFTER
        self.world.cluster.faults.log_loss.append(
            (cut, cut + timedelta(seconds=self.fault.seconds))
        )
        self.began(now, *({"run_id": run.run_id} for run in canaries))
        self.injection.end = now + timedelta(minutes=10)
        self.armed = False


class _Scraping(Switch):
    """Prometheus stops scraping (a stall, or a blip of seconds)."""

    def on(self, now: datetime) -> None:
        for target in self.world.scraped:
            target.scraped = False
        self.began(now)

    def off(self, now: datetime) -> None:
        for target in self.world.scraped:
            target.scraped = True
        super().off(now)


class _SchedulerUnreachable(Switch):
    def on(self, now: datetime) -> None:
        self.world.cluster.faults.reachable = False
        self.began(now)

    def off(self, now: datetime) -> None:
        self.world.cluster.faults.reachable = True
        super().off(now)


class _AgentDown(Switch):
    def on(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.AgentDown)
        self.world.fleet.unreachable.add(self.fault.node)
        self.began(now)

    def off(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.AgentDown)
        self.world.fleet.unreachable.discard(self.fault.node)
        super().off(now)


class _NodeDrain(Switch):
    """The operator drains the node and records it as `observer intervention add` does."""

    def on(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.NodeDrain)
        fault = self.fault
        self.world.cluster.drain(fault.node, fault.reason)
        self.world.store.add_intervention(
            StoredIntervention(now, fault.by, fault.reason, {"node": fault.node})
        )
        self.began(now, {"node": fault.node})

    def off(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.NodeDrain)
        self.world.cluster.resume(self.fault.node)
        super().off(now)


class _SlowMemoryRelease(Switch):
    def on(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.SlowMemoryRelease)
        self.world.nodes.release_delay = timedelta(seconds=self.fault.seconds)
        self.began(now)

    def off(self, now: datetime) -> None:
        self.world.nodes.release_delay = timedelta()
        super().off(now)


class _PidReuse(Switch):
    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.PidReuse)
        pid = self.world.nodes.reuse_pid(self.fault.node)
        if pid is not None:
            self.began(now, {"node": self.fault.node, "pid": str(pid)})
            self.injection.end = now
            self.armed = False


class _OwnerFlap(Switch):
    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.OwnerFlap)
        if self.world.nodes.flap_owners(self.fault.node, self.fault.ticks):
            self.began(now, {"node": self.fault.node})
            self.injection.end = now + timedelta(minutes=self.fault.ticks)
            self.armed = False


class _GpuOffBus(Switch):
    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.GpuOffBus)
        fault, nodes = self.fault, self.world.nodes
        where = [fault.node] if fault.node else nodes.names
        probe = fault.node is None
        aim = next(
            ((n, g) for n in where if (g := nodes.busy_gpu(n, fault.gpu, probe)) is not None),
            None,
        )
        if aim is None:
            return
        self._aim = aim
        job = nodes.gpu_fall_off(*aim)
        hit = {"node": aim[0], "gpu": str(aim[1]), "job_id": job or ""}
        run = next((r.run_id for r in self.world.active() if job and r.job_id == job), None)
        if run is not None:
            hit["run_id"] = run
        self.began(now, hit)
        self.armed = False

    def off(self, now: datetime) -> None:
        if self.injection.injected:
            self.world.nodes.gpu_recover(*self._aim)
        super().off(now)


class _NodeFailure(Switch):
    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.NodeFailure)
        fault = self.fault
        run = next(
            (
                r
                for r in self.world.active()
                if r.node_names and fault.node in (None, *r.node_names)
            ),
            None,
        )
        if run is None:
            return
        self._node = fault.node or run.node_names[0]
        self.world.cluster.fail_node(self._node, fault.reason)
        self.began(now, {"node": self._node, "run_id": run.run_id, "job_id": run.job_id or ""})
        self.armed = False

    def off(self, now: datetime) -> None:
        if self.injection.injected:
            self.world.cluster.resume(self._node)
        super().off(now)


class _EccBurst(Switch):
    def on(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.EccBurst)
        fault = self.fault
        self.world.nodes.ecc_burst(fault.node, fault.gpu, fault.errors)
        self.began(now, {"node": fault.node, "gpu": str(fault.gpu)})

    def off(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.EccBurst)
        self.world.nodes.ecc_clear(self.fault.node, self.fault.gpu)
        super().off(now)


class _ThermalSlowdown(Switch):
    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.ThermalSlowdown)
        gpu = self.world.nodes.busy_gpu(self.fault.node, self.fault.gpu)
        if gpu is None:
            return
        self._gpu = gpu
        self.world.nodes.thermal_slowdown(self.fault.node, gpu, on=True)
        self.began(now, {"node": self.fault.node, "gpu": str(gpu)})
        self.armed = False

    def off(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.ThermalSlowdown)
        if self.injection.injected:
            self.world.nodes.thermal_slowdown(self.fault.node, self._gpu, on=False)
        super().off(now)


class _CommDegraded(Switch):
    def on(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.CommDegraded)
        self.world.cluster.faults.comm_degraded[self.fault.node] = self.fault.pair
        super().on(now)

    def tick(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.CommDegraded)
        node = self.fault.node
        hits = [
            {"node": node, "run_id": r.run_id, "job_id": r.job_id or ""}
            for r in self.world.active()
            if r.probe == GPU_COMM_PROBE and node in r.node_names
        ]
        known = {hit["run_id"] for hit in self.injection.hit}
        if new := [hit for hit in hits if hit["run_id"] not in known]:
            if self.injection.start is None:
                self.injection.start = now
            self.injection.hit += new

    def off(self, now: datetime) -> None:
        assert isinstance(self.fault, kinds.CommDegraded)
        self.world.cluster.faults.comm_degraded.pop(self.fault.node, None)
        # A run still going ends on a healthy link: not hit.
        going = {r.run_id for r in self.world.active()}
        self.injection.hit = [h for h in self.injection.hit if h["run_id"] not in going]
        if not self.injection.hit:
            self.injection.start = None
        super().off(now)


_SWITCHES: dict[type[FaultSpec], type[Switch]] = {
    kinds.UnfairScheduler: _Unfair,
    kinds.BriefUnfairness: _Unfair,
    kinds.LeakedProbeProcess: _LeakedProbeProcess,
    kinds.LeakedAllocation: _LeakedAllocation,
    kinds.StuckTerminating: _StuckTerminating,
    kinds.LogLoss: _LogLoss,
    kinds.PrometheusStall: _Scraping,
    kinds.PrometheusBlip: _Scraping,
    kinds.SchedulerUnreachable: _SchedulerUnreachable,
    kinds.AgentDown: _AgentDown,
    kinds.NodeDrain: _NodeDrain,
    kinds.SlowMemoryRelease: _SlowMemoryRelease,
    kinds.PidReuse: _PidReuse,
    kinds.OwnerFlap: _OwnerFlap,
    kinds.GpuOffBus: _GpuOffBus,
    kinds.NodeFailure: _NodeFailure,
    kinds.EccBurst: _EccBurst,
    kinds.ThermalSlowdown: _ThermalSlowdown,
    kinds.CommDegraded: _CommDegraded,
}


class FaultScript:
    """Every fault of the scenario, switched at its local times; armed switches ticked each
    step."""

    def __init__(self, scenario: Scenario, world: World) -> None:
        self.injections = [Injection(fault) for fault in scenario.faults]
        self._switches = [_SWITCHES[type(i.fault)](world, i) for i in self.injections]
        steps: list[tuple[datetime, int, Callable[[datetime], None]]] = []
        for n, switch in enumerate(self._switches):
            fault = switch.fault
            steps.append((scenario.local(fault.at), n, switch.on))
            end = fault.ends()
            if end is not None:
                steps.append((scenario.local(end), n, switch.off))
        self._steps = sorted(steps, key=lambda step: (step[0], step[1]))

    def next_due(self) -> datetime | None:
        return self._steps[0][0] if self._steps else None

    def tick(self, now: datetime) -> None:
        while self._steps and self._steps[0][0] <= now:
            self._steps.pop(0)[2](now)
        for switch in self._switches:
            if switch.armed:
                switch.tick(now)
