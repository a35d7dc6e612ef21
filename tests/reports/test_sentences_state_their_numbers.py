"""Every sentence that weighs a figure against another says what the numbers printed beside it
show. The table below names each comparative template of the catalogue, the real builder that
makes its Note from random figures, and what its words claim of the figures it prints (less
than, equal to, beyond, so many of so many). Each Note is written in English and in Chinese,
its figures are read back out of the text through the template itself, and the claims must
hold for the numbers as printed. A template of the catalogue that uses a comparative word
must be in the table, or among those that compare no printed figures, with why."""

from __future__ import annotations

import operator
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from decimal import Decimal
from functools import cache

import pytest
from babel.messages.pofile import read_po
from hypothesis import example, given
from hypothesis import strategies as st

from observer.detectors.fairness import PERSISTENT_UNFAIRNESS, WindowAssessment
from observer.detectors.fairness.assessment import TenantAssessment
from observer.detectors.fairness.evidence import describe
from observer.domain import (
    Comparison,
    Expectation,
    Finding,
    FindingKind,
    JsonValue,
    QueueState,
    SchedulerNode,
    Severity,
    compare,
    compare_seconds,
)
from observer.probes.windows import Occurrence
from observer.records import GpuUsageCounts, StoredQueueSample
from observer.reports.compute import findings as finding_words
from observer.reports.compute.criteria.monitoring import monitoring_lag_bound
from observer.reports.compute.criteria.release import quota_released
from observer.reports.compute.criteria.scheduling import no_persistent_unfairness
from observer.reports.compute.data import Allocation, PeriodData
from observer.reports.compute.gpu import GpuFigures, PoolUse, UtilizationStats
from observer.reports.compute.later import later_checks
from observer.reports.compute.notes import Note
from observer.reports.compute.usage import usage
from observer.reports.render.i18n import LANGUAGES, LOCALE_DIR, Language, Words
from observer.settings.detectors import FairnessSettings
from tests.reports.builders import DAY, DAY_START, RULES, TZ, context, finding, reclaim, run

NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
GPUS = st.floats(min_value=0.0, max_value=5000.0, allow_nan=False)
POSITIVE_GPUS = st.floats(min_value=0.01, max_value=5000.0, allow_nan=False)
# Durations around the bounds, where a figure written equal must not read "beyond".
SECONDS = st.one_of(
    st.floats(min_value=0.0, max_value=120.0),
    st.floats(min_value=0.0, max_value=4 * 86400.0),
    st.sampled_from([59.96, 60.0, 599.6, 600.0, 600.4, 3600.0, 3629.0, 3631.0, 86400.0]),
)
SHARES = st.floats(min_value=0.0, max_value=1.0)
ALLOCATED = st.just(0.0) | st.floats(min_value=1e-6, max_value=1.0)

# A duration's units as each language writes them.
_UNITS = {
    "en": {"d": 86400, "h": 3600, "min": 60, "s": 1},
    "zh-CN": {"天": 86400, "小时": 3600, "分钟": 60, "秒": 1},
}
_DURATION_PART = {
    "en": re.compile(r"([\d,]+(?:\.\d+)?) (d|h|min|s)"),
    "zh-CN": re.compile(r"([\d,]+(?:\.\d+)?)(天|小时|分钟|秒)"),
}


def read_figure(text: str, language: Language) -> Decimal:
    """A figure as the text writes it: a number, a percentage or a duration."""
    if re.fullmatch(NUMBER + "%", text):
        return Decimal(text[:-1].replace(",", "")) / 100
    if re.fullmatch(NUMBER, text):
        return Decimal(text.replace(",", ""))
    parts = _DURATION_PART[language].findall(text)
    assert parts, text
    return sum((Decimal(n.replace(",", "")) * _UNITS[language][u] for n, u in parts), Decimal(0))


@cache
def _templates(locale: str) -> dict[str, str]:
    with (LOCALE_DIR / locale / "LC_MESSAGES" / "observer.po").open("rb") as po:
        return {str(m.id): str(m.string) for m in read_po(po) if m.id}


TEMPLATES: dict[Language, dict[str, str]] = {"en": _templates("en"), "zh-CN": _templates("zh_CN")}


def _reader(template: str) -> re.Pattern[str]:
    """The template as a pattern that reads each placeholder's text back out of a sentence."""
    pattern, seen = "", set()
    for literal, field, _, _ in string.Formatter().parse(template):
        pattern += re.escape(literal)
        if field:
            pattern += f"(?P={field})" if field in seen else f"(?P<{field}>.+?)"
            seen.add(field)
    return re.compile(pattern, re.S)


def printed(note: Note, language: Language) -> dict[str, str]:
    """Each placeholder's text as the sentence in `language` writes it."""
    sentence = Words(language, TZ).note(note)
    found = _reader(TEMPLATES[language][note.key]).fullmatch(sentence)
    assert found is not None, (note.key, sentence)
    return found.groupdict()


# --- what a sentence's words claim of its figures -------------------------------------------

Claim = tuple[str, Callable[[Decimal, Decimal], bool], str | int]
LT, LE, EQ, GT = operator.lt, operator.le, operator.eq, operator.gt
AGAINST = {Comparison.LESS: LT, Comparison.EQUAL: EQ, Comparison.MORE: GT}


def against(left: str, right: str) -> dict[str, tuple[Claim, ...]]:
    """Keys suffixed by a comparison: each says `left` stands so against `right`."""
    return {c.value: ((left, AGAINST[c], right),) for c in Comparison}


@dataclass(frozen=True)
class Family:
    """Sentences one builder makes: `prefix` the keys it may say, `claims` what each key's
    words claim, `notes` the builder run on figures hypothesis draws."""

    prefix: str
    claims: Mapping[str, tuple[Claim, ...]]
    notes: Callable[[st.DataObject], list[Note]]


def _unfairness(evidence: dict[str, JsonValue]) -> Finding:
    return Finding(
        detector=PERSISTENT_UNFAIRNESS,
        kind=FindingKind.CONDITION,
        subject={"tenant": "research"},
        severity=Severity.WARNING,
        summary="persistent unfairness",
        opened_at=DAY_START,
        closed_at=None,
        evidence=evidence,
    )


def _unfair_notes(evidence: dict[str, JsonValue]) -> list[Note]:
    finding = _unfairness(evidence)
    return list(
        no_persistent_unfairness(PeriodData(DAY, findings=[finding]), context(), RULES).evidence
    )


OCCURRENCE = st.fixed_dictionaries(
    {
        "disadvantaged": st.booleans(),
        "received_gpus": st.none() | GPUS,
        "entitled_gpus": POSITIVE_GPUS,
        "pending_samples": st.integers(min_value=0, max_value=500),
    }
)


def _shortfall(data: st.DataObject) -> list[Note]:
    occurrences = data.draw(st.lists(OCCURRENCE, min_size=1, max_size=6))
    stored = [
        {
            **o,
            "window": "night",
            "start": (DAY_START + timedelta(days=i)).isoformat(),
            "end": (DAY_START + timedelta(days=i, hours=8)).isoformat(),
        }
        for i, o in enumerate(occurrences)
    ]
    return _unfair_notes({"occurrences": stored, "occurrences_weighed": len(stored)})


def _favoured(data: st.DataObject) -> list[Note]:
    favoured = {
        "tenant": "batch",
        "window": "night",
        "median_wait_seconds": data.draw(SECONDS),
        "others_median_wait_seconds": data.draw(SECONDS),
        "received_gpus": data.draw(GPUS),
        "entitled_gpus": data.draw(POSITIVE_GPUS),
    }
    return _unfair_notes({"favoured_with_longer_waits": [favoured]})


def _stretch(data: st.DataObject) -> list[Note]:
    worst = {
        "window": "night",
        "start": DAY_START.isoformat(),
        "end": (DAY_START + timedelta(hours=2)).isoformat(),
        "entitlement_basis": data.draw(st.sampled_from(["weighted_share", "nominal_quota"])),
        "received_gpus": data.draw(GPUS),
        "entitled_gpus": data.draw(GPUS),
        "short_gpus": data.draw(GPUS),
        "holders": [
            {"tenant": "batch", "beyond_gpus": data.draw(GPUS), "by_priority": {}, "by_user": {}}
        ],
    }
    return _unfair_notes({"worst_stretch": worst})


def _lag(data: st.DataObject) -> list[Note]:
    lasting = data.draw(st.lists(SECONDS, max_size=4))
    lags = [
        finding(
            "monitoring_lag",
            DAY_START + timedelta(hours=i),
            DAY_START + timedelta(hours=i, seconds=s),
            pipeline="prometheus",
            check="heartbeat",
        )
        for i, s in enumerate(lasting)
    ]
    rules = replace(RULES, monitoring_lag_max_seconds=data.draw(SECONDS))
    return list(monitoring_lag_bound(PeriodData(DAY, findings=lags), context(), rules).evidence)


def _stats(avg_percent: float) -> UtilizationStats:
    return UtilizationStats(1, avg_percent, None, None, None, ())


def _later(data: st.DataObject) -> list[Note]:
    pools = {
        "a100": PoolUse(1.0, data.draw(ALLOCATED), None, _stats(100 * data.draw(SHARES))),
        "h100": PoolUse(1.0, data.draw(ALLOCATED), None, _stats(100 * data.draw(SHARES))),
    }
    gpu = GpuFigures(True, None, pools, {}, {}, {}, None, {}, {}, {}, {}, {}, 0, 2, 2, 0)
    held = run(pending={"QOSGrpGRES": data.draw(SECONDS)})
    rules = replace(
        RULES,
        later_utilisation_share_of_allocated=data.draw(SHARES),
        later_quota_hold_seconds=data.draw(SECONDS),
    )
    soak = PeriodData(DAY, runs=[held])
    return [n for c in later_checks(gpu, soak, rules) for n in c.evidence]


def _not_reclaimed(data: st.DataObject) -> list[Note]:
    quota = run("quota", expectation=Expectation.BLOCKED)
    held = finding(
        "quota_not_reclaimed",
        DAY_START,
        None,
        severity=Severity.CRITICAL,
        evidence={
            "waited_seconds": data.draw(SECONDS),
            "reclaim_seconds": data.draw(SECONDS),
            "pending_reason": "QOSGrpGRES",
        },
        tenant="research",
        run_id="run-1",
    )
    soak = PeriodData(DAY, runs=[quota, reclaim(quota)], findings=[held])
    return list(quota_released(soak, context(), RULES).evidence)


def _store_space_low(data: st.DataObject) -> list[Note]:
    evidence: dict[str, JsonValue] = {
        "free_bytes": 2**34,
        "growth_bytes_per_day": 2**33,
        "fills_in_seconds": data.draw(SECONDS),
        "limit_seconds": data.draw(SECONDS),
    }
    sentence = finding_words.describe("store_space_low", {"store": "sqlite"}, evidence)
    assert sentence is not None
    return list(sentence)


def _capacity(data: st.DataObject) -> list[Note]:
    """The fleet's GPUs against every tenant's demand, one scheduler snapshot a minute."""
    gpus = data.draw(st.integers(min_value=0, max_value=64))
    demands = data.draw(st.lists(st.integers(min_value=0, max_value=96), min_size=1, max_size=12))
    samples = [
        StoredQueueSample(
            DAY_START + timedelta(minutes=i), QueueState("research", None, 1, demand, 0, 0, 0.0)
        )
        for i, demand in enumerate(demands)
    ]
    fleet = [SchedulerNode("n1", "pool-a", gpus, 0, "idle")]
    period = PeriodData(DAY, queue_samples=samples, nodes_at_start=fleet)
    note = usage(period, context()).capacity_note
    return [] if note is None else [note]


def _over_attributed(data: st.DataObject) -> list[Note]:
    """A pool's samples (each 300 s) against the GPU-hours the scheduler allocated in it."""
    samples = data.draw(st.integers(min_value=0, max_value=200))
    allocated = data.draw(st.floats(min_value=0.0, max_value=20.0)) * 3600
    period = PeriodData(
        DAY,
        nodes_at_start=[SchedulerNode("n1", "pool-a", 8, 0, "idle")],
        allocation=Allocation(allocated_gpu_seconds={"pool-a": allocated}),
        usage=GpuUsageCounts(usage=(("n1", "research", "training", samples, 0, 0),)),
    )
    return list(usage(period, context()).pool_notes)


RECEIVED_AGAINST_ENTITLED = against("received_gpus", "entitled_gpus")
SHORTFALL_COUNTS: tuple[Claim, ...] = (("disadvantaged", LE, "weighed"), ("disadvantaged", GT, 0))

FAMILIES = {
    "unfair_shortfall": Family(
        "ev.unfair_shortfall.",
        {
            **{
                f"ev.unfair_shortfall.{c}": claims + SHORTFALL_COUNTS
                for c, claims in RECEIVED_AGAINST_ENTITLED.items()
            },
            "ev.unfair_shortfall.unmeasured": SHORTFALL_COUNTS,
        },
        _shortfall,
    ),
    "unfair_favoured": Family(
        "ev.unfair_favoured.",
        {
            f"ev.unfair_favoured.{c}": (*claims, ("wait_seconds", GT, "others_wait_seconds"))
            for c, claims in RECEIVED_AGAINST_ENTITLED.items()
        },
        _favoured,
    ),
    "unfair_stretch": Family(
        "ev.unfair_",
        {
            "ev.unfair_stretch.less": (
                ("received_gpus", LT, "entitled_gpus"),
                ("short_gpus", GT, 0),
            ),
            "ev.unfair_stretch.equal": (("received_gpus", EQ, "entitled_gpus"),),
            "ev.unfair_stretch.more": (("received_gpus", GT, "entitled_gpus"),),
            "ev.unfair_holder": (("beyond_gpus", GT, 0),),
        },
        _stretch,
    ),
    "lag": Family(
        "ev.lag",
        {
            "ev.lag.none": (),
            "ev.lag.within": (("conditions", GT, 0), ("longest_seconds", LE, "limit_seconds")),
            "ev.lag.over": (
                ("over", GT, 0),
                ("over", LE, "conditions"),
                ("longest_seconds", GT, "limit_seconds"),
            ),
        },
        _lag,
    ),
    "later": Family(
        "ev.",
        {
            "ev.low_utilisation": (("used_share", LT, "limit_share"),),
            "ev.quota_hold": (("longest_seconds", GT, "limit_seconds"),),
        },
        _later,
    ),
    "quota_not_reclaimed": Family(
        "ev.quota_not_reclaimed",
        {
            f"ev.quota_not_reclaimed.{c}": claims
            for c, claims in against("waited_seconds", "limit_seconds").items()
        },
        _not_reclaimed,
    ),
    "store_space_low": Family(
        "finding.store_space_low",
        {
            f"finding.store_space_low.{c}": claims
            for c, claims in against("fills_in_seconds", "limit_seconds").items()
        },
        _store_space_low,
    ),
    "usage_over_attributed": Family(
        "usage.pool_over_attributed",
        {"usage.pool_over_attributed": (("attributed_hours", GT, "allocated_hours"),)},
        _over_attributed,
    ),
    "usage_capacity": Family(
        "usage.capacity",
        {
            "usage.capacity_exceeded": (
                ("over_seconds", GT, 0),
                ("over_seconds", LE, "observed_seconds"),
            ),
            "usage.capacity_within": (("peak", LE, "capacity"),),
        },
        _capacity,
    ),
}
TABLE = {key: family for family in FAMILIES.values() for key in family.claims}

# Templates with a comparative word that compare no figures they print, and why.
COUNTS = "integers are written exactly: the builder's exact comparison is the printed one"
REVERIFY = "a re-verification's pass rule, for a run not yet made"
DEADLINE = "its deadline against the run's record, which is not printed"
NOT_KNOWN = "'more than {limit_share}' defines not known; no share is printed against it"
COMPARES_NO_PRINTED_FIGURES = {
    "ev.failures": "'another way than expected' compares outcomes, not figures",
    "ev.fairness": "how many occurrences the rule needs; the criterion's status says if met",
    "ev.owner_state_not_known": NOT_KNOWN,
    "note.owner_state_not_known": NOT_KNOWN,
    "ev.quota": "'over-quota' names the probe",
    "ev.quota_release": COUNTS,
    "ev.quota_not_reclaimed.unmeasured": "no figures: a finding stored without its wait or bound",
    "ev.unfair_shortfall.unmeasured": "no GPUs weighed: the counts are in the table as unmeasured",
    "finding.log_loss.missing.more": "'{more} more ranges' counts what the list leaves out",
    "finding.memory_without_process": "the baseline is not printed, only the excess over it",
    "finding.probe_unreleased": "'no longer' states a job's end, no figure",
    "finding.vanished_process": "'no longer exists' states a process's end, no figure",
    "finding.quota_not_reclaimed": "'over-quota' names the task; its wait has no bound printed",
    "lead.soak": "'over the soak' is the period",
    "names.more": "'+{more}' counts what the list leaves out",
    "note.all_jobs_incomplete": "says the counts are lower bounds; no figure compared",
    "note.health_throttled": "'within the day' is the period counted",
    "note.incidents": "the grouping rule's own 10 minutes, no figure of the day",
    "note.partial": "'up to {at}' is the period",
    "note.provisional": "'up to {at}' is the period",
    "note.scheduler_gaps": "defines blind time by its bound; no gap printed",
    "reverify.gpu_health": REVERIFY,
    "reverify.monitoring_lag_bound": REVERIFY,
    "reverify.queue_explainable": REVERIFY,
    "reverify.quota_released": REVERIFY,
    "reverify.rerun": REVERIFY,
    "scope.not_together": COUNTS,
    "scope.partly_exercised": COUNTS,
    "scope.rule": "the decision rule, with its limits; no figure of the soak",
    "why.passed_after_requeue": "'more' is not a comparison here: the attempts are counted",
    "why.timed_out_pending": DEADLINE,
    "why.timed_out_running": DEADLINE,
    "why.timed_out_silent": DEADLINE,
}

COMPARATIVE = {
    "en": re.compile(
        r"\b(more|less|fewer|rising|falling|above|below|within|over|beyond|exceed\w*|than|"
        r"short|higher|lower|longer|shorter|sooner|later|least|most)\b",
        re.I,
    ),
    "zh-CN": re.compile(
        "多于|少于|高于|低于|超过|超出|上升|下降|以内|之内|不足|缺少|早于|晚于|最多|最少|更久|更长"
    ),
}


def assert_claims_hold(note: Note, claims: tuple[Claim, ...]) -> None:
    for language in LANGUAGES:
        texts = printed(note, language)
        for left, holds, right in claims:
            mine = read_figure(texts[left], language)
            theirs = right if isinstance(right, int) else read_figure(texts[right], language)
            assert holds(mine, Decimal(theirs)), (note.key, language, texts)


@pytest.mark.parametrize("name", FAMILIES)
@given(data=st.data())
def test_each_comparative_sentence_claims_what_its_printed_figures_show(
    name: str, data: st.DataObject
) -> None:
    family = FAMILIES[name]
    for note in family.notes(data):
        if not note.key.startswith(family.prefix) or note.key in COMPARES_NO_PRINTED_FIGURES:
            continue
        assert note.key in family.claims, f"{note.key}: a sentence the table does not name"
        assert_claims_hold(note, family.claims[note.key])


def test_every_comparative_template_of_the_catalogue_is_in_the_table() -> None:
    comparative = {
        key
        for language in LANGUAGES
        for key, template in TEMPLATES[language].items()
        if "{" in template and COMPARATIVE[language].search(template)
    }
    assert comparative - TABLE.keys() - COMPARES_NO_PRINTED_FIGURES.keys() == set()
    assert (TABLE.keys() | COMPARES_NO_PRINTED_FIGURES.keys()) <= TEMPLATES["en"].keys()


@pytest.mark.parametrize(
    ("received", "entitled"),
    [
        (7.2, 8.0),  # issue 31: "batch received 7.2 of its 8.0, more than its share"
        (7.96, 8.0),  # written 8.0 of 8.0: its share, not less
        (0.35, 0.3),  # written 0.4 (Babel), where round() gives 0.3
    ],
)
def test_a_tenant_that_waited_longer_is_said_to_receive_what_its_numbers_show(
    received: float, entitled: float
) -> None:
    favoured = {
        "tenant": "batch",
        "window": "night",
        "median_wait_seconds": 1450.0,
        "others_median_wait_seconds": 15.0,
        "received_gpus": received,
        "entitled_gpus": entitled,
    }
    notes = _unfair_notes({"favoured_with_longer_waits": [favoured]})
    [note] = [n for n in notes if n.key.startswith("ev.unfair_favoured.")]
    assert note.key == f"ev.unfair_favoured.{compare(received, entitled)}"
    assert_claims_hold(note, TABLE[note.key].claims[note.key])


def test_a_lag_written_equal_to_its_bound_is_within_it() -> None:
    # 10 min 0.4 s is written "10 min", the bound 600 s too: not beyond it.
    assert compare_seconds(600.4, 600.0) is Comparison.EQUAL
    lag = finding("monitoring_lag", DAY_START, DAY_START + timedelta(seconds=600.4))
    [note] = monitoring_lag_bound(PeriodData(DAY, findings=[lag]), context(), RULES).evidence
    assert note.key == "ev.lag.within"


def _favoured_night(received: float, entitled: float) -> WindowAssessment:
    """A night research was held short in, while batch, whose probes waited longer, received
    `received` of its `entitled` GPUs."""

    def assessed(tenant: str, disadvantaged: bool, waits: tuple[float, float], gpus: float):
        return TenantAssessment(
            tenant=tenant,
            weight=0.5,
            probes=2,
            unstarted_probes=0,
            median_wait_seconds=waits[0],
            mean_wait_seconds=waits[0],
            others_median_wait_seconds=waits[1],
            batches=2,
            longer_wait_batches=2 if not disadvantaged else 0,
            pending_samples=10,
            demand_gpus=2 * gpus,
            received_gpus=gpus,
            entitled_gpus=entitled,
            over_ask=not disadvantaged,
            disadvantaged=disadvantaged,
            reason="",
        )

    start = DAY_START.replace(hour=22)
    return WindowAssessment(
        Occurrence("night", start, start + timedelta(hours=8)),
        (
            assessed("batch", False, (1450.0, 15.0), received),
            assessed("research", True, (15.0, 1450.0), 0.0),
        ),
        batches=2,
        contention_samples=10,
        fairness_index=None,
    )


def _relation(value: Decimal, reference: Decimal) -> Comparison:
    if value < reference:
        return Comparison.LESS
    return Comparison.MORE if value > reference else Comparison.EQUAL


@given(entitled=POSITIVE_GPUS, ratio=st.floats(min_value=0.9, max_value=3.0))
@example(entitled=8.0, ratio=0.9)  # 7.2 of 8.0: within the default 10 % tolerance
def test_the_symptoms_summary_says_what_the_tenant_that_waited_longer_received(
    entitled: float, ratio: float
) -> None:
    rules = FairnessSettings()
    received = entitled * ratio
    night = _favoured_night(received, entitled)
    summary, _ = describe("research", [night], [night], rules)
    [(value, reference, stated)] = re.findall(
        rf"it received {NUMBER} of its entitled {NUMBER} GPUs, (less than|its share|more than)",
        summary,
    )
    claims = {"less than": Comparison.LESS, "its share": Comparison.EQUAL}
    number = lambda text: Decimal(text.replace(",", ""))  # noqa: E731
    assert claims.get(stated, Comparison.MORE) is _relation(number(value), number(reference))


@given(value=GPUS, reference=GPUS)
def test_a_comparison_agrees_with_the_numbers_as_written(value: float, reference: float) -> None:
    for language in LANGUAGES:
        words = Words(language, TZ)
        written = (
            read_figure(words.decimal(value), language),
            read_figure(words.decimal(reference), language),
        )
        assert compare(value, reference) is _relation(*written)


@given(value=SECONDS, reference=SECONDS)
def test_durations_compare_as_they_are_written(value: float, reference: float) -> None:
    for language in LANGUAGES:
        words = Words(language, TZ)
        written = (
            read_figure(words.duration(value), language),
            read_figure(words.duration(reference), language),
        )
        assert compare_seconds(value, reference) is _relation(*written)
