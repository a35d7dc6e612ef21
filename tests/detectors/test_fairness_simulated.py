"""Persistent unfairness on the simulated cluster, night after night, through the real
controller: fairness probes every quarter of an hour in a night window, background training
from both tenants keeping demand above the cluster's 12 GPUs, the detector's inputs read back
from the store as the controller reads them. A fair-share scheduler is never found unfair;
one that always serves the smaller tenant first is, once K nights show it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from observer.clock import ManualClock
from observer.detectors.fairness import (
    WindowAssessment,
)
from observer.domain import Finding, Severity, Workload
from observer.settings.detectors import FairnessSettings
from observer.simulation.nights import FIRST_EVENING, ContendedNights
from observer.simulation.soak import SimulatedSoak, simulated_cluster
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

RULES = FairnessSettings()


class Nights(ContendedNights):
    """The contended nights, each night's opened findings and the nights weighed at hand."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path, lambda: Workload(1, duration_seconds=600))

    @property
    def assessments(self) -> list[WindowAssessment]:
        """The nights of this soak the controller's own fairness detector weighed (it also
        weighs, empty, the nights before the soak began)."""
        return [
            a
            for a in self.controller.detection.assessments()
            if a.occurrence.start >= FIRST_EVENING
        ]


def test_a_fair_share_scheduler_is_not_found_unfair_night_after_night(tmp_path: Path):
    nights = Nights(tmp_path)
    for _ in range(RULES.persistence_k + 1):
        assert nights.night() == []
    for assessment in nights.assessments:
        research, prod = assessment.tenant("research"), assessment.tenant("prod")
        assert research is not None and prod is not None
        # demand stayed above capacity all night: both tenants asked beyond their shares,
        # got them, and their probes' waits are the price of that, not unfairness
        assert research.over_ask and prod.over_ask, (research.reason, prod.reason)
        assert not research.disadvantaged and not prod.disadvantaged
        assert research.share_ratio is not None and prod.share_ratio is not None
        assert research.share_ratio > 1 - RULES.disadvantage_share_tolerance
        assert prod.share_ratio > 1 - RULES.disadvantage_share_tolerance
        assert assessment.fairness_index is not None and assessment.fairness_index > 0.95
        assert research.probes >= 10 and assessment.batches >= 10
    # The controller's own detectors, run on its loops, agree and stay quiet.
    assert nights.store.findings() == []


def test_a_scheduler_that_favours_the_smaller_tenant_is_found_unfair_after_k_nights(
    tmp_path: Path,
):
    nights = Nights(tmp_path)
    nights.cluster.faults.favoured_tenant = "prod"
    for _ in range(RULES.persistence_k - 1):
        assert nights.night() == []  # one or two bad nights are not a pattern
    [finding] = nights.night()

    assert finding.detector == "persistent_unfairness"
    assert finding.subject == {"tenant": "research"}
    assert finding.severity is Severity.WARNING  # 3 nights so far, not yet all of the last 5
    # The last M nights are weighed; those before the soak began had nothing to weigh.
    last_m = finding.evidence["occurrences"]
    weighed = [n for n in last_m if datetime.fromisoformat(n["end"]) > FIRST_EVENING]
    before = [n for n in last_m if datetime.fromisoformat(n["end"]) <= FIRST_EVENING]
    assert len(weighed) + len(before) == RULES.persistence_m
    assert all(n["fairness_index"] is None and not n["disadvantaged"] for n in before)
    assert len(weighed) == RULES.persistence_k
    for night in weighed:
        assert night["disadvantaged"] is True
        assert night["share_ratio"] < 0.5, night
        assert night["longer_wait_batches"] > night["compared_batches"] / 2
        assert night["start"].endswith("T22:00:00+08:00")
        assert night["end"].endswith("T01:00:00+08:00")
    for assessment in nights.assessments:
        prod = assessment.tenant("prod")
        assert prod is not None and prod.over_ask and not prod.disadvantaged
        assert assessment.fairness_index is not None and assessment.fairness_index < 0.7
    # The controller's own detectors, run on its loops, found the same and only that.
    [stored] = nights.store.findings()
    assert (stored.detector, dict(stored.subject)) == (finding.detector, finding.subject)
    assert stored.is_open


# --- unexplained waits --------------------------------------------------------------------


def _held(tmp_path: Path, reason: str) -> tuple[list[Finding], list[Finding]]:
    """Fairness probes every five minutes on an idle cluster; the scheduler holds prod's jobs
    for ten minutes showing `reason`, then lets them go. What opened, then what closed."""
    settings = controller_settings(
        tenants=[{"name": "research", "weight": 0.7}, {"name": "prod", "weight": 0.3}],
        plan=[{"window": "always", "probe": "fairness", "every_seconds": 300}],
        follow_interval_seconds=15,
        snapshot_interval_seconds=15,
        simulation={"nodes": 3, "gpus_per_node": 4, "pools": ["a"]},
    )
    clock = ManualClock(FIRST_EVENING)
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    cluster = simulated_cluster(settings, clock)
    schedule = SimulatedSoak(settings, clock, store, cluster)
    schedule.run_for(600, lambda: clock.advance(5))
    cluster.faults.held_tenants["prod"] = reason
    schedule.run_for(600, lambda: clock.advance(5))
    opened = store.findings()
    cluster.faults.held_tenants.clear()
    schedule.run_for(60, lambda: clock.advance(5))
    closed = [f for f in store.findings() if not f.is_open]
    store.close()
    return opened, closed


def test_a_probe_held_with_no_reason_is_an_unexplained_wait_until_it_starts(tmp_path: Path):
    opened, closed = _held(tmp_path, "")

    # Two launches in the ten minutes; each of prod's probes is reported once held beyond
    # the grace, research's never.
    assert {f.detector for f in opened} == {"unexplained_wait"}
    assert {f.subject["tenant"] for f in opened} == {"prod"}
    assert len(opened) == 2
    assert all(f.evidence["kind"] == "no_reason" for f in opened)
    assert sorted(f.key for f in closed) == sorted(f.key for f in opened)


def test_a_probe_held_for_resources_while_gpus_are_free_is_an_unexplained_wait(tmp_path: Path):
    opened, _ = _held(tmp_path, "Resources")

    assert [f.subject["tenant"] for f in opened] == ["prod", "prod"]
    for finding in opened:
        assert finding.evidence["kind"] == "reason_contradicted"
        assert finding.evidence["reason"] == "Resources"
        assert len(finding.evidence["free_nodes"]) == 3
