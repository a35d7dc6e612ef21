from collections.abc import Mapping
from typing import Any, Unpack, type_check_only

from apscheduler.schedulers.base import _Options
from apscheduler.schedulers.blocking import BlockingScheduler

@type_check_only
class _BackgroundOptions(_Options, total=False):
    daemon: bool  # whether the scheduler's thread is a daemon thread (default True)

class BackgroundScheduler(BlockingScheduler):
    def __init__(
        self, gconfig: Mapping[str, Any] = ..., **options: Unpack[_BackgroundOptions]
    ) -> None: ...
