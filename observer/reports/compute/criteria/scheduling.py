"""The scheduling criteria: every queue wait explained (queue_explainable), and no tenant
given less than its share window after window (no_persistent_unfairness), with what each
disadvantaged tenant received against its entitlement and who held the GPUs instead. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from observer.detectors import fairness, unexplained_wait
from observer.domain import (
    Comparison,
    Finding,
    JsonValue,
    ProbeRun,
    compare,
    compare_seconds,
    written,
)
from observer.probes.windows import occurrence_of
from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    Status,
    VerdictRules,
    found_by,
    result,
)
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.notes import Note


def _waited(run: ProbeRun) -> bool:
    return (run.queue_wait_seconds or 0.0) > 0 or sum(run.pending_reasons.values()) > 0


def queue_explainable(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    name = "queue_explainable"
    runs = list(soak.runs)
    waited = [r for r in runs if _waited(r)]
    if not waited:
        return result(name, Status.NOT_OBSERVED, [Note("ev.no_waits", {"runs": len(runs)})])
    unexplained = found_by(soak.findings, [unexplained_wait.UNEXPLAINED_WAIT])
    unexplained_runs = {f.subject.get("run_id") for f in unexplained}
    share = len(unexplained_runs) / len(waited)
    reasons: dict[str, float] = {}
    for run in waited:
        for reason, seconds in run.pending_reasons.items():
            reasons[reason] = reasons.get(reason, 0.0) + seconds
    evidence = [
        Note(
            "ev.waits",
            {
                "waited": len(waited),
                "runs": len(runs),
                "unexplained": len(unexplained_runs),
                "share": share,
                "limit_share": rules.unexplained_wait_max_share,
            },
        ),
        *(
            Note("ev.pending_reason", {"reason_words": reason, "total_seconds": seconds})
            for reason, seconds in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    ]
    failed = share > rules.unexplained_wait_max_share
    return result(
        name,
        Status.FAIL if failed else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        unexplained,
        soak.period,
        context.calendar,
    )


def no_persistent_unfairness(
    soak: PeriodData, context: ReportContext, rules: VerdictRules
) -> CriterionResult:
    name = "no_persistent_unfairness"
    calendar = context.calendar
    known = {w.name for w in calendar.windows}
    seen: dict[str, set[datetime]] = {}
    for run in soak.runs:
        if run.probe not in context.fairness_probes or run.submitted_at is None:
            continue
        if run.window not in known:
            continue
        occurrence = occurrence_of(calendar, run.window, run.submitted_at)
        if occurrence is not None:
            seen.setdefault(run.window, set()).add(occurrence.start)
    per_window = {w: len(s) for w, s in sorted(seen.items())}
    covered = Note(
        "ev.fairness", {"occurrences": per_window, "needed": rules.fairness_persistence_k}
    )
    unfair = found_by(soak.findings, [fairness.PERSISTENT_UNFAIRNESS])
    if not unfair and sum(len(s) for s in seen.values()) < rules.fairness_persistence_k:
        return result(name, Status.NOT_OBSERVED, [covered])
    evidence = []
    if unfair:
        # The tenants' shortfalls first: a failure's first evidence is its tier's item.
        ordered = sorted(unfair, key=lambda f: (str(f.subject.get("tenant")), f.opened_at))
        evidence += [note for f in ordered if (note := _shortfall(f)) is not None]
        tenants = sorted({str(f.subject.get("tenant")) for f in unfair})
        evidence.append(Note("ev.unfair", {"tenants": tenants}))
        for finding in ordered:
            evidence += _unfairness_explained(finding)
    evidence.append(covered)
    return result(
        name,
        Status.FAIL if unfair else Status.PASS,
        evidence,
        FailureClass.LIMITED_LAUNCH,
        unfair,
        soak.period,
        context.calendar,
    )


def _shortfall(finding: Finding) -> Note | None:
    """What the tenant received against its entitlement while its jobs were held, over the
    occurrences it was disadvantaged in (means weighted by their held samples), and how long
    those occurrences lasted; worded by how the two compare. None: a finding stored without
    its occurrences."""
    bad = [o for o in finding.evidence.get("occurrences") or [] if o.get("disadvantaged")]
    if not bad:
        return None
    params: dict[str, JsonValue] = {
        "tenant": finding.subject.get("tenant"),
        "disadvantaged": len(bad),
        "weighed": finding.evidence.get("occurrences_weighed"),
        "windows": sorted({str(o.get("window")) for o in bad}),
        "span_seconds": sum(
            (datetime.fromisoformat(o["end"]) - datetime.fromisoformat(o["start"])).total_seconds()
            for o in bad
        ),
    }
    held = [
        (float(o["received_gpus"]), float(o["entitled_gpus"]), int(o["pending_samples"]))
        for o in bad
        if o.get("received_gpus") is not None
        and o.get("entitled_gpus")
        and o.get("pending_samples")
    ]
    samples = sum(n for _, _, n in held)
    if not samples:
        # Disadvantaged with no GPUs weighed: by its probes' waits alone.
        return Note("ev.unfair_shortfall.unmeasured", params)
    received = sum(r * n for r, _, n in held) / samples
    entitled = sum(e * n for _, e, n in held) / samples
    return Note(
        f"ev.unfair_shortfall.{compare(received, entitled)}",
        {**params, "received_gpus": received, "entitled_gpus": entitled},
    )


def _stretch(tenant: str, worst: Mapping[str, Any]) -> Note:
    """The stretch the tenant got least in, worded by its GPUs against its entitlement as both
    are written; how many short is their written difference, so the three figures add up."""
    received, entitled = float(worst["received_gpus"]), float(worst["entitled_gpus"])
    params: dict[str, JsonValue] = {
        "tenant": tenant,
        "window": worst.get("window"),
        "start_at": worst.get("start"),
        "end_at": worst.get("end"),
        "received_gpus": received,
        "entitled_gpus": entitled,
        "basis": str(worst.get("entitlement_basis") or fairness.WEIGHTED_SHARE),
    }
    comparison = compare(received, entitled)
    if comparison is Comparison.LESS:
        params["short_gpus"] = float(written(entitled) - written(received))
    return Note(f"ev.unfair_stretch.{comparison}", params)


def _unfairness_explained(finding: Finding) -> list[Note]:
    """What a persistent_unfairness finding's evidence says of why: the stretch in which the
    tenant got least (when, how many GPUs short, against which entitlement), who held the GPUs
    then, and each tenant that waited longer yet was not held short."""
    tenant = str(finding.subject.get("tenant"))
    notes: list[Note] = []
    worst = finding.evidence.get("worst_stretch")
    if isinstance(worst, Mapping):
        notes.append(_stretch(tenant, worst))
        for holder in worst.get("holders") or []:
            name, beyond = holder.get("tenant"), holder.get("beyond_gpus")
            # A holder whose GPUs beyond its share are written 0.0 held none that shows.
            if compare(beyond or 0.0, 0.0) is not Comparison.MORE:
                continue
            notes.append(Note("ev.unfair_holder", {"holder": name, "beyond_gpus": beyond}))
            for kind in ("priority", "user"):
                if by := holder.get(f"by_{kind}"):
                    notes.append(Note(f"ev.unfair_holder_{kind}", {"holder": name, "names": by}))
    for other in finding.evidence.get("favoured_with_longer_waits") or []:
        received, entitled = other.get("received_gpus"), other.get("entitled_gpus")
        waits = other.get("median_wait_seconds"), other.get("others_median_wait_seconds")
        # "Waited longer" only where the two waits, as written, say so.
        if None in waits or compare_seconds(*waits) is not Comparison.MORE:
            continue
        notes.append(
            Note(
                f"ev.unfair_favoured.{compare(received, entitled)}",
                {
                    "tenant": other.get("tenant"),
                    "disadvantaged": tenant,
                    "window": other.get("window"),
                    "wait_seconds": other.get("median_wait_seconds"),
                    "others_wait_seconds": other.get("others_median_wait_seconds"),
                    "received_gpus": other.get("received_gpus"),
                    "entitled_gpus": other.get("entitled_gpus"),
                },
            )
        )
    return notes
