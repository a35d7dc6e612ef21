"""Who used what, as blocks, JSON and CSV: GPU-hours per tenant x pool x task type and per
tenant (with cost where a price is set), the memory of each tenant's GPUs, GPU-hours per user
where the scheduler names users, and the fleet's peak demand against its capacity."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from observer.reports.compute.usage import UNATTRIBUTED, WHOLE_DAY, Usage, UsageRow
from observer.reports.render.blocks import Block, Heading, Table, Text
from observer.reports.render.i18n import Words

# The stable columns of gpu_hours.csv and of each `gpu_hours` row of the JSON.
CSV_COLUMNS = ("tenant", "pool", "task_type", "allocated", "busy", "idle", "cost", "currency")


def usage_blocks(usage: Usage, w: Words) -> list[Block]:
    blocks: list[Block] = [
        Heading(2, w("sec.usage"), anchor="usage"),
        Text(w("note.usage", interval_seconds=usage.sample_seconds), "note"),
    ]
    if not usage.rows:
        return [*blocks, Text(w("note.no_gpu_hours"))]
    priced = usage.currency is not None
    blocks += [
        Text(
            w("note.usage_cost", currency=usage.currency)
            if usage.currency is not None
            else w("note.usage_no_price"),
            "note",
        ),
        *(Text(w.note(n)) for n in usage.pool_notes),
        Heading(3, w("sub.usage_by_tenant")),
        _table(_by_tenant(usage), w, with_pool=False, with_cost=priced),
        Heading(3, w("sub.usage_rows")),
        _table(usage.rows, w, with_pool=True, with_cost=priced),
    ]
    return [
        *blocks,
        *_memory_blocks(usage, w),
        *_user_blocks(usage, w),
        *_capacity_blocks(usage, w),
    ]


def _table(rows: Sequence[UsageRow], w: Words, *, with_pool: bool, with_cost: bool) -> Table:
    """GPU-hours per row; the cost column only where a price is set (a row of a pool with no
    price of its own nor "*" shows none)."""
    columns = [
        w("col.tenant"),
        *([w("col.pool"), w("col.task")] if with_pool else []),
        w("col.allocated_gpu_hours"),
        w("col.busy_gpu_hours"),
        w("col.idle_gpu_hours"),
        *([w("col.cost")] if with_cost else []),
    ]
    cells = [
        [
            _tenant(row.tenant, w),
            *([row.pool, _task_type(row.task_type, w)] if with_pool else []),
            w.decimal(row.allocated_hours, 1),
            w.decimal(row.busy_hours, 1),
            w.decimal(row.idle_hours, 1),
            *([w.decimal(row.cost, 2) if row.cost is not None else "—"] if with_cost else []),
        ]
        for row in rows
    ]
    return Table(columns, cells)


def _by_tenant(usage: Usage) -> list[UsageRow]:
    """Each tenant's rows added up over pools and task types: its cost among them."""
    totals: dict[str, UsageRow] = {}
    for row in usage.rows:
        seen = totals.get(row.tenant)
        totals[row.tenant] = (
            row
            if seen is None
            else UsageRow(
                row.tenant,
                "",
                "",
                seen.allocated_hours + row.allocated_hours,
                _plus(seen.busy_hours, row.busy_hours),
                _plus(seen.idle_hours, row.idle_hours),
                _plus(seen.cost, row.cost),
            )
        )
    return sorted(totals.values(), key=lambda r: (r.tenant == UNATTRIBUTED, r.tenant))


def _plus(a: float | None, b: float | None) -> float | None:
    """A total is known only where each of its parts is: a pool without a price leaves its
    tenant's cost unknown, never understated."""
    return None if a is None or b is None else a + b


def _tenant(tenant: str, w: Words) -> str:
    return w("label.unattributed") if tenant == UNATTRIBUTED else tenant


def _task_type(task_type: str, w: Words) -> str:
    return w(f"task_type.{task_type}") if task_type else w("task_type.not_known")


def _memory_blocks(usage: Usage, w: Words) -> list[Block]:
    if not usage.memory:
        return []
    columns = [w("col.tenant"), w("col.memory_p50_gib"), w("col.memory_p95_gib")]
    rows = [[m.tenant, w.integer(m.p50_gib), w.integer(m.p95_gib)] for m in usage.memory]
    return [
        Heading(3, w("sub.usage_memory")),
        Text(w("note.usage_memory"), "note"),
        Table(columns, rows),
    ]


def _user_blocks(usage: Usage, w: Words) -> list[Block]:
    heading = Heading(3, w("sub.usage_users"))
    if not usage.users:
        return [heading, Text(w("note.usage_no_users"))]
    columns = [w("col.tenant"), w("col.user"), w("col.allocated_gpu_hours")]
    rows = [[u.tenant, u.user, w.decimal(u.allocated_hours, 1)] for u in usage.users]
    return [heading, Text(w("note.usage_users"), "note"), Table(columns, rows)]


def _capacity_blocks(usage: Usage, w: Words) -> list[Block]:
    if not usage.capacity:
        return []
    columns = [
        w("col.window"),
        w("col.capacity_gpus"),
        w("col.peak_demand_gpus"),
        w("col.over_capacity_hours"),
        w("col.observed_hours"),
    ]
    rows = [
        [
            w("usage.whole_period") if c.window == WHOLE_DAY else c.window,
            w.integer(c.capacity_gpus),
            w.integer(c.peak_demand_gpus),
            w.decimal(c.over_capacity_hours, 1),
            w.decimal(c.observed_hours, 1),
        ]
        for c in usage.capacity
    ]
    return [
        Heading(3, w("sub.usage_capacity")),
        Text(w("note.usage_capacity"), "note"),
        *([Text(w.note(usage.capacity_note))] if usage.capacity_note else []),
        Table(columns, rows),
    ]


def usage_json(usage: Usage) -> dict[str, Any]:
    """`gpu_hours`: rows of tenant ("" not attributed), pool, task_type, allocated, busy,
    idle, cost (hours and money as numbers; null where not known or no price);
    `gpu_hours_pools`: each pool's allocated GPU-hours as the scheduler gave them, which its
    rows add up to; `gpu_memory`, `gpu_hours_by_user`, `capacity` (the whole fleet, per
    window, "" the whole period)."""
    return {
        "gpu_hours": [_row_json(r) for r in usage.rows],
        "gpu_hours_pools": {p: _round(h) for p, h in usage.pool_allocated_hours.items()},
        "gpu_hours_currency": usage.currency,
        "gpu_sample_seconds": usage.sample_seconds,
        "gpu_memory": [
            {"tenant": m.tenant, "p50_gib": m.p50_gib, "p95_gib": m.p95_gib, "samples": m.samples}
            for m in usage.memory
        ],
        "gpu_hours_by_user": [
            {"tenant": u.tenant, "user": u.user, "allocated": _round(u.allocated_hours)}
            for u in usage.users
        ],
        "capacity": [
            {
                "pool": None,
                "window": c.window,
                "capacity_gpus": c.capacity_gpus,
                "peak_demand_gpus": c.peak_demand_gpus,
                "over_capacity_hours": _round(c.over_capacity_hours),
                "observed_hours": _round(c.observed_hours),
            }
            for c in usage.capacity
        ],
    }


def _row_json(row: UsageRow) -> dict[str, Any]:
    return {
        "tenant": row.tenant,
        "pool": row.pool,
        "task_type": row.task_type,
        "allocated": _round(row.allocated_hours),
        "busy": _round(row.busy_hours),
        "idle": _round(row.idle_hours),
        "cost": _round(row.cost),
    }


def _round(value: float | None) -> float | None:
    """Hours and money to a thousandth, as the other hours of the JSON."""
    return None if value is None else round(value, 3)


def gpu_hours_csv(usage: Usage) -> str:
    """The `gpu_hours` rows, stable English column names, hours and money as plain numbers."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in usage.rows:
        writer.writerow(
            [
                row.tenant,
                row.pool,
                row.task_type,
                *(
                    "" if value is None else f"{round(value, 3):g}"
                    for value in (row.allocated_hours, row.busy_hours, row.idle_hours, row.cost)
                ),
                usage.currency or "",
            ]
        )
    return out.getvalue()
