"""TrackedOwners over a scripted source: it reads at most once per tick and only when an owner
newer than its reading appears or its interval passed; a listed owner runs, one no longer
listed ended at the first reading that missed it, and while the source cannot be read every
state is unknown and the directory is down with the source's reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from observer.domain import GpuAssignment, Owner, OwnerKind, OwnerPhase
from observer.errors import OwnerSourceError
from observer.ownership.base import NodeOwners
from observer.ownership.tracked import TrackedOwners

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
A = Owner(OwnerKind.POD, "0b7e3c1a-1111-4a4a-9c9c-00000000000a", "c" * 64)
B = Owner(OwnerKind.POD, "0b7e3c1a-2222-4b4b-9c9c-00000000000b")


class Scripted:
    """A source whose next answer the test sets: running ids, or an error."""

    name = "kubelet"

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.names: dict[str, str] = {}
        self.unmatched: dict[str, frozenset[str]] = {}
        self.gpus: dict[str, frozenset[str]] = {}
        self.error: str | None = None
        self.now = T0
        self.reads = 0

    def read(self) -> NodeOwners:
        self.reads += 1
        if self.error:
            raise OwnerSourceError(self.error)
        return NodeOwners(
            at=self.now,
            kind=OwnerKind.POD,
            running=frozenset(self.running),
            gpus=dict(self.gpus),
            allocatable=frozenset({"GPU-0", "GPU-1"}),
            names=dict(self.names),
            unmatched=dict(self.unmatched),
        )

    def close(self) -> None:
        pass


class Ticks:
    def __init__(self, interval: float = 10) -> None:
        self.source = Scripted()
        self.owners = TrackedOwners(self.source, interval)
        self.now = T0

    def tick(self, *asked: Owner) -> dict[str, tuple[OwnerPhase, datetime | None, str | None]]:
        self.source.now = self.now
        self.owners.refresh(self.now)
        states = {o.id: self.owners.state(o) for o in asked}
        self.now += timedelta(seconds=1)
        return {i: (s.phase, s.ended_at, s.name) for i, s in states.items()}


def test_a_listed_owner_runs_and_is_not_asked_again_before_the_interval():
    ticks = Ticks(interval=10)
    ticks.source.running = {A.id}
    ticks.source.names = {A.id: "team-a/train-0"}

    for _ in range(10):
        assert ticks.tick(A)[A.id] == (OwnerPhase.RUNNING, None, "team-a/train-0")

    assert ticks.source.reads == 1
    ticks.tick(A)
    assert ticks.source.reads == 2


def test_an_owner_newer_than_the_reading_is_read_for_at_once_but_once_per_tick():
    ticks = Ticks(interval=60)
    ticks.source.running = {A.id}
    ticks.tick(A)
    ticks.source.running = {A.id, B.id}

    states = ticks.tick(A, B, B)

    assert states[B.id][0] is OwnerPhase.RUNNING
    assert ticks.source.reads == 2
    ticks.tick(A, B)
    assert ticks.source.reads == 2


def test_an_owner_no_longer_listed_ended_at_the_first_reading_that_missed_it():
    ticks = Ticks(interval=5)
    ticks.source.running = {A.id}
    ticks.source.names = {A.id: "team-a/train-0"}
    ticks.tick(A)
    ticks.source.running = set()
    ticks.source.names = {}  # its log directory collected: the name is remembered
    for _ in range(4):
        assert ticks.tick(A)[A.id][0] is OwnerPhase.RUNNING  # not read again yet
    missed_at = ticks.now

    states = [ticks.tick(A)[A.id] for _ in range(12)]

    assert set(states) == {(OwnerPhase.ENDED, missed_at, "team-a/train-0")}


def test_an_owner_first_seen_unlisted_ended_at_that_reading():
    ticks = Ticks()

    assert ticks.tick(A)[A.id] == (OwnerPhase.ENDED, T0, None)


def test_while_a_listed_pod_cannot_be_matched_an_unnamed_owner_missing_is_unknown():
    ticks = Ticks(interval=1)
    ticks.source.unmatched = {"team-b/db-0": frozenset({"GPU-1"})}
    ticks.source.names = {B.id: "team-b/db-0"}

    assert ticks.tick(A)[A.id][0] is OwnerPhase.UNKNOWN
    assert ticks.tick(B)[B.id][0] is OwnerPhase.UNKNOWN  # it may be the unmatched pod

    ticks.source.names[A.id] = "team-a/train-0"  # named otherwise: certainly not listed
    assert ticks.tick(A)[A.id][0] is OwnerPhase.ENDED


def test_while_the_source_cannot_be_read_every_state_is_unknown_and_the_reason_is_given():
    ticks = Ticks(interval=1)
    ticks.source.running = {A.id}
    ticks.tick(A, B)
    assert ticks.owners.allocation().up

    ticks.source.error = "kubelet pod-resources at /k.sock: List failed: UNAVAILABLE: gone"
    states = ticks.tick(A, B)

    assert {s[0] for s in states.values()} == {OwnerPhase.UNKNOWN}
    allocation = ticks.owners.allocation()
    assert (allocation.up, allocation.reason) == (False, ticks.source.error)
    assert allocation.assignments == ()

    ticks.source.error = None
    states = ticks.tick(A, B)
    assert states[A.id][0] is OwnerPhase.RUNNING
    assert states[B.id] == (OwnerPhase.ENDED, T0, None)  # missing since before the outage


def test_owners_of_another_kind_are_unknown():
    ticks = Ticks()
    job = Owner(OwnerKind.SLURM_JOB, "4242")

    assert ticks.tick(job)[job.id][0] is OwnerPhase.UNKNOWN


def test_the_allocation_layer_names_each_gpu_holder_by_name_and_unmatched_ones_too():
    ticks = Ticks()
    ticks.source.running = {A.id}
    ticks.source.names = {A.id: "team-a/train-0"}
    ticks.source.gpus = {A.id: frozenset({"GPU-0"})}
    ticks.source.unmatched = {"team-b/db-0": frozenset({"GPU-1"})}
    ticks.tick()

    allocation = ticks.owners.allocation()

    assert allocation.source == "kubelet" and allocation.read_at == T0
    assert allocation.assignments == (
        GpuAssignment("GPU-0", Owner(OwnerKind.POD, A.id), "team-a/train-0"),
        GpuAssignment("GPU-1", Owner(OwnerKind.POD), "team-b/db-0"),
    )
