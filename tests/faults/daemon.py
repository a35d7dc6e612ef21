"""`observer controller` as the process a platform runs, for faults done to it or around it:
started from a config file, its JSON log in a file (a pipe would fill and block it over a
long test), its HTTP surface on a free port, killed or stopped as a supervisor would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.backends.slurm_harness import SlurmHarness
from tests.support.settings import ALWAYS

PROBE_NAME_PREFIX = "observer-"  # the Slurm backend's job names
RUN_COMMENT_PREFIX = "observer-run:"


@dataclass
class Controller:
    proc: subprocess.Popen[bytes]
    base: str

    def get(self, path: str, timeout_seconds: float = 1.0) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", timeout=timeout_seconds)


def slurm_config(tmp_path: Path, slurm: SlurmHarness, store_url: str, **controller: Any) -> Path:
    """A controller over the test Slurm cluster: two tenants, short probes launched often,
    fast loops; `controller` settings added."""
    config = {
        "controller": {
            "backend": "slurm",
            "slurm": {
                **slurm.settings.model_dump(
                    mode="json", include={"slurm_conf", "commands_dir", "output_dir"}
                ),
                "command_timeout_seconds": 5,
            },
            "windows": [ALWAYS],
            "tenants": [
                {"name": "research", "weight": 0.5, "queue": "gpu"},
                {"name": "prod", "weight": 0.5, "queue": "gpu"},
            ],
            "probes": {"short": {"duration_seconds": 2}},
            "plan": [{"window": "always", "probe": "short", "every_seconds": 2}],
            "gpus_per_node": 4,
            "max_probe_gpus": 12,
            "max_probe_gpus_per_tenant": 6,
            "follow_interval_seconds": 0.5,
            "snapshot_interval_seconds": 1,
            "alive_interval_seconds": 1,
            "shutdown_deadline_seconds": 10,
            "listen_host": "127.0.0.1",
            "listen_port": 0,
            **controller,
        },
        "storage": {"url": store_url},
        "reports": {"output_dir": str(tmp_path / "reports")},
        "logging": {"format": "json"},
    }
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def controller(config: Path, log: Path) -> Iterator[Controller]:
    """A running controller (its log appended to `log`); killed on the way out if still up."""
    with log.open("ab") as sink:
        start = sink.tell()
        proc = subprocess.Popen(
            [sys.executable, "-m", "observer.cli", "controller", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        yield Controller(proc, f"http://127.0.0.1:{_listening_port(proc, log, start)}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def stop(ctl: Controller) -> None:
    ctl.proc.send_signal(signal.SIGTERM)
    assert ctl.proc.wait(timeout=30) == 0


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def accounted_jobs(
    slurm: SlurmHarness, since: datetime, expected: set[str], timeout_seconds: float = 30
) -> dict[str, tuple[str, str]]:
    """probe_jobs() once slurmdbd lists every `expected` job id (slurmctld hands it the jobs
    cancelled at shutdown a moment later), or as it is after `timeout_seconds`."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        jobs = probe_jobs(slurm, since)
        if expected <= set(jobs) or time.monotonic() > deadline:
            return jobs
        time.sleep(1)


def probe_jobs(slurm: SlurmHarness, since: datetime) -> dict[str, tuple[str, str]]:
    """Slurm's accounting of the observer's probe jobs submitted since `since`: job id ->
    (run id from its comment, state), read with sacct as a person would."""
    out = slurm.cli(
        "sacct",
        "-X",
        "-n",
        "-P",
        "-a",
        "--format=JobIDRaw,JobName,Comment,State,Submit",
        "-S",
        since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        env={"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"},
    )
    jobs = {}
    for line in out.splitlines():
        job_id, name, comment, state, submitted = line.split("|")
        # -S selects jobs active after `since`: an earlier test's job ending then is not ours.
        if (
            name.startswith(PROBE_NAME_PREFIX)
            and comment.startswith(RUN_COMMENT_PREFIX)
            and int(submitted) >= int(since.timestamp())
        ):
            jobs[job_id] = (comment.removeprefix(RUN_COMMENT_PREFIX), state)
    return jobs


def _listening_port(proc: subprocess.Popen[bytes], log: Path, offset: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with log.open("rb") as f:
            f.seek(offset)
            for line in f:
                if line.startswith(b"{"):
                    event = json.loads(line)
                    if event.get("event") == "controller listening":
                        return int(event["port"])
        if proc.poll() is not None:
            raise AssertionError(f"the controller exited {proc.returncode}: {log.read_text()}")
        time.sleep(0.1)
    raise AssertionError(f"the controller did not listen within 60 s: {log.read_text()}")
