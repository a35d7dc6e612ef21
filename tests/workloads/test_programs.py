"""The other probe programs through the real command line: the canary lines the log-loss
reader parses back whole, the inference stand-in's readiness and fixed latency, and the
failure probes' ends."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from observer.detectors.log_loss import analyse
from observer.log_readers.base import DeliveredLine
from tests.support.cli import CliResult, run_cli
from tests.support.net import free_port, taken_port

RUN = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"


def probe(*args: str) -> CliResult:
    return run_cli("probe", *args)


def delivered(output: str) -> list[DeliveredLine]:
    return [DeliveredLine(text, "stdout") for text in output.splitlines()]


def test_a_paced_canary_is_read_back_whole_in_order() -> None:
    done = probe("log-canary", "--run-id", RUN, "--lines", "20", "--interval-seconds", "0.01")

    assert done.exit_code == 0, done.stderr
    report = analyse(RUN, 20, delivered(done.stdout))
    assert report.clean and report.received == 20
    stamps = [float(line.split("ts=")[1]) for line in done.stdout.splitlines()]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= 19 * 0.01


def test_a_burst_writes_lines_of_the_asked_size_the_reader_parses() -> None:
    done = probe("log-burst", "--run-id", RUN, "--lines", "150")

    assert done.exit_code == 0, done.stderr
    sizes = [len(line.encode()) + 1 for line in done.stdout.splitlines()]  # with the newline
    assert (len(sizes), max(sizes), min(sizes)) == (150, 1024, 1022)  # 3- and 1-digit seqs
    report = analyse(RUN, 150, delivered(done.stdout))
    assert report.clean and report.received == 150


def _get(url: str) -> tuple[int, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - started


def test_serve_is_ready_after_its_warm_up_and_answers_after_its_latency() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "observer.cli", "probe", "serve", "--host", "127.0.0.1",
         "--port", str(port), "--latency-ms", "150", "--warmup-seconds", "2"],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                first = _get(f"{base}/healthz")[0]
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline, "serve never listened"
                time.sleep(0.05)
        assert first == 503  # warming up: not ready
        assert _get(f"{base}/infer")[0] == 503
        while _get(f"{base}/healthz")[0] != 200:
            assert time.monotonic() < deadline, "serve never became ready"
            time.sleep(0.1)
        status, took = _get(f"{base}/infer")
        assert status == 200 and took >= 0.15
        assert _get(f"{base}/nothing")[0] == 404
    finally:
        server.terminate()
        assert server.wait(timeout=20) == 0  # SIGTERM: a clean stop


def test_serve_on_a_taken_port_says_so_in_one_line() -> None:
    with taken_port() as port:
        done = probe("serve", "--host", "127.0.0.1", "--port", str(port), "--seconds", "1")

    assert done.exit_code == 2
    assert done.stderr == (
        f"--port: port {port} on 127.0.0.1 is already in use; choose another (0: any free one)\n"
    )


def test_serve_for_a_duration_stops_by_itself() -> None:
    done = probe("serve", "--host", "127.0.0.1", "--port", "0", "--seconds", "0.5")

    assert done.exit_code == 0, done.stderr


@pytest.mark.parametrize("code", [0, 3, 42])
def test_exit_ends_with_the_code_asked(code: int) -> None:
    done = probe("exit", "--code", str(code))

    assert (done.exit_code, done.stderr) == (code, "")


def test_oom_without_a_limit_holds_its_bound_and_says_it_was_not_killed() -> None:
    done = probe("oom", "--mib", "32")

    assert done.exit_code == 0
    assert done.stdout == "oom: held 32 MiB and was not killed: no memory limit reached\n"


def test_sleep_holds_then_exits_zero() -> None:
    started = time.monotonic()

    done = probe("sleep", "--seconds", "0.3")

    assert done.exit_code == 0 and time.monotonic() - started >= 0.3
