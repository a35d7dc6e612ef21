"""The log backends the tests read: HTTP stand-ins for Loki and Elasticsearch (`serve`), and
the real rsyslog pipeline (`pipeline`), skipped where it cannot start and failed when
CI=true."""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests import components
from tests.log_readers.rsyslog import Pipeline, logs_dir, start_pipeline
from tests.log_readers.stand_ins import Answer, Request, Server, start_server

Serve = Callable[[Callable[[Request], Answer]], Server]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Starts servers answering with the given function; stops them after the test."""
    running: list[ThreadingHTTPServer] = []

    def start(answer: Callable[[Request], Answer]) -> Server:
        state, server = start_server(answer)
        running.append(server)
        return state

    yield start
    for server in running:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def pipeline_dir() -> Path:
    components.require("rsyslog")
    reason = start_pipeline()
    if reason is not None:
        components.unavailable(reason)
    return logs_dir()


@pytest.fixture
def pipeline(pipeline_dir: Path) -> Iterator[Pipeline]:
    """The pipeline to one test at a time across sessions: a stopped shipper would lose
    another session's lines. The shipper always runs again afterwards."""
    with (pipeline_dir / "tests.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pipeline = Pipeline(pipeline_dir)
        try:
            yield pipeline
        finally:
            pipeline.resume_shipper()
