"""The daily summary's GPU section as blocks, and the utilisation-by-hour chart the verdict
shows too (its hours in the platform's timezone, the windows shaded)."""

from __future__ import annotations

from observer.records import TASK_NOT_KNOWN, TENANT_JOB
from observer.reports.compute.events import owner_state_note
from observer.reports.compute.figures import PeriodFigures
from observer.reports.compute.gpu import UtilizationStats, gpm_note
from observer.reports.render import charts
from observer.reports.render.blocks import Block, Heading, Table, Text
from observer.reports.render.headline import utilization
from observer.reports.render.i18n import Words

_HOURS = tuple(f"{h:02d}" for h in range(24))


def gpu_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[Block]:
    g = day.gpu
    blocks: list[Block] = [Heading(2, w("sec.gpu"), anchor="gpu")]
    if not g.observed:
        blocks.append(Text(w("note.no_gpu_samples"), "note"))
    pools = sorted(g.by_pool.keys() | soak.gpu.by_pool.keys())
    blocks += [
        Heading(3, w("sub.by_pool")),
        Table(
            [
                w("col.pool"),
                w("col.gpus"),
                w("col.allocated"),
                w("col.used"),
                w("col.utilization"),
                w("col.sm_active_avg"),
                w.aside(w("col.previous_day"), w("col.utilization")),
                w.aside(w("col.soak_to_date"), w("col.utilization")),
            ],
            [
                [
                    pool,
                    w.decimal(g.by_pool[pool].gpus_avg) if pool in g.by_pool else "—",
                    w.share(g.by_pool[pool].allocated_share) if pool in g.by_pool else "—",
                    w.share(g.by_pool[pool].used_share) if pool in g.by_pool else "—",
                    w.percent(_pool_util(day, pool)),
                    w.percent(_pool_sm(day, pool)),
                    w.percent(_pool_util(prev, pool)) if prev else "—",
                    w.percent(_pool_util(soak, pool)),
                ]
                for pool in pools
            ],
        ),
    ]
    windows = sorted(g.by_window.keys() | soak.gpu.by_window.keys())
    if g.observed:
        blocks += [
            Heading(3, w("sub.by_window")),
            Table(
                [*_util_header(w, w("col.window")), w("col.sm_active_avg"), w("col.sm_active_p95")],
                [
                    _util_row(
                        [key],
                        g.by_window.get(key),
                        prev.gpu.by_window.get(key) if prev else None,
                        soak.gpu.by_window.get(key),
                        w,
                    )
                    + _sm_cells(g.sm_by_window.get(key), w)
                    for key in windows
                ]
                + [
                    _util_row(
                        ["*"], g.overall, prev.gpu.overall if prev else None, soak.gpu.overall, w
                    )
                    + _sm_cells(g.sm_overall, w)
                ],
            ),
            Text(w.note(gpm_note(g)), "note"),
        ]
    blocks += [
        Heading(3, w("sub.by_tenant")),
        Text(
            w("note.tenant_util", attributed=g.tenant_samples, samples=g.overall.samples)
            if g.tenant_samples and g.overall
            else w("note.tenant_util_not_observed"),
            "note",
        ),
        _tenant_gpu_table(day, prev, soak, w),
        *_task_blocks(day, prev, soak, w),
        Text(
            w(
                "note.gpu_coverage",
                sampled=g.nodes_sampled,
                known=g.nodes_known,
                unread=g.unread_samples,
            ),
            "note",
        ),
    ]
    if day.owners.known is not None:
        blocks.append(Text(w.note(owner_state_note("note", day.owners)), "note"))
    return blocks


def _tenant_gpu_table(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> Table:
    """Allocated (the scheduler's queues) against used (the agents' samples) per tenant."""
    g = day.gpu
    tenants = sorted(
        g.tenant_running_gpus_avg.keys()
        | soak.gpu.tenant_running_gpus_avg.keys()
        | g.by_tenant.keys()
        | soak.gpu.by_tenant.keys()
    )
    return Table(
        [
            w("col.tenant"),
            w("col.allocated_gpus_avg"),
            w("col.samples"),
            w("col.utilization"),
            w("col.sm_active_avg"),
            w("col.busy_share"),
            w.aside(w("col.previous_day"), f"{w('col.allocated')} / {w('col.utilization')}"),
            w.aside(w("col.soak_to_date"), f"{w('col.allocated')} / {w('col.utilization')}"),
        ],
        [
            [
                t,
                w.decimal(g.tenant_running_gpus_avg.get(t)),
                w.integer(g.by_tenant[t].samples if t in g.by_tenant else 0),
                w.percent(utilization(g.by_tenant.get(t), "avg_percent")),
                w.percent(utilization(g.sm_by_tenant.get(t), "avg_percent")),
                w.share(utilization(g.by_tenant.get(t), "busy_share")),
                _tenant_pair(prev, t, w) if prev else "—",
                _tenant_pair(soak, t, w),
            ]
            for t in tenants
        ],
    )


def _util_header(w: Words, *keys: str) -> list[str]:
    return [
        *keys,
        w("col.samples"),
        w("col.avg"),
        w("col.p50"),
        w("col.p95"),
        w("col.distribution"),
        w.aside(w("col.previous_day"), w("col.avg")),
        w.aside(w("col.soak_to_date"), w("col.avg")),
    ]


def _task_blocks(
    day: PeriodFigures, prev: PeriodFigures | None, soak: PeriodFigures, w: Words
) -> list[Block]:
    """The attributed samples by kind of task, then by tenant within each window."""
    g, p = day.gpu, prev.gpu if prev else None
    tasks = sorted(g.by_task.keys() | soak.gpu.by_task.keys())
    if not tasks:
        return []
    blocks: list[Block] = [
        Heading(3, w("sub.by_task")),
        Table(
            [*_util_header(w, w("col.task")), w("col.sm_active_avg"), w("col.sm_active_p95")],
            [
                _util_row(
                    [_task_name(t, w)],
                    g.by_task.get(t),
                    p.by_task.get(t) if p else None,
                    soak.gpu.by_task.get(t),
                    w,
                )
                + _sm_cells(g.sm_by_task.get(t), w)
                for t in tasks
            ],
        ),
        Text(w("note.task_util"), "note"),
    ]
    windows = sorted(g.by_window_tenant.keys() | soak.gpu.by_window_tenant.keys())
    if windows:
        blocks += [
            Heading(3, w("sub.by_window_tenant")),
            Table(
                _util_header(w, w("col.window"), w("col.tenant")),
                [
                    _util_row(
                        [window, tenant],
                        g.by_window_tenant.get(window, {}).get(tenant),
                        p.by_window_tenant.get(window, {}).get(tenant) if p else None,
                        soak.gpu.by_window_tenant.get(window, {}).get(tenant),
                        w,
                    )
                    for window in windows
                    for tenant in sorted(
                        g.by_window_tenant.get(window, {}).keys()
                        | soak.gpu.by_window_tenant.get(window, {}).keys()
                    )
                ],
            ),
        ]
    return blocks


def _task_name(task: str, w: Words) -> str:
    """A probe's name as the catalog gives it; the two kinds that are no probe, in words."""
    if task == TENANT_JOB:
        return w("word.tenant_job")
    if task == TASK_NOT_KNOWN:
        return w("word.unknown")
    return task


def _tenant_pair(figures: PeriodFigures, tenant: str, w: Words) -> str:
    allocated = w.decimal(figures.gpu.tenant_running_gpus_avg.get(tenant))
    used = w.percent(utilization(figures.gpu.by_tenant.get(tenant), "avg_percent"))
    return f"{allocated} / {used}"


def _pool_sm(figures: PeriodFigures, pool: str) -> float | None:
    use = figures.gpu.by_pool.get(pool)
    return utilization(use.sm_active if use else None, "avg_percent")


def _sm_cells(sm: UtilizationStats | None, w: Words) -> list[str]:
    return [w.percent(utilization(sm, "avg_percent")), w.percent(utilization(sm, "p95_percent"))]


def _pool_util(figures: PeriodFigures | None, pool: str) -> float | None:
    if figures is None or pool not in figures.gpu.by_pool:
        return None
    return utilization(figures.gpu.by_pool[pool].utilization, "avg_percent")


def _util_row(
    keys: list[str],
    day: UtilizationStats | None,
    prev: UtilizationStats | None,
    soak: UtilizationStats | None,
    w: Words,
) -> list[str]:
    return [
        *keys,
        w.integer(day.samples if day else 0),
        w.percent(utilization(day, "avg_percent")),
        w.percent(utilization(day, "p50_percent")),
        w.percent(utilization(day, "p95_percent")),
        " ".join(w.integer(n) for n in day.deciles) if day else "—",
        w.percent(utilization(prev, "avg_percent")),
        w.percent(utilization(soak, "avg_percent")),
    ]


def utilisation_chart(title_key: str, f: PeriodFigures, w: Words) -> str:
    util = [utilization(f.gpu.by_hour.get(h), "avg_percent") for h in _HOURS]
    allocated = [
        None if (s := f.gpu.allocated_share_by_hour.get(h)) is None else 100.0 * s for h in _HOURS
    ]
    return charts.lines(
        "utilisation",
        w(title_key),
        _HOURS,
        [charts.Series(w("chart.used"), util), charts.Series(w("chart.allocated"), allocated)],
        w.percent,
        w("chart.no_data"),
        w.labelled,
        axis=w("chart.hour_axis", timezone=w.zone(f.start, f.end)),
        bands=[
            charts.Band(window, frozenset(hours)) for window, hours in f.gpu.hours_by_window.items()
        ],
        y_max=100.0,
    )
