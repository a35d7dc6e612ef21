"""The faults a soak meets, done one after another to a running controller and agent on the
real Slurm, as an SRE would try them; prints one JSON line: for each fault what the observer
recorded, how soon, and whether that is what it should have said (`held`).

The controller (SQLite store on a small tmpfs of its own, so that its disk can fill) runs
one-GPU probes every few seconds and a two-node probe every minute; one agent reads node n1
through the stand-in NVML with Slurm as its owner directory. The faults, in order:

1. SIGHUP to both daemons: logged, both keep answering /healthz.
2. A setsid child that outlives its job on n1: reported against that job, closed when killed.
3. A node set down under a running two-node probe: Slurm requeues the job; the run keeps
   both attempts, the first a node failure, and no wait is negative.
4. slurmdbd stopped: accounting is blind (a condition, /healthz) while squeue still works.
5. munged stopped: the scheduler's own words (munge) in /healthz and the agent's owner state.
6. The store's disk filled: /healthz says the store, the condition opens and closes.
7. SIGTERM with probes in flight: the probes cancelled are the observer's own, not platform
   failures (the verdict's failure_evidence does not count them).
8. Throughout: the controller's RSS, from 20 s after its start to its stop.

Needs root (tmpfs, the cluster's daemons), the local Slurm (`deploy/local/infra/slurm-up.sh`,
`SLURM_CONF`) and the stand-in NVML (`make .build/fake-nvml/libnvidia-ml.so.1`). About 15
minutes. Run: `SLURM_CONF=... .venv/bin/python bench/fault_trial.py [sighup setsid node slurmdbd
munge disk]` (the faults named, or all).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from observer.domain import RunState
from observer.storage.database import upgrade
from observer.storage.store import Store
from tests.backends.slurm_harness import SlurmHarness, slurm_harness
from tests.faults.daemon import controller, events, slurm_config

REPO = Path(__file__).resolve().parents[1]
FAKE_NVML = REPO / ".build" / "fake-nvml" / "libnvidia-ml.so.1"
STORE_DISK_BYTES = 48 * 2**20
OUTAGE_SECONDS = 120
Check = Callable[[], Any]


def wait_for(check: Check, timeout_seconds: float, every: float = 0.5) -> tuple[Any, float]:
    """The first truthy value of `check` and the seconds it took; (last value, -1) on timeout."""
    started = time.monotonic()
    value = None
    while time.monotonic() - started < timeout_seconds:
        value = check()
        if value:
            return value, round(time.monotonic() - started, 1)
        time.sleep(every)
    return value, -1.0


def healthz(base: str) -> dict[str, Any]:
    try:
        answer = httpx.get(f"{base}/healthz", timeout=3)
        return {"code": answer.status_code, **answer.json()}
    except (httpx.HTTPError, ValueError) as exc:
        return {"code": None, "error": str(exc)}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


@contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    path.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)], check=True
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextmanager
def agent(
    work: Path, nvml_state: Path, slurm_conf: Path
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    config = work / "agent.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "agent": {
                    "gpu_backend": "nvml",
                    "nvml_library_path": str(FAKE_NVML),
                    "node_name": "n1",
                    "owners": "slurm",
                    "listen_host": "127.0.0.1",
                    "listen_port": 0,
                    "interval_seconds": 1,
                    "shutdown_deadline_seconds": 5,
                },
                "detectors": {"node": {"grace_seconds": 10, "idle_seconds": 600}},
                "logging": {"format": "json"},
            }
        )
    )
    log = work / "agent.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "observer.cli", "agent", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "FAKE_NVML_STATE": str(nvml_state),
                "SLURM_CONF": str(slurm_conf),
            },
        )
    try:
        port, _ = wait_for(
            lambda: next(
                (e["port"] for e in events(log) if e.get("event") == "agent listening"), None
            ),
            60,
        )
        if port is None:
            raise RuntimeError(f"the agent did not listen: {log.read_text()[-2000:]}")
        yield proc, f"http://127.0.0.1:{port}", log
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def nvml_state(pids_on_gpu0: tuple[int, ...] = ()) -> str:
    """Four idle stand-in GPUs; the given pids hold 2 GiB each on GPU 0."""
    lines = []
    for index in range(4):
        procs = pids_on_gpu0 if index == 0 else ()
        used = 600 * 2**20 + len(procs) * 2 * 2**30
        text = (
            f"gpu utilization_gpu_percent=0 memory_used_bytes={used} "
            f"memory_total_bytes={141 * 2**30} power_milliwatts=120000 temperature_celsius=33"
        )
        if procs:
            text += " processes=" + ",".join(f"{pid}:{2 * 2**30}" for pid in procs)
        lines.append(text)
    return "gpu " + "\ngpu ".join(line.removeprefix("gpu ") for line in lines) + "\n"


class Trial:
    def __init__(self, slurm: SlurmHarness, work: Path, store_url: str) -> None:
        self.slurm = slurm
        self.work = work
        self.store_url = store_url
        self.rows: list[dict[str, Any]] = []

    def row(self, fault: str, held: bool, **observed: Any) -> None:
        self.rows.append({"fault": fault, "held": held, **observed})
        print(json.dumps(self.rows[-1]), file=sys.stderr, flush=True)

    def findings(self, detector: str | None = None) -> list[Any]:
        with Store(self.store_url) as store:
            return store.findings(detector=detector)

    def runs(self) -> list[Any]:
        with Store(self.store_url) as store:
            return store.runs()


def slurm_env(slurm: SlurmHarness) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(slurm.slurm_conf)}


def answers(slurm: SlurmHarness, *argv: str) -> bool:
    """Whether a Slurm command succeeds now."""
    return (
        subprocess.run(argv, env=slurm_env(slurm), capture_output=True, check=False).returncode == 0
    )


def slurm_daemon_pid(slurm: SlurmHarness, name: str) -> int:
    return int((slurm.slurm_conf.parent.parent / "run" / f"{name}.pid").read_text())


def main(chosen: list[str]) -> None:
    """`chosen`: the faults to do (all when empty); the shutdown always ends the trial."""
    if os.geteuid() != 0:
        sys.exit("fault_trial: needs root (a tmpfs for the store, the cluster's daemons)")
    if not FAKE_NVML.exists():
        sys.exit(
            f"fault_trial: no stand-in NVML at {FAKE_NVML}: make {FAKE_NVML.relative_to(REPO)}"
        )
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="observer-trial-")))
        slurm = stack.enter_context(slurm_harness())
        disk = stack.enter_context(tmpfs(work / "store", STORE_DISK_BYTES))
        store_url = f"sqlite:///{disk / 'observer.db'}"
        upgrade(store_url)
        state = work / "nvml-state"
        state.write_text(nvml_state())
        proc_a, agent_base, agent_log = stack.enter_context(agent(work, state, slurm.slurm_conf))
        config = slurm_config(
            work,
            slurm,
            store_url,
            agent_urls=[agent_base],
            probes={"short": {"duration_seconds": 3}, "multi-node": {"duration_seconds": 60}},
            plan=[
                {"window": "always", "probe": "short", "every_seconds": 5},
                {"window": "always", "probe": "multi-node", "every_seconds": 60},
            ],
            job_listing_interval_seconds=30,
            # The two-node probe takes both nodes' four GPUs, beside the tenant's one-GPU
            # probes in flight.
            max_probe_gpus=16,
            max_probe_gpus_per_tenant=12,
        )
        log = work / "controller.log"
        ctl = stack.enter_context(controller(config, log))
        trial = Trial(slurm, work, store_url)
        time.sleep(20)
        started = time.monotonic()
        rss = [rss_kib(ctl.proc.pid)]  # after the start-up's imports and first ticks
        faults: dict[str, Callable[[], None]] = {
            "sighup": lambda: sighup(trial, ctl, proc_a, agent_base, log, agent_log),
            "setsid": lambda: setsid_child(trial, state),
            "node": lambda: node_failure(trial),
            "slurmdbd": lambda: slurmdbd_outage(trial, ctl.base),
            "munge": lambda: munge_outage(trial, ctl.base, agent_base),
            "disk": lambda: disk_full(trial, ctl.base, disk),
        }
        for name in chosen or list(faults):
            faults[name]()
            rss.append(rss_kib(ctl.proc.pid))
        shutdown(trial, ctl, config)
        minutes = (time.monotonic() - started) / 60
        trial.row(
            "memory",
            held=True,
            controller_rss_first_kib=rss[0],
            controller_rss_last_kib=rss[-1],
            minutes=round(minutes, 1),
            kib_per_minute=round((rss[-1] - rss[0]) / minutes, 1),
        )
        print(
            json.dumps({"bench": "fault_trial", "minutes": round(minutes, 1), "faults": trial.rows})
        )


def sighup(
    trial: Trial,
    ctl: Any,
    agent_proc: subprocess.Popen[bytes],
    agent_base: str,
    log: Path,
    agent_log: Path,
) -> None:
    ctl.proc.send_signal(signal.SIGHUP)
    agent_proc.send_signal(signal.SIGHUP)
    time.sleep(3)
    answers = (healthz(ctl.base)["code"], healthz(agent_base)["code"])
    logged = [
        any("sighup" in str(e.get("event", "")).lower() for e in events(path))
        for path in (log, agent_log)
    ]
    alive = ctl.proc.poll() is None and agent_proc.poll() is None
    trial.row(
        "sighup",
        held=alive and answers == (200, 200) and all(logged),
        healthz=answers,
        logged=logged,
    )


def setsid_child(trial: Trial, state: Path) -> None:
    pid_file = trial.work / "child.pid"
    job_id = (
        trial.slurm.cli(
            "sbatch",
            "--parsable",
            "-w",
            "n1",
            "--gres=gpu:1",
            "-J",
            "trial-leaker",
            "-o",
            "/dev/null",
            "--wrap",
            f"setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {pid_file}; sleep 2",
        )
        .strip()
        .split(";")[0]
    )
    pid_text, _ = wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 30)
    pid = int(pid_text)
    state.write_text(nvml_state((pid,)))
    ended_at = time.monotonic()

    def about_job() -> list[Any]:
        return [
            f
            for f in trial.findings()
            if job_id in json.dumps([f.subject, f.evidence], default=str)
        ]

    found, seconds = wait_for(about_job, 120)
    os.kill(pid, signal.SIGKILL)
    state.write_text(nvml_state())
    _, close_seconds = wait_for(lambda: (f := about_job()) and all(x.closed_at for x in f), 60)
    trial.row(
        "setsid_child_outlives_job",
        held=bool(found) and close_seconds >= 0,
        job_id=job_id,
        detectors=sorted({f.detector for f in found or []}),
        reported_after_seconds=seconds,
        closed_after_kill_seconds=close_seconds,
        since_job_end_seconds=round(time.monotonic() - ended_at, 1),
    )


def node_failure(trial: Trial) -> None:
    def running_wide() -> Any:
        return next(
            (
                r
                for r in trial.runs()
                if r.probe == "multi-node" and r.state is RunState.RUNNING and r.node_names
            ),
            None,
        )

    run, _ = wait_for(running_wide, 150, every=1)
    if run is None:
        trial.row("node_failure_under_probe", held=False, error="no two-node probe ran")
        return
    node = (
        next(n for n in run.node_names if n != "n1")
        if any(n != "n1" for n in run.node_names)
        else run.node_names[0]
    )
    trial.slurm.cli("scontrol", "update", f"nodename={node}", "state=down", "reason=fault-trial")
    try:
        time.sleep(10)
    finally:
        # Refused ("Invalid node state") when slurmd's answer already returned it to service.
        answers(trial.slurm, "scontrol", "update", f"nodename={node}", "state=resume")
    done, seconds = wait_for(
        lambda: next(
            (r for r in trial.runs() if r.run_id == run.run_id and r.state is RunState.DONE), None
        ),
        240,
        every=2,
    )
    # `attempts`: those the platform ended and queued again; the run's own is the latest.
    attempts = list(done.attempts) if done else []
    waits = [a.wait_seconds for a in attempts]
    trial.row(
        "node_failure_under_probe",
        held=bool(done)
        and any(a.state == "NODE_FAIL" and node in a.nodes for a in attempts)
        and all(w is None or w >= 0 for w in waits)
        and (done.queue_wait_seconds or 0) >= 0,
        node=node,
        outcome=getattr(done, "outcome", None) and done.outcome.value,
        reason=getattr(done, "reason", None),
        attempts=[
            {"nodes": a.nodes, "state": a.state, "reason": a.reason, "wait_seconds": a.wait_seconds}
            for a in attempts
        ],
        queue_wait_seconds=done.queue_wait_seconds if done else None,
        done_after_seconds=seconds,
    )


def slurmdbd_outage(trial: Trial, base: str) -> None:
    pid = slurm_daemon_pid(trial.slurm, "slurmdbd")
    os.kill(pid, signal.SIGTERM)
    try:
        seen, seconds = wait_for(lambda: "accounting" in json.dumps(healthz(base)), OUTAGE_SECONDS)
        time.sleep(max(0.0, OUTAGE_SECONDS - max(seconds, 0)))
        during = healthz(base)
    finally:
        subprocess.run(["slurmdbd"], env=slurm_env(trial.slurm), check=True)
    wait_for(lambda: answers(trial.slurm, "sacct", "-n", "-X", "-j", "1"), 60)
    _, close_seconds = wait_for(
        lambda: (f := trial.findings("accounting_unreachable")) and all(x.closed_at for x in f),
        120,
        every=2,
    )
    trial.row(
        "slurmdbd_stopped",
        held=bool(seen) and close_seconds >= 0,
        healthz_named_accounting_after_seconds=seconds,
        healthz_during=during,
        condition_closed_after_restart_seconds=close_seconds,
    )


def munge_outage(trial: Trial, base: str, agent_base: str) -> None:
    subprocess.run(["pkill", "-x", "munged"], check=True)
    try:
        named, seconds = wait_for(lambda: "munge" in json.dumps(healthz(base)).lower(), 90)
        during = healthz(base)
        # The agent asks its owner source every agent.owners_interval_seconds (10 s).
        agent_words, _ = wait_for(
            lambda: (
                (text := httpx.get(f"{agent_base}/v1/snapshot", timeout=5).text.lower())
                and "munge" in text
                and text
            ),
            30,
        )
        agent_words = agent_words or ""
    finally:
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
    # slurmd's and slurmctld's messages go through munge: the nodes answer again later.
    wait_for(lambda: answers(trial.slurm, "scontrol", "ping"), 60)
    wait_for(lambda: "*" not in trial.slurm.cli("sinfo", "-h", "-N", "-o", "%T"), 120, every=2)
    trial.row(
        "munge_stopped",
        held=bool(named) and "munge" in agent_words,
        healthz_named_munge_after_seconds=seconds,
        healthz_during=during,
        agent_owner_state_names_munge="munge" in agent_words,
    )


def disk_full(trial: Trial, base: str, disk: Path) -> None:
    """The store's volume filled up: SQLite's WAL reuses its pages, so a write fails only
    once the file must grow; the filler stays until the controller says the store failed."""
    filler = disk / "filler"
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True, check=False
    )
    try:
        failing, seconds = wait_for(lambda: healthz(base).get("store_error"), 180, every=1)
        during = healthz(base)
    finally:
        filler.unlink()
    _, back_seconds = wait_for(lambda: not healthz(base).get("store_error"), 90, every=1)
    found = trial.findings("store_unreachable")
    trial.row(
        "store_disk_full",
        held=bool(failing)
        and "store" in json.dumps(during)
        and bool(found)
        and all(f.closed_at for f in found),
        store_failing_after_seconds=seconds,
        healthz_during=during,
        store_back_after_seconds=back_seconds,
        store_unreachable=[
            (f.opened_at.isoformat(), f.closed_at and f.closed_at.isoformat()) for f in found
        ],
    )


def shutdown(trial: Trial, ctl: Any, config: Path) -> None:
    in_flight, _ = wait_for(lambda: [r for r in trial.runs() if r.state is not RunState.DONE], 30)
    ctl.proc.send_signal(signal.SIGTERM)
    code = ctl.proc.wait(timeout=60)
    cancelled = [r for r in trial.runs() if r.run_id in {x.run_id for x in in_flight or []}]
    out = trial.work / "reports"
    verdict = subprocess.run(
        [
            sys.executable,
            "-m",
            "observer.cli",
            "report",
            "verdict",
            "--provisional",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    failure_evidence = None
    for path in sorted(out.glob("verdict-*.json")):
        data = json.loads(path.read_text())
        failure_evidence = next(
            (c for c in data["criteria"] if c.get("criterion") == "failure_evidence"), None
        )
    trial.row(
        "sigterm_with_probes_in_flight",
        held=code == 0
        and failure_evidence is not None
        and failure_evidence.get("status") != "failed",
        exit_code=code,
        cancelled=[(r.run_id, r.outcome and r.outcome.value, r.reason) for r in cancelled],
        failure_evidence=failure_evidence,
        verdict_stderr=verdict.stderr[-500:],
    )


if __name__ == "__main__":
    main(sys.argv[1:])
