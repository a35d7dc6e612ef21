"""The Store: findings, GPU samples, probe runs, scheduler state, alerts, interventions,
report deliveries, job tallies, the controller's own runs, skipped probe launches and the
inference service in and out of SQLite or PostgreSQL, as domain types; and the store's own
room (its size, its volume's free space, raw samples past their retention deleted).

One class made of the per-aggregate repositories as mixins over one shared engine: callers
keep a single typed object, and no method is written twice as it would be to delegate.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Self

from observer.clock import Clock, SystemClock
from observer.storage.alerts import AlertsRepository
from observer.storage.controller_runs import ControllerRunsRepository
from observer.storage.database import check_schema, create_engine, display
from observer.storage.deliveries import DeliveriesRepository
from observer.storage.findings import FindingsRepository
from observer.storage.gpu_samples import GpuSamplesRepository
from observer.storage.inference import InferenceRepository
from observer.storage.interventions import InterventionsRepository
from observer.storage.job_tallies import JobTalliesRepository
from observer.storage.probe_skips import ProbeSkipsRepository
from observer.storage.room import RoomRepository
from observer.storage.runs import RunsRepository
from observer.storage.scheduler_state import SchedulerStateRepository


class Store(
    FindingsRepository,
    RunsRepository,
    GpuSamplesRepository,
    SchedulerStateRepository,
    AlertsRepository,
    InterventionsRepository,
    DeliveriesRepository,
    JobTalliesRepository,
    ControllerRunsRepository,
    ProbeSkipsRepository,
    InferenceRepository,
    RoomRepository,
):
    """Everything the observer keeps, in one database. Opening checks that the database is
    reachable and migrated to the schema this code expects. `clock` times outages."""

    def __init__(
        self,
        url: str,
        clock: Clock | None = None,
        on_error: Callable[[], object] = lambda: None,
        *,
        durable: bool = True,
    ) -> None:
        """`on_error` is called on each failed database call, before its StoreError rises;
        `durable` as in `create_engine`."""
        self._url = url
        where = display(url)
        engine = create_engine(url, durable=durable)
        super().__init__(engine, where, clock or SystemClock(), on_error)
        try:
            check_schema(self._engine, where)
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def url(self) -> str:
        """The URL it was opened with, password and all: for a process of the observer's own
        that opens the same database (the report build); never for a message."""
        return self._url

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
