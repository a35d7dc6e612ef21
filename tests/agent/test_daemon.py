"""The running agent: its HTTP surface and its shutdown."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from observer.agent.main import run_agent
from observer.settings import Settings
from tests.support.settings import replay_agent_settings
from tests.support.waiting import wait_until


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _settings(trace: Path) -> Settings:
    return replay_agent_settings(
        trace,
        node_name="node-a",
        interval_seconds=0.05,
        counters_interval_seconds=0.5,
        shutdown_deadline_seconds=2,
    )


def test_serves_metrics_health_and_snapshot_then_stops_on_request(h200_trace: Path):
    stop = threading.Event()
    ports: list[int] = []
    listening = threading.Event()

    def on_listening(port: int) -> None:
        ports.append(port)
        listening.set()

    thread = threading.Thread(
        target=run_agent, args=(_settings(h200_trace), stop), kwargs={"on_listening": on_listening}
    )
    thread.start()
    try:
        assert listening.wait(10)
        base = f"http://127.0.0.1:{ports[0]}"
        wait_until(
            lambda: httpx.get(f"{base}/healthz").status_code == 200,
            "agent never became healthy",
            seconds=10,
            poll_seconds=0.05,
        )

        health = httpx.get(f"{base}/healthz").json()
        assert health["status"] == "ok"
        assert health["nvml"] == "ok"
        assert health["blind"] is False
        assert 0 <= health["last_good_tick_age_seconds"] < 5

        metrics = _samples(httpx.get(f"{base}/metrics").text)
        uuid = "GPU-c114cebc-2c7e-dd2b-ea65-fc1a95e8cebc"
        gpu = (("gpu", "0"), ("uuid", uuid))
        assert metrics["observer_gpu_memory_total_bytes", gpu] == 150754820096
        assert metrics["observer_gpu_utilization_ratio", gpu] >= 0
        info = (
            ("gpu", "0"),
            ("name", "NVIDIA H200"),
            ("node", "node-a"),
            ("pci_bus_id", "00000000:00:06.0"),
            ("uuid", uuid),
        )
        assert metrics["observer_gpu_info", info] == 1
        assert metrics["observer_loop_ticks_total", (("loop", "agent"),)] >= 1
        not_supported = (("call", "pcie_rx_throughput"), ("error", "not_supported"), ("gpu", "0"))
        assert metrics["observer_gpu_read_errors_total", not_supported] == 1

        snap = httpx.get(f"{base}/v1/snapshot").json()
        assert snap["node"] == "node-a"
        assert snap["driver"]["state"] == "ok"
        assert snap["gpus"][0]["identity"]["uuid"] == uuid
        assert snap["gpus"][0]["sample"]["memory_total_bytes"] == 150754820096
        assert isinstance(snap["findings"], list)

        assert httpx.get(f"{base}/nope").status_code == 404
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


# One SIGTERM; and the bursts GNU timeout, a supervisor that forwards signals, or a person
# pressing Ctrl-C twice deliver: every signal after the first arrives while it is dealt with.
SIGNAL_BURSTS = [
    [signal.SIGTERM],
    [signal.SIGTERM, signal.SIGTERM, signal.SIGTERM, signal.SIGINT, signal.SIGINT],
    [signal.SIGINT, signal.SIGINT],
]


@contextmanager
def _running_agent(tmp_path: Path, trace: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """`observer agent` replaying `trace` as a process, once it listens; and its port."""
    config = tmp_path / "agent.yaml"
    config.write_text(
        f"agent:\n  gpu_backend: replay\n  replay_trace_dir: {trace}\n"
        "  listen_host: 127.0.0.1\n  listen_port: 0\n  interval_seconds: 0.1\n"
        "  counters_interval_seconds: 1\n  shutdown_deadline_seconds: 3\n"
        "logging:\n  format: json\n"
    )
    with subprocess.Popen(
        [sys.executable, "-m", "observer.cli", "agent", "--config", str(config)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        assert proc.stderr is not None
        port = next(
            json.loads(line)["port"]
            for line in proc.stderr
            if json.loads(line).get("event") == "agent listening"
        )
        yield proc, port


@pytest.mark.parametrize(
    "burst", SIGNAL_BURSTS, ids=["sigterm", "sigterm-x3-sigint-x2", "sigint-x2"]
)
def test_signals_stop_the_daemon_within_its_deadline(
    tmp_path: Path, h200_trace: Path, burst: list[signal.Signals]
):
    with _running_agent(tmp_path, h200_trace) as (proc, _):
        assert proc.stderr is not None
        started = time.monotonic()
        for sig in burst:
            proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 3
        rest = [json.loads(line) for line in proc.stderr.read().splitlines()]
        assert [e["event"] for e in rest][-1] == "agent stopped"


def test_a_hangup_is_logged_and_the_agent_keeps_serving_until_sigterm(
    tmp_path: Path, h200_trace: Path
):
    with _running_agent(tmp_path, h200_trace) as (proc, port):
        assert proc.stderr is not None
        proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert proc.poll() is None
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        said = [json.loads(line)["event"] for line in proc.stderr.read().splitlines()]
    assert any(event.startswith("SIGHUP received") for event in said)
    assert said[-1] == "agent stopped"
