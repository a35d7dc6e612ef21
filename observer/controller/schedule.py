"""The plan on APScheduler 3.x: one interval job per plan entry. The only apscheduler import.

Each job coalesces missed runs into one, never overlaps itself, and is dropped when it is
later than the misfire grace (a controller that was paused does not fire a backlog)."""

from __future__ import annotations

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from observer.controller.service import Controller
from observer.loops import PeriodicLoop


def start_plan(
    controller: Controller,
    launches: list[PeriodicLoop],
    timezone: str,
    misfire_grace_seconds: float,
) -> BackgroundScheduler:
    """`launches[i]` runs plan entry i once (errors captured and counted by the loop)."""
    scheduler = BackgroundScheduler(
        timezone=timezone,
        job_defaults={
            "coalesce": True,
            "max_instances": 1,
            "misfire_grace_time": max(1, round(misfire_grace_seconds)),
        },
    )
    for index, (entry, loop) in enumerate(zip(controller.plan, launches, strict=True)):
        scheduler.add_job(
            loop.run_once,
            IntervalTrigger(seconds=entry.every_seconds, timezone=timezone),
            id=f"plan-{index}-{entry.window}-{entry.probe}",
            name=f"{entry.probe} in {entry.window}",
        )
    scheduler.start()
    return scheduler
