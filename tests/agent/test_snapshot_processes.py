"""What the running agent's /v1/snapshot says of each GPU process, read over HTTP from an
agent on the stand-in NVML with a /proc tree on disk: the executable and its owner always,
the full command line (which often carries tokens) only with agent.expose_command_lines, and
never on agent.metrics_port, the port a NetworkPolicy opens to Prometheus."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from observer.agent.main import run_agent
from observer.settings import Settings
from tests.gpu import fake_nvml
from tests.ownership.test_procfs import POD_CGROUP, POD_UID, write_process
from tests.support.net import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.fake_nvml

PID = 4242
ARGV = ["/opt/conda/bin/python3", "train.py", "--hf-token=hf_s3cr3t"]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A GPU running pid 4242, a pod's training process of uid 1000 (alice on the host)."""
    fake = fake_nvml.install(fake_nvml.require_library(), tmp_path, monkeypatch)
    fake.set([fake_nvml.FakeNvmlGpu(processes=((PID, 20 * 2**30),))])
    proc = tmp_path / "proc"
    write_process(proc, PID, comm="python3", cmdline=ARGV, cgroup=POD_CGROUP, uid=1000)
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n")
    return {
        "node_name": "gpu-node-0",
        "gpu_backend": "nvml",
        "nvml_library_path": fake.library,
        "proc_root": proc,
        "passwd_file": passwd,
        "interval_seconds": 0.05,
        "counters_interval_seconds": 0.5,
        "listen_host": "127.0.0.1",
        "listen_port": 0,
        "shutdown_deadline_seconds": 2,
    }


@contextmanager
def serving(agent: dict[str, Any]) -> Iterator[str]:
    stop, listening, ports = threading.Event(), threading.Event(), []

    def on_listening(port: int) -> None:
        ports.append(port)
        listening.set()

    settings = Settings.model_validate({"agent": agent})
    thread = threading.Thread(
        target=run_agent, args=(settings, stop), kwargs={"on_listening": on_listening}
    )
    thread.start()
    try:
        assert listening.wait(10)
        yield f"http://127.0.0.1:{ports[0]}"
    finally:
        stop.set()
        thread.join(5)


def processes(base: str) -> list[dict[str, Any]]:
    def listed() -> list[dict[str, Any]]:
        response = httpx.get(f"{base}/v1/snapshot")
        return response.json()["processes"] if response.status_code == 200 else []

    return wait_until(
        listed, "the agent never listed the GPU process", seconds=10, poll_seconds=0.05
    )


def test_by_default_a_process_is_its_executable_and_owner_without_its_command_line(
    node: dict[str, Any],
) -> None:
    with serving(node) as base:
        [process] = processes(base)
        body = httpx.get(f"{base}/v1/snapshot").text

    assert process["pid"] == PID
    assert (process["executable"], process["uid"], process["user"]) == ("python3", 1000, "alice")
    assert process["owner"]["kind"] == "pod" and process["owner"]["id"] == POD_UID
    assert process["command"] is None
    assert "hf_s3cr3t" not in body and "train.py" not in body


def test_with_expose_command_lines_the_full_command_line_is_served_too(
    node: dict[str, Any],
) -> None:
    with serving({**node, "expose_command_lines": True}) as base:
        [process] = processes(base)

    assert process["command"] == " ".join(ARGV)
    assert (process["executable"], process["user"]) == ("python3", "alice")


def test_the_metrics_port_serves_metrics_and_health_but_no_snapshot(
    node: dict[str, Any],
) -> None:
    metrics_port = free_port()
    with serving({**node, "metrics_port": metrics_port}) as base:
        processes(base)
        there = f"http://127.0.0.1:{metrics_port}"
        answers = {path: httpx.get(f"{there}{path}") for path in ("/metrics", "/healthz")}
        snapshot = httpx.get(f"{there}/v1/snapshot")

    assert {path: answer.status_code for path, answer in answers.items()} == {
        "/metrics": 200,
        "/healthz": 200,
    }
    assert "observer_gpu_memory_used_bytes" in answers["/metrics"].text
    assert snapshot.status_code == 404
    assert "python3" not in snapshot.text and str(PID) not in snapshot.text
