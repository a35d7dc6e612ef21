"""The per-task record: every probe run with its tenant, user and queue, what it asked, what
it expected, when it was submitted, started and ended (local time), how long it waited and
for what most (the scheduler's reason), how long it ran, what it had and met while it lived
(the quota in force, its own GPUs' utilisation and memory, their errors, the alerts: one
compact cell on the page, columns of their own in the CSV), how it ended and why.
The daily summary's appendix (HTML with a filter box, Markdown), its CSV beside the JSON, and
`observer runs` print the same rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from observer.reports.compute.run_surroundings import GpuErrors, Quota, QuotaSource
from observer.reports.compute.tasks import TaskRecord
from observer.reports.render.blocks import Block, Cell, Heading, Table, Text
from observer.reports.render.i18n import Words
from observer.reports.render.json import iso

# Enough of a run id to tell a day's runs apart on a page; the CSV, JSON and `observer runs
# --json` carry it whole.
SHORT_RUN_ID = 8
CSV_COLUMNS = (
    "run_id",
    "probe",
    "tenant",
    "user",
    "queue",
    "window",
    "expectation",
    "gpus",
    "nodes",
    "submitted_at",
    "started_at",
    "finished_at",
    "queue_wait_seconds",
    "main_wait_reason",
    "run_seconds",
    "outcome",
    "reason",
    "message",
    "exit_code",
    "explanation",
    "cause",
    "cause_evidence",
    "node_names",
    "quota_gpus",  # each value in force while it lived, in order, space-separated
    "quota_source",
    "gpu_samples",
    "gpu_utilization_avg",
    "gpu_utilization_max",
    "gpu_memory_peak_bytes",
    "gpu_errors",
    "gpu_errors_worst",
    "gpu_errors_xid",
    "alerts",
)


def short_run_id(run_id: str) -> str:
    return run_id[:SHORT_RUN_ID]


def run_anchor(run_id: str) -> str:
    return f"run-{run_id}"


def task_headers(w: Words) -> list[str]:
    return [
        w("col.run"),
        w("col.probe"),
        w("col.tenant"),
        w("col.user"),
        w("col.queue"),
        w("col.asked"),
        w("col.expected"),
        w("col.submitted"),
        w("col.started"),
        w("col.ended"),
        w("col.queue_wait"),
        w("col.main_wait_reason"),
        w("col.run_time"),
        w("col.while_it_ran"),
        w("col.outcome"),
        w("col.failure_cause"),
        w("col.explanation"),
        w("col.nodes"),
    ]


def task_row(record: TaskRecord, w: Words, run_id: str) -> list[Cell]:
    run = record.run
    if run.started_at is not None:
        waited = w.duration(run.queue_wait_seconds)
    elif run.submitted_at is not None and run.finished_at is not None:
        # Never started: its wait so far, a lower bound (censored), said as such.
        seconds = (run.finished_at - run.submitted_at).total_seconds()
        waited = w("cell.waited_never_started", waited_seconds=seconds)
    else:
        waited = "—"
    return [
        run_id,
        run.probe,
        run.tenant,
        run.user or "—",
        run.queue or "—",
        w("cell.asked", gpus=run.gpus, nodes=run.nodes),
        w(f"expectation.{run.expectation.value}"),
        w.instant(run.submitted_at),
        w.instant(run.started_at),
        w.instant(run.finished_at),
        waited,
        run.main_wait_reason or "—",
        w.duration(run.run_seconds) if run.run_seconds is not None else "—",
        w.lines(while_it_ran(record, w)),
        w.outcome(run.outcome, run.expectation) if run.outcome else w("word.unfinished"),
        _cause(record, w),
        w.note(record.explanation) if record.explanation else "—",
        w.names(run.node_names),
    ]


def task_blocks(records: Sequence[TaskRecord], w: Words) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, w("sec.task_records"), anchor="task_records"),
        Text(w("note.task_records"), "note"),
    ]
    if not records:
        return [*blocks, Text(w("note.no_items"))]
    return [
        *blocks,
        Table(
            task_headers(w),
            [task_row(r, w, short_run_id(r.run.run_id)) for r in records],
            row_ids=[run_anchor(r.run.run_id) for r in records],
            filter_label=w("label.filter_tasks"),
        ),
    ]


def tasks_csv(records: Sequence[TaskRecord], w: Words) -> str:
    """One row per run, stable English column names; times in the platform's timezone, ISO
    8601 with their offset."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        run = record.run
        writer.writerow(
            [
                run.run_id,
                run.probe,
                run.tenant,
                run.user or "",
                run.queue or "",
                run.window or "",
                run.expectation.value,
                run.gpus,
                run.nodes,
                *(
                    iso(t, w.timezone) or ""
                    for t in (run.submitted_at, run.started_at, run.finished_at)
                ),
                _number(run.queue_wait_seconds),
                run.main_wait_reason or "",
                _number(run.run_seconds),
                run.outcome.value if run.outcome else "",
                run.reason or "",
                run.message or "",
                "" if run.exit_code is None else run.exit_code,
                w.note(record.explanation) if record.explanation else "",
                record.cause.cause.value if record.cause else "",
                w.evidence(record.cause.evidence) if record.cause else "",
                " ".join(run.node_names),
                *_around_csv(record),
            ]
        )
    return out.getvalue()


def while_it_ran(record: TaskRecord, w: Words) -> list[str]:
    """The quota in force, its GPUs (for a run that started) and the alerts, each a line."""
    around = record.around
    lines = [w("around.quota", quota=_quota(around.quota, w))]
    if record.run.started_at is not None:  # one that never started held no GPU
        lines += [_gpu(record, w), _gpu_errors(around.gpu_errors, w)]
    if around.alerts is None:
        lines.append(w("around.alerts.not_observed"))
    elif around.alerts:
        lines.append(w("around.alerts", names=list(around.alerts)))
    else:
        lines.append(w("around.alerts.none"))
    return lines


def _quota(quota: Quota | None, w: Words) -> str:
    if quota is None:
        return "—"
    gpus = " → ".join(w.integer(g) for g in quota.gpus)
    if quota.source is QuotaSource.CONFIGURED:
        return w("around.quota.configured", gpus=gpus)
    if quota.borrowing_limit_gpus is None:
        return w("around.quota.queue.unlimited", gpus=gpus)
    if quota.borrowing_limit_gpus:
        return w("around.quota.queue.borrowing", gpus=gpus, borrow=quota.borrowing_limit_gpus)
    return w("around.quota.queue", gpus=gpus)


def _gpu(record: TaskRecord, w: Words) -> str:
    around = record.around
    if not around.gpus_watched:
        return w("around.gpu.not_observed")
    gpu = around.gpu
    if gpu is None:
        return w("around.gpu.not_sampled")
    memory = gpu.memory_peak_bytes
    if gpu.utilization_avg_percent is None:
        if memory is None:
            return w("around.gpu.unread", gpus=gpu.gpus)
        return w("around.gpu.memory", memory_bytes=memory, gpus=gpu.gpus)
    avg, top = w.percent(gpu.utilization_avg_percent), w.percent(gpu.utilization_max_percent)
    if memory is None:
        return w("around.gpu.no_memory", gpus=gpu.gpus, avg=avg, max=top)
    return w("around.gpu", gpus=gpu.gpus, avg=avg, max=top, memory_bytes=memory)


def _gpu_errors(errors: GpuErrors | None, w: Words) -> str:
    if errors is None:
        return w("around.gpu_errors.not_observed")
    if not errors.count or errors.worst is None:
        return w("around.gpu_errors.none")
    worst = w("around.xid", xid=errors.xid) if errors.xid else w.detector(errors.worst)
    if errors.fatal:
        return w("around.gpu_errors.fatal", count=errors.count, worst=worst)
    return w("around.gpu_errors", count=errors.count, worst=worst)


def _around_csv(record: TaskRecord) -> list[object]:
    around, gpu = record.around, record.around.gpu
    quota, errors = around.quota, around.gpu_errors
    return [
        "" if quota is None else " ".join(str(g) for g in quota.gpus),
        "" if quota is None else quota.source.value,
        (0 if gpu is None else gpu.samples) if around.gpus_watched else "",
        _number(gpu.utilization_avg_percent if gpu else None),
        "" if gpu is None or gpu.utilization_max_percent is None else gpu.utilization_max_percent,
        "" if gpu is None or gpu.memory_peak_bytes is None else gpu.memory_peak_bytes,
        "" if errors is None else errors.count,
        "" if errors is None else errors.worst or "",
        "" if errors is None else errors.xid or "",
        "" if around.alerts is None else " ".join(around.alerts),
    ]


def _cause(record: TaskRecord, w: Words) -> str:
    if record.cause is None:
        return "—"
    cause = w(f"cause.{record.cause.cause.value}")
    evidence = record.cause.evidence
    return (
        w("cell.cause_evidence", cause=cause, evidence=w.evidence(evidence)) if evidence else cause
    )


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"
