"""Expected wait, as evidence about the platform: whether it tells a waiting job when it will
start, and how far off it is; the observer's own estimate beside it. Per tenant and size
(GPUs), for each source, the jobs that started, the error of the estimate (the job's start
minus its expected start: late is positive; the platform's first estimate seen, as a user
who just submitted would see it; the observer's at a probe's submission) at the median and
the 90th percentile, and the share of the jobs that started with no estimate.

The platform's rows count every job the snapshots saw waiting that started in the period,
the tenants' own and the observer's probes; the observer's, its probe runs submitted in the
period that started. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from observer.domain import ProbeRun
from observer.records import JobEstimate
from observer.reports.compute.data import nearest_rank


class EstimateSource(StrEnum):
    PLATFORM = "platform"  # the scheduler's own (Slurm's backfill StartTime)
    OBSERVER = "observer"  # the GPUs pending ahead over the recent start rate


@dataclass(frozen=True, slots=True)
class ExpectedWaitRow:
    tenant: str
    gpus: int
    source: EstimateSource
    jobs: int  # started
    error_p50_seconds: float | None  # None: none of them had an estimate
    error_p90_seconds: float | None
    without_estimate_share: float


@dataclass(frozen=True, slots=True)
class ExpectedWait:
    """`platform_estimate`: the platform gave an estimate for at least one job seen waiting
    that started; `waited`: the snapshots saw a job waiting that started (without one,
    whether the platform gives estimates is not observed)."""

    platform_estimate: bool = False
    waited: bool = False
    rows: tuple[ExpectedWaitRow, ...] = ()


def expected_wait(estimates: Iterable[JobEstimate], runs: Iterable[ProbeRun]) -> ExpectedWait:
    """`estimates`: the jobs seen waiting that started in the period; `runs`: the probe runs
    submitted in it."""
    errors: dict[tuple[str, int, EstimateSource], list[float | None]] = {}
    for job in estimates:
        if job.started_at is None:
            continue
        expected = job.first_expected_start_at
        error = None if expected is None else (job.started_at - expected).total_seconds()
        errors.setdefault((job.tenant, job.gpus, EstimateSource.PLATFORM), []).append(error)
    waited = bool(errors)
    platform = any(e is not None for e in (x for xs in errors.values() for x in xs))
    for run in runs:
        if run.first_started_at is not None:
            key = (run.tenant, run.gpus, EstimateSource.OBSERVER)
            errors.setdefault(key, []).append(run.expected_wait_error_seconds)
    # the platform's row of a tenant and size first, the observer's beside it
    order = sorted(errors, key=lambda k: (k[0], k[1], k[2] is not EstimateSource.PLATFORM))
    rows = tuple(_row(*key, errors[key]) for key in order)
    return ExpectedWait(platform_estimate=platform, waited=waited, rows=rows)


def _row(
    tenant: str, gpus: int, source: EstimateSource, errors: Sequence[float | None]
) -> ExpectedWaitRow:
    known = sorted(e for e in errors if e is not None)
    return ExpectedWaitRow(
        tenant=tenant,
        gpus=gpus,
        source=source,
        jobs=len(errors),
        error_p50_seconds=known[nearest_rank(0.5, len(known)) - 1] if known else None,
        error_p90_seconds=known[nearest_rank(0.9, len(known)) - 1] if known else None,
        without_estimate_share=(len(errors) - len(known)) / len(errors),
    )
