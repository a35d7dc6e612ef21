"""Queue fairness, per window occurrence and across them: entitlements are weighted max-min
fair given demand, or a queue's nominal quota where one guarantees it; a tenant is
disadvantaged when it waits longer than the others or gets less than its entitlement, never
when it asked for more than its share; one bad night is not a finding, K of the last M are,
and the finding names the stretch it was held short, who held the GPUs, and why a tenant that
waited longer is not the disadvantaged one."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from observer.detectors.conditions import ConditionTracker
from observer.detectors.fairness import (
    Capacity,
    Guarantee,
    TenantAssessment,
    WindowAssessment,
    assess_window,
    capacity_over,
    covers,
    entitlements,
    evaluate,
    jain_index,
    schedulable_gpus,
)
from observer.domain import (
    Expectation,
    Outcome,
    ProbeRun,
    QueueState,
    RunState,
    SchedulerNode,
    Severity,
)
from observer.probes.windows import (
    Calendar,
    Occurrence,
    Window,
    occurrence_of,
    occurrences,
    parse_days,
)
from observer.settings.detectors import FairnessSettings

SHANGHAI = ZoneInfo("Asia/Shanghai")
NIGHT = Window("night", parse_days("*"), time(22), time(6))
FRIDAY_NIGHT = Window("friday-night", parse_days("fri"), time(22), time(2))
WEEKEND = Window("weekend", parse_days("sat,sun"), time(0), time(0))
CALENDAR = Calendar(SHANGHAI, [NIGHT, FRIDAY_NIGHT, WEEKEND])
WEIGHTS = {"research": 0.7, "prod": 0.3}
RULES = FairnessSettings()
MONDAY_NIGHT = Occurrence(
    "night",
    datetime(2026, 11, 30, 22, 0, tzinfo=SHANGHAI),
    datetime(2026, 12, 1, 6, 0, tzinfo=SHANGHAI),
)


def local(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=SHANGHAI)


# --- window occurrences --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "at", "start", "end"),
    [
        ("night", local(2026, 11, 30, 23, 0), local(2026, 11, 30, 22), local(2026, 12, 1, 6)),
        # after midnight the night still belongs to the evening it began on
        ("night", local(2026, 12, 1, 5, 59), local(2026, 11, 30, 22), local(2026, 12, 1, 6)),
        ("night", local(2026, 12, 1, 6, 0), None, None),  # the end is not in it
        ("friday-night", local(2026, 12, 5, 1, 0), local(2026, 12, 4, 22), local(2026, 12, 5, 2)),
        ("friday-night", local(2026, 12, 6, 1, 0), None, None),  # Saturday night is not Friday's
        ("weekend", local(2026, 12, 6, 23, 59), local(2026, 12, 6, 0), local(2026, 12, 7, 0)),
    ],
)
def test_an_instant_belongs_to_one_occurrence_of_a_window_in_the_platforms_timezone(
    window: str, at: datetime, start: datetime | None, end: datetime | None
):
    found = occurrence_of(CALENDAR, window, at.astimezone(UTC))
    if start is None:
        assert found is None
    else:
        assert end is not None
        assert found == Occurrence(window, start, end)


def test_completed_occurrences_are_those_wholly_in_the_span_oldest_first():
    found = occurrences(CALENDAR, "night", local(2026, 11, 30, 12), local(2026, 12, 3, 3))
    assert [o.start for o in found] == [local(2026, 11, 30, 22), local(2026, 12, 1, 22)]
    # Wednesday's night has begun and not ended: not complete yet


def test_an_unknown_window_is_an_error():
    with pytest.raises(KeyError, match="peak"):
        occurrence_of(CALENDAR, "peak", local(2026, 11, 30, 23))


# --- entitlements ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("demand", "capacity", "expected"),
    [
        # both ask for everything: shares by weight
        ({"research": 12, "prod": 12}, 12, {"research": 8.4, "prod": 3.6}),
        # prod asks for less than its share: research may use what prod leaves
        ({"research": 12, "prod": 2}, 12, {"research": 10.0, "prod": 2.0}),
        # research asks for little: prod is entitled to the rest, beyond its weight
        ({"research": 1, "prod": 20}, 12, {"research": 1.0, "prod": 11.0}),
        # nobody is entitled to more than it asks, even with capacity to spare
        ({"research": 3, "prod": 2}, 12, {"research": 3.0, "prod": 2.0}),
        ({"research": 0, "prod": 5}, 12, {"research": 0.0, "prod": 5.0}),
        ({"research": 5, "prod": 5}, 0, {"research": 0.0, "prod": 0.0}),
    ],
)
def test_entitlements_are_weighted_max_min_fair_given_demand(
    demand: dict[str, int], capacity: int, expected: dict[str, float]
):
    assert entitlements(WEIGHTS, demand, capacity) == pytest.approx(expected)


def test_water_filling_hands_what_a_small_tenant_leaves_to_the_others_by_weight():
    weights = {"a": 1.0, "b": 1.0, "c": 2.0}
    # equal split by weight would be a=3, b=3, c=6; a asks 1, so 11 is shared 1:2 by b and c,
    # and b's 3.67 is more than b's 3: b is sated, c gets the rest
    assert entitlements(weights, {"a": 1, "b": 3, "c": 20}, 12) == pytest.approx(
        {"a": 1.0, "b": 3.0, "c": 8.0}
    )


def test_a_tenant_without_a_weight_is_entitled_to_nothing():
    assert entitlements(WEIGHTS, {"research": 4, "other": 4}, 4) == {"research": 4.0, "other": 0}


@pytest.mark.parametrize(
    ("ratios", "index"),
    [([1.0, 1.0], 1.0), ([1.0, 0.0], 0.5), ([2.0, 1.0, 1.0], 16 / 18), ([], None), ([0.0], None)],
)
def test_jains_index_is_one_when_equal_and_one_over_n_when_one_has_everything(
    ratios: list[float], index: float | None
):
    assert jain_index(ratios) == (pytest.approx(index) if index is not None else None)


def test_capacity_is_the_gpus_of_nodes_in_service():
    nodes = [
        SchedulerNode("n1", "gpu", 4, 4, "allocated"),
        SchedulerNode("n2", "gpu", 4, 1, "mixed"),
        SchedulerNode("n3", "gpu", 4, 0, "drained", "bad gpu"),
        SchedulerNode("n4", "gpu", 4, 0, "idle*"),  # not responding
        SchedulerNode("k1", "h200", 8, 0, "Ready,SchedulingDisabled", "cordoned"),
        SchedulerNode("k2", "h200", 8, 2, "Ready"),
        SchedulerNode("k3", "h200", 8, 0, "Ready", "taint nvidia.com/gpu=present:NoSchedule"),
    ]
    assert schedulable_gpus(nodes) == 4 + 4 + 8 + 8


# --- one occurrence ------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    at: datetime
    state: QueueState


def probe(tenant: str, submitted: datetime, wait: float | None, n: int = 0) -> ProbeRun:
    started = submitted + timedelta(seconds=wait) if wait is not None else None
    return ProbeRun(
        run_id=f"{tenant}-{submitted:%H%M}-{n}",
        probe="fairness",
        tenant=tenant,
        queue=None,
        window="night",
        expectation=Expectation.SUCCEED,
        gpus=1,
        nodes=1,
        state=RunState.DONE if started else RunState.PENDING,
        job_id=f"job-{tenant}-{submitted:%H%M}",
        submitted_at=submitted,
        started_at=started,
        finished_at=started + timedelta(minutes=2) if started else None,
        outcome=Outcome.PASSED if started else None,
    )


def batches(waits: dict[str, list[float | None]], every_minutes: int = 30) -> list[ProbeRun]:
    """Fairness launches through Monday night: every tenant's probe at the same moment."""
    runs = []
    for tenant, tenant_waits in waits.items():
        for i, wait in enumerate(tenant_waits):
            runs.append(
                probe(tenant, MONDAY_NIGHT.start + timedelta(minutes=every_minutes * i), wait)
            )
    return runs


def samples(
    *shape: tuple[int, int, int, int], every_seconds: int = 60, waited_seconds: float = 900.0
) -> list[Sample]:
    """Queue samples: (research running, research pending, prod running, prod pending) GPUs;
    pending jobs have waited `waited_seconds`, beyond the wait rule unless said otherwise."""
    out = []
    for i, (r_run, r_pend, p_run, p_pend) in enumerate(shape):
        at = MONDAY_NIGHT.start + timedelta(seconds=every_seconds * i)
        r_wait, p_wait = (waited_seconds if pend else 0.0 for pend in (r_pend, p_pend))
        out += [
            Sample(at, QueueState("research", None, r_pend, r_pend, r_run, r_run, r_wait)),
            Sample(at, QueueState("prod", None, p_pend, p_pend, p_run, p_run, p_wait)),
        ]
    return out


TWELVE_GPUS = Capacity(12)


def assess(
    runs: list[ProbeRun], queue: list[Sample], capacity: Capacity = TWELVE_GPUS
) -> WindowAssessment:
    return assess_window(MONDAY_NIGHT, runs, queue, WEIGHTS, capacity, RULES)


def tenant(result: WindowAssessment, name: str) -> TenantAssessment:
    found = result.tenant(name)
    assert found is not None, f"no assessment of {name}"
    return found


def test_gpus_a_tenants_own_quota_withholds_are_not_unfairness():
    # research may hold 4 GPUs at once: what it asks beyond that its quota refuses, and prod
    # is entitled to the rest.
    queue = samples(*[(4, 8, 8, 4)] * 10)
    capped = assess_window(
        MONDAY_NIGHT, [], queue, WEIGHTS, TWELVE_GPUS, RULES, quotas={"research": 4}
    )
    research = capped.tenant("research")
    assert research is not None and not research.disadvantaged
    assert research.entitled_gpus == 4.0
    # without the quota the same shortfall is the scheduler's
    uncapped = assess(runs=[], queue=queue).tenant("research")
    assert uncapped is not None and uncapped.disadvantaged


def test_probe_waits_held_by_the_tenants_own_quota_do_not_count_against_the_scheduler():
    runs = batches({"research": [1800, 1700], "prod": [10, 20]})
    held_by_quota = [
        replace(r, pending_reasons={"QuotaExceeded": 1790.0}) if r.tenant == "research" else r
        for r in runs
    ]
    queue = samples(*[(4, 0, 8, 0)] * 10)
    assert tenant(assess(runs, queue), "research").disadvantaged
    research = tenant(assess(held_by_quota, queue), "research")
    assert not research.disadvantaged
    assert research.longer_wait_batches == 0


def test_a_tenant_held_below_its_entitlement_while_asking_is_disadvantaged():
    # prod is favoured: it holds 10 GPUs, research 2 of its entitled 8.4 while asking 10
    queue = samples(*[(2, 8, 10, 5)] * 10)
    result = assess(batches({"research": [1800, 1700], "prod": [10, 20]}), queue)
    research, prod = tenant(result, "research"), tenant(result, "prod")
    assert research.disadvantaged and not research.over_ask
    assert research.received_gpus == 2 and research.entitled_gpus == pytest.approx(8.4)
    assert "received 2.0 of its entitled 8.4 GPUs while asking 10.0" in research.reason
    assert "longer than the other tenants' probes in 2 of 2 launch batches" in research.reason
    assert not prod.disadvantaged and prod.over_ask  # it asked beyond its share and got it
    assert result.fairness_index == pytest.approx(jain_index([2 / 8.4, 10 / 3.6]))


def test_a_tenant_that_asks_for_more_than_its_share_is_not_disadvantaged_by_its_waits():
    # research holds its share of 8 and asks for 20: its probes wait behind its own backlog
    queue = samples(*[(8, 12, 4, 0)] * 10)
    result = assess(batches({"research": [1500, 1600, 1400], "prod": [5, 8, 3]}), queue)
    research = tenant(result, "research")
    assert research.longer_wait_batches == 3
    assert research.over_ask
    assert not research.disadvantaged
    assert (
        "asked for more than its share: received 8.0 of its entitled 8.4 GPUs while asking 20.0"
        in research.reason
    )


def test_waiting_longer_than_the_others_is_disadvantage_when_the_share_is_not_known():
    # the probes waited long but between samples: no sample saw research pending
    result = assess(batches({"research": [900, 800], "prod": [10, 5]}), samples((6, 0, 3, 0)))
    research = tenant(result, "research")
    assert research.pending_samples == 0 and research.received_gpus is None
    assert research.disadvantaged
    assert research.others_median_wait_seconds == pytest.approx(7.5)


def test_waits_are_compared_within_launch_batches_only():
    # research's slow probes ran at quiet times when prod launched nothing
    runs = batches({"research": [10, 900, 900]}, every_minutes=60) + batches({"prod": [5]})
    result = assess(runs, samples((6, 0, 3, 0)))
    research = tenant(result, "research")
    assert (research.batches, research.longer_wait_batches) == (1, 0)
    assert not research.disadvantaged
    assert result.batches == 3


def test_a_probe_that_never_started_waited_at_least_until_the_assessment():
    # research's probe never started; the occurrence ended 8 hours after it was submitted
    result = assess(batches({"research": [None], "prod": [30]}), samples((0, 1, 12, 0)))
    research = tenant(result, "research")
    assert research.unstarted_probes == 1
    assert research.median_wait_seconds == 8 * 3600
    assert research.disadvantaged


def test_an_unstarted_probe_of_the_others_never_makes_a_tenant_late():
    result = assess(batches({"research": [600], "prod": [None]}), samples((6, 0, 3, 0)))
    assert tenant(result, "research").longer_wait_batches == 0


def test_gpus_of_tenants_outside_the_contract_are_taken_off_the_capacity():
    queue = [
        *samples((4, 4, 4, 4)),
        Sample(MONDAY_NIGHT.start, QueueState("someone-else", None, 0, 0, 4, 4, 0.0)),
    ]
    result = assess([], queue)
    # 8 GPUs left for research and prod: 5.6 and 2.4; prod holds 4 and research 4 of 5.6
    assert tenant(result, "research").entitled_gpus == pytest.approx(5.6)
    assert result.tenant("someone-else") is None


def test_jobs_submitted_just_before_a_sample_are_not_held_below_their_share():
    # The week's peak: every launch lands at the sample's instant; research's new jobs wait
    # a scheduling cycle behind prod's running ones, then start within seconds.
    queue = samples(*[(6, 3, 6, 3), (8, 0, 4, 0)] * 4, waited_seconds=0.0)
    result = assess(batches({"research": [10, 10], "prod": [35, 35]}), queue)
    research = tenant(result, "research")
    assert research.pending_samples == 0
    assert not research.disadvantaged, research.reason
    assert result.contention_samples == 0 and result.fairness_index is None


def test_held_beyond_the_wait_rule_the_same_shortfall_is_disadvantage():
    queue = samples(
        *[(6, 3, 6, 3), (8, 0, 4, 0)] * 4, waited_seconds=RULES.disadvantage_wait_seconds + 1
    )
    research = tenant(assess(batches({"research": [10, 10], "prod": [35, 35]}), queue), "research")
    assert research.pending_samples == 4
    assert research.disadvantaged
    assert "received 6.0 of its entitled 8.4 GPUs while asking 9.0" in research.reason


@dataclass(frozen=True)
class Change:
    at: datetime
    node: SchedulerNode
    removed: bool = False


def test_each_sample_is_judged_against_the_gpus_in_service_at_its_moment():
    # node n3 is drained for the middle of the night and resumed before its end: research
    # holds 6 of the 8 GPUs left, its share of them (5.6), not of the full 12 (8.4).
    t0 = MONDAY_NIGHT.start
    nodes = [SchedulerNode(f"n{i}", "gpu", 4, 4, "allocated") for i in (1, 2, 3)]
    drained = replace(nodes[2], gpus_allocated=0, state="drained", reason="PSU swap")

    capacity = capacity_over(
        nodes,
        [Change(t0 + timedelta(minutes=1), drained), Change(t0 + timedelta(hours=7), nodes[2])],
    )
    queue = samples(*[(6, 3, 2, 5)] * 10)[2:]  # minutes 1 to 9, inside the drain
    result = assess(batches({"research": [10], "prod": [20]}), queue, capacity)

    assert [capacity.at(t0 + timedelta(minutes=m)) for m in (0, 1, 5)] == [12, 8, 8]
    assert capacity.at(t0 + timedelta(hours=7)) == capacity.at(MONDAY_NIGHT.end) == 12
    research = tenant(result, "research")
    assert research.entitled_gpus == pytest.approx(5.6)
    assert not research.disadvantaged, research.reason


def test_a_node_that_leaves_the_snapshots_takes_its_gpus_off_the_capacity():
    t0 = MONDAY_NIGHT.start
    nodes = [SchedulerNode("n1", "gpu", 4, 0, "idle"), SchedulerNode("n2", "gpu", 8, 0, "idle")]

    capacity = capacity_over(nodes, [Change(t0 + timedelta(minutes=5), nodes[1], removed=True)])
    assert (capacity.at(t0), capacity.at(t0 + timedelta(minutes=5))) == (12, 4)


def test_a_fair_night_gives_a_fairness_index_near_one():
    queue = samples(*[(8, 4, 4, 2), (9, 3, 3, 3)] * 5)
    result = assess(batches({"research": [200, 300], "prod": [250, 240]}), queue)
    assert not any(t.disadvantaged for t in result.tenants)
    assert result.fairness_index is not None and result.fairness_index > 0.95
    assert result.contention_samples == 10


# --- persistence ---------------------------------------------------------------------------


def night(day: int, research_disadvantaged: bool, window: str = "night") -> WindowAssessment:
    start = local(2026, 11, 30, 22) + timedelta(days=day)
    occurrence = Occurrence(window, start, start + timedelta(hours=8))
    queue = [
        replace(s, at=s.at + timedelta(days=day))
        for s in samples(*[(2, 8, 10, 5) if research_disadvantaged else (8, 4, 4, 2)] * 4)
    ]
    return assess_window(occurrence, [], queue, WEIGHTS, TWELVE_GPUS, RULES)


def test_one_bad_night_is_not_persistent_unfairness():
    assert evaluate([night(0, False), night(1, True), night(2, False)], RULES) == []


def test_fewer_than_k_occurrences_are_never_a_finding():
    assert evaluate([night(0, True), night(1, True)], RULES) == []


def test_disadvantaged_in_k_of_the_last_m_nights_is_persistent_unfairness():
    history = [night(0, True), night(1, False), night(2, True), night(3, False), night(4, True)]
    [symptom] = evaluate(history, RULES)
    assert symptom.detector == "persistent_unfairness"
    assert symptom.subject == {"tenant": "research"}
    assert symptom.evidence["windows"] == ["night"]
    assert symptom.severity is Severity.WARNING
    assert symptom.since == history[0].occurrence.start
    evidence = symptom.evidence
    assert (evidence["disadvantaged_occurrences"], evidence["occurrences_weighed"]) == (3, 5)
    assert [o["disadvantaged"] for o in evidence["occurrences"]] == [
        True,
        False,
        True,
        False,
        True,
    ]
    first = evidence["occurrences"][0]
    assert (first["received_gpus"], first["entitled_gpus"], first["demand_gpus"]) == (
        2.0,
        8.4,
        10.0,
    )
    assert "at least 3 of the last 5" in symptom.rule


def test_a_pattern_across_different_windows_counts_as_one():
    # A day of peaks and nights: the last M occurrences, whichever window each was.
    history = [
        night(0, True),
        night(0, False, window="weekday-peak"),
        night(1, True, window="weekday-peak"),
        night(2, True),
    ]
    [symptom] = evaluate(history, RULES)
    assert symptom.subject == {"tenant": "research"}
    assert symptom.evidence["windows"] == ["night", "weekday-peak"]
    assert [o["window"] for o in symptom.evidence["occurrences"]] == [
        "night",
        "weekday-peak",
        "weekday-peak",
        "night",
    ]
    assert "(night, weekday-peak)" in symptom.summary


def test_only_the_last_m_occurrences_are_weighed():
    old_bad = [night(0, True), night(1, True), night(2, True)]
    recent_good = [night(d, False) for d in range(3, 6)]
    assert evaluate(old_bad + recent_good, RULES) == []


def test_disadvantaged_in_all_of_the_last_m_is_critical():
    [symptom] = evaluate([night(d, True) for d in range(5)], RULES)
    assert symptom.severity is Severity.CRITICAL


def test_the_condition_closes_when_the_pattern_is_gone_from_the_last_m_occurrences():
    tracker = ConditionTracker()
    history = [night(d, True) for d in range(3)]
    now = history[-1].occurrence.end
    [opened] = tracker.update(evaluate(history, RULES), now, lambda d, s: covers(history, d, s))
    assert opened.is_open
    # an evaluation with nothing completed to weigh says nothing about it
    assert tracker.update(evaluate([], RULES), now, lambda d, s: covers([], d, s)) == []
    history += [night(d, False, "weekend") for d in range(3, 6)]
    [closed] = tracker.update(evaluate(history, RULES), now, lambda d, s: covers(history, d, s))
    assert closed.key == opened.key and not closed.is_open


def test_k_may_not_exceed_m():
    with pytest.raises(ValueError, match="persistence_k"):
        FairnessSettings(persistence_k=4, persistence_m=3)


# --- guarantees, the stretch held short, the favoured tenant that waited longer ------------


def test_a_nominal_quota_is_the_entitlement_capped_by_demand():
    guarantees = {"research": Guarantee(8, 0)}
    # research is guaranteed 8 and may borrow none: prod is entitled to the rest
    assert entitlements(WEIGHTS, {"research": 12, "prod": 12}, 12, guarantees) == pytest.approx(
        {"research": 8.0, "prod": 4.0}
    )
    # asking less than its quota it is entitled to what it asks, and prod to what it leaves
    assert entitlements(WEIGHTS, {"research": 3, "prod": 12}, 12, guarantees) == pytest.approx(
        {"research": 3.0, "prod": 9.0}
    )


def test_a_guaranteed_tenant_borrows_what_the_others_leave_idle_up_to_its_limit():
    limited = {"research": Guarantee(4, 2), "prod": Guarantee(8, 0)}
    # prod asks 1 of its 8: research borrows 2 of the 7 left idle, no more
    assert entitlements(WEIGHTS, {"research": 12, "prod": 1}, 12, limited) == pytest.approx(
        {"research": 6.0, "prod": 1.0}
    )
    unlimited = {"research": Guarantee(4, None), "prod": Guarantee(8, 0)}
    assert entitlements(WEIGHTS, {"research": 12, "prod": 1}, 12, unlimited) == pytest.approx(
        {"research": 11.0, "prod": 1.0}
    )


def test_guarantees_beyond_the_capacity_are_scaled_down_together():
    guarantees = {"research": Guarantee(8, 0), "prod": Guarantee(8, 0)}
    assert entitlements(WEIGHTS, {"research": 8, "prod": 8}, 12, guarantees) == pytest.approx(
        {"research": 6.0, "prod": 6.0}
    )


def guaranteed(queue: list[Sample], tenant: str, nominal: int, limit: int | None) -> list[Sample]:
    return [
        replace(s, state=replace(s.state, nominal_gpus=nominal, borrowing_limit_gpus=limit))
        if s.state.tenant == tenant
        else s
        for s in queue
    ]


def test_with_a_nominal_quota_the_tenant_is_weighed_against_it_and_says_so():
    # research holds 4 and asks 12: short of its weighted 8.4, but its queue guarantees 4
    queue = samples(*[(4, 8, 8, 4)] * 10)
    assert tenant(assess([], queue), "research").disadvantaged

    result = assess([], guaranteed(queue, "research", 4, 0))

    research, prod = tenant(result, "research"), tenant(result, "prod")
    assert not research.disadvantaged
    assert (research.basis, research.entitled_gpus) == ("nominal_quota", 4.0)
    assert (research.nominal_gpus, research.borrowing_limit_gpus) == (4.0, 0.0)
    assert (prod.basis, prod.entitled_gpus, prod.nominal_gpus) == ("weighted_share", 8.0, None)


def stretch_night(day: int = 0) -> list[Sample]:
    """Five fair minutes, eleven in which prod's high-QOS jobs of bob hold 10 GPUs and
    research 2 of its entitled 8.4, then four fair minutes again; prod always asks for more."""
    shape = [(8, 4, 4, 2)] * 5 + [(2, 10, 10, 2)] * 11 + [(8, 4, 4, 2)] * 4
    queue = samples(*shape)
    taken = {MONDAY_NIGHT.start + timedelta(minutes=m) for m in range(5, 16)}
    return [
        replace(
            s,
            at=s.at + timedelta(days=day),
            state=replace(
                s.state,
                running_gpus_by_priority={"high": 10} if s.at in taken else {"normal": 4},
                running_gpus_by_user={"bob": 10} if s.at in taken else {"carol": 4},
            ),
        )
        if s.state.tenant == "prod"
        else replace(s, at=s.at + timedelta(days=day))
        for s in queue
    ]


def test_the_stretch_held_short_names_its_time_its_shortfall_and_who_held_the_gpus():
    research = tenant(assess([], stretch_night()), "research")

    assert research.disadvantaged
    stretch = research.stretch
    assert stretch is not None
    assert (stretch.start, stretch.end, stretch.samples) == (
        MONDAY_NIGHT.start + timedelta(minutes=5),
        MONDAY_NIGHT.start + timedelta(minutes=15),
        11,
    )
    assert (stretch.received_gpus, stretch.entitled_gpus) == pytest.approx((2.0, 8.4))
    assert stretch.short_gpus == pytest.approx(6.4)
    [holder] = stretch.holders
    assert holder.tenant == "prod" and holder.beyond_gpus == pytest.approx(6.4)
    assert (holder.by_priority, holder.by_user) == ({"high": 10.0}, {"bob": 10.0})
    assert (
        "6.4 GPUs short for 10 min (11 samples), while prod held 6.4 "
        "GPUs beyond its share (priority high 10.0; user bob 10.0)" in research.reason
    )


def favoured_prod_night(day: int) -> WindowAssessment:
    """A night of `stretch_night` in which prod's probes wait 1400-1500 s and research's
    10-20 s: prod waits longer, yet research is the one held short."""
    start = MONDAY_NIGHT.start + timedelta(days=day)
    occurrence = Occurrence("night", start, start + timedelta(hours=8))
    runs = [
        replace(
            r,
            submitted_at=r.submitted_at + timedelta(days=day),
            started_at=r.started_at + timedelta(days=day),
        )
        for r in batches({"research": [10, 20], "prod": [1500, 1400]})
        if r.submitted_at is not None and r.started_at is not None
    ]
    return assess_window(occurrence, runs, stretch_night(day), WEIGHTS, TWELVE_GPUS, RULES)


def test_a_tenant_that_waited_longer_but_received_more_than_its_share_is_said_not_to_be_the_one():
    history = [favoured_prod_night(d) for d in range(3)]
    assert all(tenant(a, "prod").longer_wait_batches == 2 for a in history)

    [symptom] = evaluate(history, RULES)

    assert symptom.subject == {"tenant": "research"}
    [favoured] = symptom.evidence["favoured_with_longer_waits"]
    assert favoured["tenant"] == "prod" and favoured["over_ask"] is True
    assert (favoured["median_wait_seconds"], favoured["others_median_wait_seconds"]) == (
        1450.0,
        15.0,
    )
    assert favoured["received_gpus"] > favoured["entitled_gpus"]
    worst = symptom.evidence["worst_stretch"]
    assert (worst["short_gpus"], worst["samples"], worst["holders"][0]["by_priority"]) == (
        6.4,
        11,
        {"high": 10.0},
    )
    assert symptom.evidence["occurrences"][0]["entitlement_basis"] == "weighted_share"
    assert (
        f"; prod waited longer but is not disadvantaged: it received "
        f"{favoured['received_gpus']:.1f} of its entitled {favoured['entitled_gpus']:.1f} GPUs, "
        "more than its share" in symptom.summary
    )
    assert "worst stretch: 6.4 GPUs short for" in symptom.summary
