from typing import Any

from apscheduler.schedulers.base import BaseScheduler

class Job:
    id: str
    name: str
    def __init__(self, scheduler: BaseScheduler, id: str | None = None, **kwargs: Any) -> None: ...
