from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, tzinfo
from logging import Logger
from typing import Any, TypedDict, Unpack, type_check_only

from apscheduler.job import Job
from apscheduler.triggers.base import BaseTrigger

@type_check_only
class _JobDefaults(TypedDict, total=False):
    misfire_grace_time: int | None
    coalesce: bool
    max_instances: int

@type_check_only
class _Options(TypedDict, total=False):
    timezone: tzinfo | str
    job_defaults: _JobDefaults
    logger: Logger | str
    jobstore_retry_interval: float
    jobstores: Mapping[str, Any]
    executors: Mapping[str, Any]

class BaseScheduler(metaclass=ABCMeta):
    # The options may also come in `gconfig`, as "apscheduler."-prefixed keys.
    def __init__(self, gconfig: Mapping[str, Any] = ..., **options: Unpack[_Options]) -> None: ...
    def start(self, paused: bool = False) -> None: ...
    @abstractmethod
    def shutdown(self, wait: bool = True) -> None: ...
    # Job options left out take the scheduler's job_defaults.
    def add_job(
        self,
        func: Callable[..., object] | str,
        trigger: BaseTrigger | str | None = None,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        id: str | None = None,
        name: str | None = None,
        misfire_grace_time: int | None = ...,
        coalesce: bool = ...,
        max_instances: int = ...,
        next_run_time: datetime | None = ...,
        jobstore: str = "default",
        executor: str = "default",
        replace_existing: bool = False,
        **trigger_args: Any,
    ) -> Job: ...
