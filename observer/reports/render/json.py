"""Reports as JSON. Keys are English and stable whatever the language: the headline keys
(tasks_total, tasks_failed, all_jobs_total, all_jobs_failed (null: not observed),
all_jobs_complete, queue_wait_seconds_avg (the probes'), tenant_jobs_wait_seconds_avg (the
tenants' own jobs'), gpu_utilization_avg (percent), gpu_sm_active_avg (percent, GPM's SM
activity; null where no GPU reported it, never 0), owner_state_nodes and owner_state_known_nodes
(null: no node sampled), alerts_total, manual_interventions_total, incidents_opened,
findings...) at the top, the report's dataclass field names below them (the verdict's `tiers` by
failure class, each item with its line of text; its `scoring`, layer (must, key, experience) ->
passed / failed / not_observed, each a list of criteria; `score_layers`, criterion -> layer, and
each criterion's `layer`; its `launch_scope`: `tenants` and `pools` where a launch may begin,
`text` its sentence, and `widen`, one item per tenant or pool left out, `{"tenant"|"pool": name,
"criteria": [...], "reverify": [note...]}`); `wait_reasons` and `probe_wait_reasons` (tenant ->
the scheduler's reason -> hours pending: the tenants' own jobs' added up over the jobs, the
probes'); in `gpu`, each pool's `sm_active` beside its `utilization`, `sm_overall`,
`sm_by_window`, `sm_by_tenant`, `sm_by_task` (and each tenant's `sm_active` in `tenants`) and
`gpm_not_supported_nodes` with their `gpm_not_supported_samples` (GPUs without GPM, whose SM
activity is not known); who used what, in the daily summary and the verdict (`gpu_hours`:
rows of tenant, pool, task_type, allocated, busy, idle, cost, in GPU-hours and the currency of
`gpu_hours_currency`; `gpu_hours_pools`, `gpu_memory`, `gpu_hours_by_user`, `capacity`:
render/usage.py); the daily summary's `expected_wait` (`platform_estimate`: whether the
platform gave any waiting job that started an expected start; `rows`: per `tenant`, `gpus` and
`source` ("platform" or "observer"), the `jobs` started, `error_p50_seconds` and
`error_p90_seconds` (start minus expected start, late positive; null: no estimate) and
`without_estimate_share`); the daily summary's `task_records`, one per run (`user`, `queue`,
`main_wait_reason` among them; what it had and met while it lived: `quota` (`source` queue |
configured, `gpus` each value seen, `borrowing_limit_gpus`), `gpu_samples`,
`gpu_utilization_avg`, `gpu_utilization_max` (percent), `gpu_memory_peak_bytes`, `gpu_errors`
(`count`, `worst`, `xid`, `fatal`), `alerts` (names); null where not known or not observed),
last.
Every instant is in the platform's timezone, ISO 8601 with its offset: the report's own and
those detectors keep in their evidence, in UTC, as text (`plain`, which the pages' evidence and
`observer findings` and `runs` print through too). Nothing depends on when a report is
rendered."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import date, datetime, tzinfo
from enum import Enum
from typing import Any
from zoneinfo import ZoneInfo

from observer.reports.compute.criteria.result import CriterionResult
from observer.reports.compute.daily import DailyReport
from observer.reports.compute.figures import PeriodFigures
from observer.reports.compute.notes import Note
from observer.reports.compute.tasks import TaskRecord
from observer.reports.compute.verdict import TierItem, Verdict
from observer.reports.render.headline import daily_title, verdict_title
from observer.reports.render.i18n import Language, Words
from observer.reports.render.usage import usage_json

SCHEMA_VERSION = 1


def headline(f: PeriodFigures) -> dict[str, Any]:
    """The stable top-level figures of a period."""
    util, sm = f.gpu.overall, f.gpu.sm_overall
    return {
        "tasks_total": f.tasks.total,
        "tasks_failed": f.tasks.failed,
        "tasks_cancelled": f.tasks.cancelled,
        "tasks_cancelled_by_observer": f.tasks.cancelled_by_observer,
        "tasks_unfinished": f.tasks.unfinished,
        "all_jobs_total": f.all_jobs.total if f.all_jobs else None,
        "all_jobs_failed": f.all_jobs.failed if f.all_jobs else None,
        "all_jobs_complete": f.all_jobs.complete if f.all_jobs else None,
        "queue_wait_seconds_avg": _num(f.queue.overall.avg_seconds),
        "queue_wait_seconds_p50": _num(f.queue.overall.p50_seconds),
        "queue_wait_seconds_p95": _num(f.queue.overall.p95_seconds),
        "tenant_jobs_wait_seconds_avg": _num(f.queue.tenant_jobs.avg_seconds),
        "gpu_utilization_avg": _num(util.avg_percent if util else None),
        "gpu_utilization_p50": _num(util.p50_percent if util else None),
        "gpu_utilization_p95": _num(util.p95_percent if util else None),
        "gpu_sm_active_avg": _num(sm.avg_percent if sm else None),
        "gpu_sm_active_p50": _num(sm.p50_percent if sm else None),
        "gpu_sm_active_p95": _num(sm.p95_percent if sm else None),
        "gpu_allocated_share": _num(f.gpu.allocated_share),
        "owner_state_nodes": f.owners.nodes,
        "owner_state_known_nodes": f.owners.known,
        "alerts_total": f.alerts.total,
        "manual_interventions_total": f.interventions.total,
        "incidents_opened": f.findings.incidents_opened,
        "findings_opened": f.findings.opened,
        "findings_closed": f.findings.closed,
        "findings_still_open": f.findings.still_open,
        "findings_events": f.findings.events,
        "blind_seconds": _num(f.blind.total_seconds),
        "report_deliveries_failed": f.deliveries.failed,
    }


def _period_json(f: PeriodFigures, zone: tzinfo) -> dict[str, Any]:
    return {
        "period": {"start": iso(f.start, zone), "end": iso(f.end, zone)},
        **headline(f),
        "tasks": plain(f.tasks, zone),
        "probe_coverage": plain(f.coverage, zone),
        "all_jobs": plain(f.all_jobs, zone),
        "queue_wait": plain(f.queue, zone),
        "wait_reasons": _hours(f.queue.wait_reason_seconds),
        "probe_wait_reasons": _hours(f.queue.probe_wait_reason_seconds),
        "gpu": plain(f.gpu, zone),
        "gpu_health": plain(f.health, zone),
        "owner_state": plain(f.owners, zone),
        "alerts": plain(f.alerts, zone),
        "manual_interventions": plain(f.interventions, zone),
        "findings": plain(f.findings, zone),
        "blind_time": plain(f.blind, zone),
        "report_deliveries": plain(f.deliveries, zone),
    }


def daily_json(report: DailyReport, language: Language) -> dict[str, Any]:
    zone = ZoneInfo(report.timezone)
    words = Words(language, zone)
    day = _period_json(report.figures, zone)

    def beside(f: PeriodFigures) -> dict[str, Any]:
        # Beside the day: its figures without the item lists (in the day's own report).
        data = _period_json(f, zone)
        data["findings"] = {k: v for k, v in data["findings"].items() if k != "items"}
        data["manual_interventions"] = {
            k: v for k, v in data["manual_interventions"].items() if k != "items"
        }
        data["blind_time"] = {k: v for k, v in data["blind_time"].items() if k != "periods"}
        data["report_deliveries"] = {
            k: v for k, v in data["report_deliveries"].items() if k != "failures"
        }
        return data

    return {
        "report": "daily",
        "schema_version": SCHEMA_VERSION,
        "language": language,
        "title": daily_title(report, words),
        "date": report.day.isoformat(),
        "partial": report.partial,
        "timezone": report.timezone,
        "soak_started_at": iso(report.soak_started_at, zone),
        **day,
        "previous_day": None if report.previous_day is None else beside(report.previous_day),
        "soak_to_date": beside(report.soak_to_date),
        "tenants": plain(report.tenants, zone),
        "task_records": [task_record_json(r, words) for r in report.tasks],
        "inference_service": None if report.inference is None else inference_json(report, zone),
        "expected_wait": {
            "platform_estimate": report.expected_wait.platform_estimate,
            "rows": [plain(row, zone) for row in report.expected_wait.rows],
        },
        **usage_json(report.usage),
    }


def inference_json(report: DailyReport, zone: tzinfo) -> dict[str, Any]:
    """Per window (the whole day's key is "", outside every window "-") and per change."""
    assert report.inference is not None
    figures = report.inference
    return {
        "services": list(figures.services),
        "windows": [
            {**plain(row, zone), "availability": _num(row.availability)} for row in figures.windows
        ],
        "phases": [
            {
                **plain(row.phase, zone),
                "windows": list(row.windows),
                "ready_seconds": _num(row.ready_seconds),
            }
            for row in figures.phases
        ],
    }


def task_record_json(record: TaskRecord, words: Words) -> dict[str, Any]:
    """One run of the per-task record: its stored fields, its waits, its explanation."""
    run = record.run
    return {
        **plain(run, words.timezone),
        "queue_wait_seconds": _num(run.queue_wait_seconds),
        "main_wait_reason": run.main_wait_reason,
        "run_seconds": _num(run.run_seconds),
        "explanation": None if record.explanation is None else words.note(record.explanation),
        "cause": None if record.cause is None else record.cause.cause.value,
        "cause_evidence": []
        if record.cause is None
        else [words.note(n) for n in record.cause.evidence],
        **_around_json(record),
    }


def _around_json(record: TaskRecord) -> dict[str, Any]:
    """What a run had and met while it lived (compute.run_surroundings); null: not known
    (no quota known, never started, no node agent or no Alertmanager read)."""
    around, gpu, quota, errors = (
        record.around,
        record.around.gpu,
        record.around.quota,
        record.around.gpu_errors,
    )
    return {
        "quota": None
        if quota is None
        else {
            "source": quota.source.value,
            "gpus": list(quota.gpus),
            "borrowing_limit_gpus": quota.borrowing_limit_gpus,
        },
        "gpu_samples": (0 if gpu is None else gpu.samples) if around.gpus_watched else None,
        "gpu_utilization_avg": _num(gpu.utilization_avg_percent if gpu else None),
        "gpu_utilization_max": gpu.utilization_max_percent if gpu else None,
        "gpu_memory_peak_bytes": gpu.memory_peak_bytes if gpu else None,
        "gpu_errors": None if errors is None else dataclasses.asdict(errors),
        "alerts": None if around.alerts is None else list(around.alerts),
    }


def tier_text(item: TierItem, w: Words) -> str:
    """A tier's item as one line: the criterion, its first evidence, whom and where."""
    return w(
        "tier.item",
        criterion=item.criterion,
        evidence=w.note(item.evidence),
        subject=item.subjects.params(),
    )


def verdict_json(verdict: Verdict, language: Language) -> dict[str, Any]:
    zone = ZoneInfo(verdict.timezone)
    words = Words(language, zone)

    def note(n: Note) -> dict[str, Any]:
        return {"key": n.key, "params": plain(n.params, zone), "text": words.note(n)}

    def criterion(c: CriterionResult) -> dict[str, Any]:
        return {
            "criterion": c.criterion,
            "title": words(f"crit.{c.criterion}"),
            # None: one of the data's later optimisations, scored in no layer
            "layer": layer.value if (layer := verdict.score_layers.get(c.criterion)) else None,
            "status": c.status.value,
            "failure_class": c.failure_class.value if c.failure_class else None,
            "class_reason": note(c.class_reason) if c.class_reason else None,
            "evidence": [note(n) for n in c.evidence],
            "findings": plain(c.findings, zone),
            "subjects": c.subjects.params(),
            "not_observed": c.not_observed.params(),  # a pass holds everywhere else
        }

    return {
        "report": "verdict",
        "schema_version": SCHEMA_VERSION,
        "language": language,
        "title": verdict_title(verdict, words),
        "provisional": verdict.provisional,
        "timezone": verdict.timezone,
        "soak_started_at": iso(verdict.soak_started_at, zone),
        "soak_ended_at": iso(verdict.soak_ended_at, zone),
        "recommendation": verdict.recommendation.value,
        "recommendation_text": words.note(verdict.because),
        "recommendation_because": note(verdict.because),
        "tiers": {
            tier.value: [
                {
                    "criterion": i.criterion,
                    "evidence": note(i.evidence),
                    "subjects": i.subjects.params(),
                    "text": tier_text(i, words),
                }
                for i in items
            ]
            for tier, items in verdict.tiers.items()
        },
        "scoring": {
            layer.value: {
                "passed": list(score.passed),
                "failed": list(score.failed),
                "not_observed": list(score.not_observed),
            }
            for layer, score in verdict.scoring.items()
        },
        "score_layers": {c: layer.value for c, layer in verdict.score_layers.items()},
        "launch_scope": {
            "tenants": list(verdict.launch_scope.tenants),
            "pools": list(verdict.launch_scope.pools),
            "text": words.note(verdict.launch),
            "widen": [
                {
                    item.part: item.name,
                    "criteria": list(item.criteria),
                    "reverify": [note(n) for n in item.reverify],
                }
                for item in verdict.launch_scope.widen
            ],
        },
        "scope": [note(n) for n in verdict.scope],
        "observation_rule": note(verdict.observation_rule),
        "layers": plain(verdict.layers, zone),
        "criteria": [criterion(c) for c in verdict.criteria],
        "later_optimisations": [criterion(c) for c in verdict.later],
        "reverification": [note(n) for n in verdict.reverification],
        "days": plain(verdict.days, zone),
        **_period_json(verdict.figures, zone),
        **usage_json(verdict.usage),
    }


def iso(at: datetime | None, zone: tzinfo) -> str | None:
    """An instant as machines read it: ISO 8601 in the platform's timezone, with its offset."""
    return None if at is None else at.astimezone(zone).isoformat()


def _hours(by_tenant: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Seconds per tenant and reason as hours (tenant -> reason -> hours)."""
    return {
        tenant: {reason: round(seconds / 3600, 3) for reason, seconds in reasons.items()}
        for tenant, reasons in by_tenant.items()
    }


def _num(value: float | None) -> float | None:
    # Rounded so that sums taken in another order (another database) print the same.
    return None if value is None else round(value, 3)


def plain(value: Any, zone: tzinfo) -> Any:
    """`value` as JSON, its instants in `zone` (the platform's): datetimes, and the ISO 8601
    texts with an offset that evidence holds."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), zone) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return iso(value, zone)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Mapping):
        # Sorted: PostgreSQL's JSONB gives evidence back in its own key order.
        return {str(k): plain(value[k], zone) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple | frozenset | set):
        items = [plain(v, zone) for v in value]
        return sorted(items) if isinstance(value, frozenset | set) else items
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, str):
        return _instant_text(value, zone)
    return value


def _instant_text(text: str, zone: tzinfo) -> str:
    """An instant a detector wrote into its evidence (`isoformat()`, in UTC), in `zone`; any
    other text, a time without an offset included (its zone is not known), as it is."""
    if len(text) < 19 or text[10] != "T":
        return text
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return text
    return text if at.tzinfo is None else at.astimezone(zone).isoformat()


def json_text(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2)
