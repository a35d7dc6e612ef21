"""The plan on APScheduler 3.x: one interval job per planned task. The only apscheduler import.

Each job coalesces missed runs into one, never overlaps itself, and is dropped when it is
later than the misfire grace (a controller that was paused does not fire a backlog)."""

from __future__ import annotations

from collections.abc import Sequence

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from observer.controller.compose import Task
from observer.loops import PeriodicLoop


def start_plan(
    planned: Sequence[tuple[Task, PeriodicLoop]], timezone: str, misfire_grace_seconds: float
) -> BackgroundScheduler:
    """Each task's loop runs once per interval (errors captured and counted by the loop)."""
    scheduler = BackgroundScheduler(
        timezone=timezone,
        job_defaults={
            "coalesce": True,
            "max_instances": 1,
            "misfire_grace_time": max(1, round(misfire_grace_seconds)),
        },
    )
    for index, (task, loop) in enumerate(planned):
        scheduler.add_job(
            loop.run_once,
            IntervalTrigger(seconds=task.interval_seconds, timezone=timezone),
            id=f"{index}-{task.name}",
            name=task.name,
        )
    scheduler.start()
    return scheduler
