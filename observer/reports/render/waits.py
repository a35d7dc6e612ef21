"""Why jobs waited, as blocks: per tenant and the scheduler's reason, in its own words, the
hours the tenants' own jobs spent pending (added up over the jobs) and the probes' beside
them, the longest of each tenant first."""

from __future__ import annotations

from collections.abc import Mapping

from observer.reports.compute.figures import PeriodFigures
from observer.reports.render.blocks import Block, Heading, Table, Text
from observer.reports.render.i18n import Words


def wait_reason_blocks(day: PeriodFigures, w: Words) -> list[Block]:
    jobs, probes = day.queue.wait_reason_seconds, day.queue.probe_wait_reason_seconds
    blocks: list[Block] = [
        Heading(2, w("sec.wait_reasons"), anchor="wait_reasons"),
        Text(w("note.wait_reasons"), "note"),
    ]
    rows = [
        [tenant, reason, _hours(jobs, tenant, reason, w), _hours(probes, tenant, reason, w)]
        for tenant in sorted(jobs.keys() | probes.keys())
        for reason in _reasons(jobs.get(tenant, {}), probes.get(tenant, {}))
    ]
    if not rows:
        return [*blocks, Text(w("note.no_items"))]
    columns = [
        w("col.tenant"),
        w("col.wait_reason"),
        w("col.tenant_jobs_pending_hours"),
        w("col.probes_pending_hours"),
    ]
    return [*blocks, Table(columns, rows)]


def _reasons(jobs: Mapping[str, float], probes: Mapping[str, float]) -> list[str]:
    """A tenant's reasons, the longest its own jobs waited for first, then the probes'."""
    reasons = jobs.keys() | probes.keys()
    return sorted(reasons, key=lambda r: (-jobs.get(r, 0.0), -probes.get(r, 0.0), r))


def _hours(seconds: Mapping[str, Mapping[str, float]], tenant: str, reason: str, w: Words) -> str:
    value = seconds.get(tenant, {}).get(reason)
    return "—" if value is None else w.decimal(value / 3600, 1)
