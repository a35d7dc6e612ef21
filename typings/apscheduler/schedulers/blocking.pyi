from apscheduler.schedulers.base import BaseScheduler

class BlockingScheduler(BaseScheduler):
    def shutdown(self, wait: bool = True) -> None: ...
