"""The service criteria: the GPUs fit to serve, and the platform's reaction when one was not
(gpu_health); the inference service, when one ran, answering (inference_available). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from observer.detectors import gpu_in_service, inference
from observer.detectors.gpu_health import CLOCK_SLOWDOWN
from observer.records import PhaseKind
from observer.reports.compute import health
from observer.reports.compute.criteria.result import (
    CriterionResult,
    FailureClass,
    Status,
    found_by,
    result,
)
from observer.reports.compute.data import PeriodData, ReportContext
from observer.reports.compute.inference import WHOLE_DAY, inference_figures
from observer.reports.compute.notes import Note

# The agents' GPU conditions short of a fatal fault (health.is_fatal) or throttling.
GPU_ERRORS = frozenset(health.CONDITIONS) - gpu_in_service.FATAL_CONDITIONS - {CLOCK_SLOWDOWN}


# Fatal faults minutes apart on a node are often one failure its findings do not tie to one
# GPU (two GPUs of one board): a node's fatal faults recur when they lie further apart than this.
RECURS_AFTER = timedelta(hours=1)


def gpu_health(soak: PeriodData, context: ReportContext) -> CriterionResult:
    """The GPUs' and nodes' health as the agents saw it, and the platform's reaction: a node
    kept in service after a fatal fault, or fatal faults recurring on a node, must be fixed;
    any fatal fault or GPU error limits the launch (its nodes named); throttling alone is a
    later optimisation. Without GPU samples it was not observed. Faults are counted as
    incidents, one per root cause (health.incidents): Xid 79, the GPU it leaves lost and the
    node kept in service on it are one fatal fault."""
    name = "gpu_health"
    in_service = found_by(soak.findings, [gpu_in_service.UNHEALTHY_GPU_IN_SERVICE])
    fatal = [f for f in soak.findings if health.is_fatal(f)]
    errors = found_by(soak.findings, GPU_ERRORS)
    throttled = found_by(soak.findings, [CLOCK_SLOWDOWN])
    judged = health.incidents([*fatal, *errors, *throttled, *in_service])
    fatal_incidents = [i for i in judged if i.fatal]
    error_incidents = [
        i for i in judged if not i.fatal and any(s.detector in GPU_ERRORS for s in i.symptoms)
    ]
    counted = [
        i
        for i in judged
        if i.fatal or any(s.detector in GPU_ERRORS | {CLOCK_SLOWDOWN} for s in i.symptoms)
    ]
    affected = sorted({f.subject.get("node", "") for f in fatal + errors + in_service + throttled})
    evidence = [
        Note(
            "ev.gpu_health",
            {
                "incidents": len(counted),
                "symptoms": sum(len(i.symptoms) for i in counted),
                "fatal": len(fatal_incidents),
                "errors": len(error_incidents),
                "throttled": len(throttled),
                "in_service": len({f.subject.get("node", "") for f in in_service}),
                "nodes": affected,
            },
        )
    ]
    shown = in_service + fatal + errors
    if in_service or _recurring(fatal_incidents):
        return result(
            name, Status.FAIL, evidence, FailureClass.MUST_FIX, shown, soak.period, context.calendar
        )
    if fatal or errors:
        return result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.LIMITED_LAUNCH,
            shown,
            soak.period,
            context.calendar,
        )
    if throttled:
        return result(
            name,
            Status.FAIL,
            evidence,
            FailureClass.LATER_OPTIMISATION,
            throttled,
            soak.period,
            context.calendar,
        )
    if not soak.gpu.nodes:
        return result(name, Status.NOT_OBSERVED, [*evidence, Note("ev.no_gpu_samples")])
    return result(name, Status.PASS, evidence)


def _recurring(fatal: Iterable[health.GpuIncident]) -> bool:
    times: dict[str, list[datetime]] = {}
    for incident in fatal:
        times.setdefault(incident.node, []).append(incident.opened_at)
    return any(max(at) - min(at) > RECURS_AFTER for at in times.values())


def inference_available(soak: PeriodData, context: ReportContext) -> CriterionResult:
    """The inference service, when one ran (it is opt-in: none ran is not observed, and the
    scope says online inference was not shown). Unavailable, or never answering, limits the
    launch: online inference waits, batch work may go. A scale-out that stalled while the
    service still answered (else it was unavailable too) is a later optimisation: it serves
    at the replicas it started with; what it lacked is headroom, which reserved capacity
    gives until the platform places scale-outs in time."""
    name = "inference_available"
    unavailable = found_by(soak.findings, [inference.UNAVAILABLE])
    stalled = found_by(soak.findings, [inference.SCALE_OUT_STALLED])
    figures = inference_figures(soak.inference_samples, soak.inference_phases, context.calendar)
    if figures is None and not unavailable and not stalled:
        return result(name, Status.NOT_OBSERVED, [Note("ev.no_inference")])
    whole = next((w for w in figures.windows if w.window == WHOLE_DAY), None) if figures else None
    services = list(figures.services) if figures else []
    evidence = [
        Note(
            "ev.inference",
            {
                "services": services,
                "looks": whole.looks,
                "availability_share": whole.availability,
                "requests": whole.requests,
                "errors": whole.errors,
                "p95_ms": whole.p95_ms,
                "p99_ms": whole.p99_ms,
            },
        )
        if whole is not None and whole.p95_ms is not None
        else Note(
            "ev.inference_unanswered",
            {"services": services, "looks": whole.looks if whole else 0},
        ),
        *(
            Note(
                "ev.inference_scale_out",
                {
                    "replicas_from": p.phase.replicas_from,
                    "replicas_to": p.phase.replicas_to,
                    "ready_seconds": p.ready_seconds,
                    "pending_seconds": p.phase.pending_seconds,
                },
            )
            for p in (figures.phases if figures else ())
            if p.kind is PhaseKind.SCALE_OUT
        ),
    ]
    where = (soak.period, context.calendar)
    if unavailable or (whole is not None and whole.available == 0):
        failed = FailureClass.LIMITED_LAUNCH
        return result(name, Status.FAIL, evidence, failed, unavailable + stalled, *where)
    if stalled:
        failed = FailureClass.LATER_OPTIMISATION
        return result(name, Status.FAIL, evidence, failed, stalled, *where)
    return result(name, Status.PASS if whole else Status.NOT_OBSERVED, evidence)
